package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
)

// Run runs the conformance suite (DRV-1, DRV-2) against h.Driver as subtests
// of t. The subtests run in parallel with each other and all finish before
// Run returns, so the caller may close the driver right after.
//
// Rules the suite fixes where the interface comment is silent:
//   - Create of an existing name, and a spec with a bad name, fail ErrInvalid.
//   - Start of a running instance, and Stop or Kill of a stopped one, are
//     no-ops that return nil (Start keeps StartedAt).
//   - Delete of a running instance fails ErrInvalid and leaves it running.
//   - A stopped instance has StartedAt zero and Pid 0; ExitCode is the last
//     run's code.
//   - Every method fails ErrNotFound for a name that was never created or
//     was deleted (Watch may say ErrUnsupported instead, where it lacks).
//   - Watch on an instance that is not running calls fn once, soon, with the
//     last exit, so an exit between Start and Watch is never lost.
//   - Logs returns stdout and stderr together, in the order written when
//     they come from one process; Tail N is exactly the last N lines.
func Run(t *testing.T, h Harness) {
	h = h.withDefaults()
	if h.Driver == nil || h.Spec == nil {
		t.Fatal("drivertest.Run: Harness needs Driver and Spec")
	}
	s := newSuite(h)
	t.Run("conformance", func(t *testing.T) {
		tests := []struct {
			name string
			fn   func(*testing.T)
		}{
			{"Lifecycle", s.testLifecycle},
			{"ExitCodeAndRestart", s.testExitCodeAndRestart},
			{"StopGraceKillsTermIgnorer", s.testStopGrace},
			{"ListBySelector", s.testList},
			{"Watch", s.testWatch},
			{"WatchStop", s.testWatchStop},
			{"Exec", s.testExec},
			{"Logs", s.testLogs},
			{"LogsFollow", s.testFollow},
			{"NotFound", s.testNotFound},
			{"Invalid", s.testInvalid},
			{"Concurrent", s.testConcurrent},
			{"Usage", s.testUsage},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t)
			})
		}
	})
}

const longRun = "echo up; sleep 3600"

// DRV-1: create, start, inspect, stop, kill, delete and their no-op cases.
func (s *suite) testLifecycle(t *testing.T) {
	ctx := s.ctx(t)
	name := s.name("life")
	labels := s.labels(drivers.Labels{"drivertest.role": "life"})
	spec := s.h.Spec(name, longRun, labels)
	if err := s.d.Validate(ctx, spec); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := s.d.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { s.remove(t, name) })
	wantKind(t, "second Create of the same name", s.d.Create(ctx, spec), drivers.ErrInvalid)

	st := s.inspect(t, name)
	if st.Name != name || st.State != drivers.StateStopped {
		t.Fatalf("after Create: got name %q state %q, want %q stopped", st.Name, st.State, name)
	}
	checkLabels(t, st, labels)
	if !st.StartedAt.IsZero() || st.Pid != 0 {
		t.Errorf("created instance: StartedAt %v pid %d, want zero", st.StartedAt, st.Pid)
	}

	first := s.running(t, name)
	if first.StartedAt.IsZero() {
		t.Errorf("running instance has zero StartedAt")
	}
	if s.h.Has(FeaturePid) && first.Pid <= 0 {
		t.Errorf("running instance has pid %d", first.Pid)
	}
	checkLabels(t, first, labels)

	if err := s.d.Start(ctx, name); err != nil {
		t.Errorf("Start of a running instance: %v, want nil (no-op)", err)
	}
	if again := s.inspect(t, name); !again.StartedAt.Equal(first.StartedAt) || again.State != drivers.StateRunning {
		t.Errorf("Start of a running instance changed it: %+v, was %+v", again, first)
	}
	wantKind(t, "Delete of a running instance", s.d.Delete(ctx, name), drivers.ErrInvalid)
	if st := s.inspect(t, name); st.State != drivers.StateRunning {
		t.Errorf("refused Delete left state %q, want running", st.State)
	}

	if err := s.d.Stop(ctx, name, s.h.Grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	st = s.waitStopped(t, name)
	if !st.StartedAt.IsZero() || st.Pid != 0 {
		t.Errorf("stopped instance: StartedAt %v pid %d, want zero", st.StartedAt, st.Pid)
	}
	if err := s.d.Stop(ctx, name, s.h.Grace); err != nil {
		t.Errorf("Stop of a stopped instance: %v, want nil", err)
	}
	if err := s.d.Kill(ctx, name); err != nil {
		t.Errorf("Kill of a stopped instance: %v, want nil", err)
	}

	second := s.running(t, name)
	if !second.StartedAt.After(first.StartedAt) {
		t.Errorf("second run StartedAt %v is not after the first %v", second.StartedAt, first.StartedAt)
	}
	if err := s.d.Kill(ctx, name); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	s.waitStopped(t, name)
	third := s.running(t, name)
	if !third.StartedAt.After(second.StartedAt) {
		t.Errorf("run after Kill: StartedAt %v is not after %v", third.StartedAt, second.StartedAt)
	}
	if err := s.d.Kill(ctx, name); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	s.waitStopped(t, name)

	if err := s.d.Delete(ctx, name); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.d.Inspect(ctx, name)
	wantKind(t, "Inspect after Delete", err, drivers.ErrNotFound)
	wantKind(t, "second Delete", s.d.Delete(ctx, name), drivers.ErrNotFound)
	all, err := s.d.List(ctx, drivers.Labels{"drivertest.run": s.run, "drivertest.role": "life"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(all) != 0 {
		t.Errorf("List after Delete: %v, want none", names(all))
	}
}

// DRV-1: a run that exits on its own reports its code; Start runs it again.
func (s *suite) testExitCodeAndRestart(t *testing.T) {
	name := s.create(t, "exit", "echo bye; exit 3", nil)
	s.start(t, name)
	st := s.waitStopped(t, name)
	if st.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", st.ExitCode)
	}
	s.start(t, name)
	st = s.waitStopped(t, name)
	if st.ExitCode != 3 {
		t.Errorf("second run: exit code %d, want 3", st.ExitCode)
	}
}

// DRV-1, DRV-3: Stop kills a workload that ignores SIGTERM once the grace
// has passed.
func (s *suite) testStopGrace(t *testing.T) {
	name := s.create(t, "term", "trap '' TERM; echo ready; sleep 3600", nil)
	s.running(t, name)
	if s.h.Has(FeatureLogs) {
		s.waitLogs(t, name, "ready") // the trap is in place
	}
	if err := s.d.Stop(s.ctx(t), name, s.h.Grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	s.waitStopped(t, name)
}

// DRV-1: List returns the instances whose labels include the selector.
func (s *suite) testList(t *testing.T) {
	ctx := s.ctx(t)
	web := s.create(t, "lweb", longRun, drivers.Labels{"drivertest.test": "list", "drivertest.role": "web", "drivertest.tier": "front"})
	db := s.create(t, "ldb", longRun, drivers.Labels{"drivertest.test": "list", "drivertest.role": "db"})
	other := s.name("lother")
	spec := s.h.Spec(other, longRun, drivers.Labels{"drivertest.run": s.run + "x", "drivertest.test": "list", "drivertest.role": "web"})
	if err := s.d.Create(ctx, spec); err != nil {
		t.Fatalf("Create %s: %v", other, err)
	}
	t.Cleanup(func() { s.remove(t, other) })
	s.running(t, web)

	cases := []struct {
		selector drivers.Labels
		want     []string
	}{
		{drivers.Labels{"drivertest.run": s.run, "drivertest.test": "list"}, []string{db, web}},
		{drivers.Labels{"drivertest.run": s.run, "drivertest.test": "list", "drivertest.role": "web"}, []string{web}},
		{drivers.Labels{"drivertest.run": s.run, "drivertest.test": "list", "drivertest.role": "web", "drivertest.tier": "front"}, []string{web}},
		{drivers.Labels{"drivertest.run": s.run, "drivertest.test": "list", "drivertest.role": "cache"}, nil},
		{drivers.Labels{"drivertest.role": "web", "drivertest.run": s.run + "x"}, []string{other}},
	}
	for _, c := range cases {
		got, err := s.d.List(ctx, c.selector)
		if err != nil {
			t.Fatalf("List %v: %v", c.selector, err)
		}
		if g := names(got); !slices.Equal(g, c.want) {
			t.Errorf("List %v: got %v, want %v", c.selector, g, c.want)
		}
		for _, st := range got {
			if st.Name == web {
				checkLabels(t, st, s.labels(drivers.Labels{"drivertest.test": "list", "drivertest.role": "web", "drivertest.tier": "front"}))
				if st.State != drivers.StateRunning {
					t.Errorf("List: %s state %q, want running", web, st.State)
				}
			}
		}
	}
	all, err := s.d.List(ctx, nil)
	if err != nil {
		t.Fatalf("List all: %v", err)
	}
	for _, n := range []string{web, db, other} {
		if !slices.Contains(names(all), n) {
			t.Errorf("List with no selector misses %s", n)
		}
	}
}

// DRV-1: Watch fires once, with the exit code, when the run ends; a later
// run does not fire it again.
func (s *suite) testWatch(t *testing.T) {
	name := s.create(t, "watch", "sleep 0.3; exit 7", nil)
	if !s.h.Has(FeatureWatch) {
		_, err := s.d.Watch(name, func(drivers.Exit) {})
		wantKind(t, "Watch without the feature", err, drivers.ErrUnsupported)
		return
	}
	s.start(t, name)
	rec := newExitRecorder()
	stop, err := s.d.Watch(name, rec.record)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stop()
	e := rec.wait(t, s.h.Timeout, "run ending with exit 7")
	if e.Name != name || e.ExitCode != 7 {
		t.Errorf("exit: got %+v, want name %s code 7", e, name)
	}
	s.waitStopped(t, name)

	// The same watch must not fire for the next run.
	s.start(t, name)
	next := newExitRecorder()
	stopNext, err := s.d.Watch(name, next.record)
	if err != nil {
		t.Fatalf("second Watch: %v", err)
	}
	defer stopNext()
	next.wait(t, s.h.Timeout, "second run ending")
	settle()
	if n := len(rec.calls()); n != 1 {
		t.Errorf("first watch fired %d times, want 1", n)
	}
	if n := len(next.calls()); n != 1 {
		t.Errorf("second watch fired %d times, want 1", n)
	}

	// On an instance that is not running, Watch reports the last exit.
	late := newExitRecorder()
	stopLate, err := s.d.Watch(name, late.record)
	if err != nil {
		t.Fatalf("Watch of a stopped instance: %v", err)
	}
	defer stopLate()
	if e := late.wait(t, s.h.Timeout, "Watch of a stopped instance"); e.ExitCode != 7 {
		t.Errorf("Watch of a stopped instance: exit %+v, want code 7", e)
	}
}

// DRV-1: fn is never called after stop returns; Stop and Kill end a run
// and fire the watches still armed.
func (s *suite) testWatchStop(t *testing.T) {
	if !s.h.Has(FeatureWatch) {
		t.Skip("driver lacks Watch; the Watch subtest checks ErrUnsupported")
	}
	name := s.create(t, "wstop", longRun, nil)
	s.running(t, name)
	cancelled := newExitRecorder()
	stop, err := s.d.Watch(name, cancelled.record)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	armed := newExitRecorder()
	stopArmed, err := s.d.Watch(name, armed.record)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stopArmed()
	stop()
	stop() // a second stop is harmless
	if err := s.d.Kill(s.ctx(t), name); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	e := armed.wait(t, s.h.Timeout, "Kill ending the run")
	if e.Name != name {
		t.Errorf("exit for %q, want %q", e.Name, name)
	}
	settle()
	if n := len(cancelled.calls()); n != 0 {
		t.Errorf("stopped watch fired %d times, want 0", n)
	}

	s.running(t, name)
	byStop := newExitRecorder()
	stopByStop, err := s.d.Watch(name, byStop.record)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stopByStop()
	if err := s.d.Stop(s.ctx(t), name, s.h.Grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	byStop.wait(t, s.h.Timeout, "Stop ending the run")
}

// DRV-1: Exec returns the exit code and both outputs (exec probes).
func (s *suite) testExec(t *testing.T) {
	ctx := s.ctx(t)
	name := s.create(t, "exec", longRun, nil)
	probe := []string{"sh", "-c", "echo out; echo err >&2; exit 4"}
	if !s.h.Has(FeatureExec) {
		s.running(t, name)
		_, err := s.d.Exec(ctx, name, probe)
		wantKind(t, "Exec without the feature", err, drivers.ErrUnsupported)
		return
	}
	if _, err := s.d.Exec(ctx, name, probe); err == nil {
		t.Errorf("Exec in an instance that is not running: no error")
	}
	s.running(t, name)
	res, err := s.d.Exec(ctx, name, probe)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if res.ExitCode != 4 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Errorf("Exec: got code %d stdout %q stderr %q, want 4 %q %q", res.ExitCode, res.Stdout, res.Stderr, "out\n", "err\n")
	}
	res, err = s.d.Exec(ctx, name, []string{"sh", "-c", "exit 0"})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("Exec exit 0: got %+v, %v", res, err)
	}
}

// DRV-1: Logs returns stdout and stderr; Tail N gives the last N lines; the
// output of a run that ended is still there.
func (s *suite) testLogs(t *testing.T) {
	ctx := s.ctx(t)
	name := s.create(t, "logs", "echo err >&2; echo one; echo two; echo three; sleep 3600", nil)
	if !s.h.Has(FeatureLogs) {
		_, err := s.d.Logs(ctx, name, drivers.LogOptions{})
		wantKind(t, "Logs without the feature", err, drivers.ErrUnsupported)
		return
	}
	s.running(t, name)
	all := s.waitLogs(t, name, "three\n")
	for _, w := range []string{"err\n", "one\ntwo\nthree\n"} {
		if !strings.Contains(all, w) {
			t.Errorf("Logs: %q does not contain %q", all, w)
		}
	}
	if got := s.logs(t, name, drivers.LogOptions{Tail: 2}); got != "two\nthree\n" {
		t.Errorf("Logs Tail 2: got %q, want %q", got, "two\nthree\n")
	}

	ended := s.create(t, "logsend", "echo bye; exit 0", nil)
	s.start(t, ended)
	s.waitStopped(t, ended)
	if got := s.logs(t, ended, drivers.LogOptions{}); !strings.Contains(got, "bye\n") {
		t.Errorf("Logs of an ended run: %q, want it to contain %q", got, "bye\n")
	}
}

// DRV-1: Logs with Follow streams new output and ends when ctx ends.
func (s *suite) testFollow(t *testing.T) {
	if !s.h.Has(FeatureLogs) || !s.h.Has(FeatureFollow) {
		t.Skip("driver lacks Logs or Follow; the Logs subtest checks ErrUnsupported")
	}
	name := s.create(t, "follow", "echo first; sleep 0.5; echo second; sleep 3600", nil)
	s.running(t, name)
	s.waitLogs(t, name, "first")
	ctx, cancel := context.WithCancel(s.ctx(t))
	defer cancel()
	rc, err := s.d.Logs(ctx, name, drivers.LogOptions{Follow: true})
	if err != nil {
		t.Fatalf("Logs follow: %v", err)
	}
	defer rc.Close()

	seen := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		sent := false
		for {
			n, err := rc.Read(buf)
			b.Write(buf[:n])
			if !sent && strings.Contains(b.String(), "second\n") {
				seen <- b.String()
				sent = true
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case out := <-seen:
		if !strings.Contains(out, "first\n") {
			t.Errorf("follow output %q lacks the earlier line %q", out, "first\n")
		}
	case err := <-done:
		t.Fatalf("follow reader ended before the second line: %v", err)
	case <-time.After(s.h.Timeout):
		t.Fatalf("gave up after %v waiting for followed output", s.h.Timeout)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(s.h.Timeout):
		t.Fatalf("follow reader still open %v after ctx was cancelled", s.h.Timeout)
	}
}

// DRV-1: every method fails ErrNotFound for an unknown name.
func (s *suite) testNotFound(t *testing.T) {
	ctx := s.ctx(t)
	name := s.name("nosuch")
	wantKind(t, "Start", s.d.Start(ctx, name), drivers.ErrNotFound)
	wantKind(t, "Stop", s.d.Stop(ctx, name, s.h.Grace), drivers.ErrNotFound)
	wantKind(t, "Kill", s.d.Kill(ctx, name), drivers.ErrNotFound)
	wantKind(t, "Delete", s.d.Delete(ctx, name), drivers.ErrNotFound)
	_, err := s.d.Inspect(ctx, name)
	wantKind(t, "Inspect", err, drivers.ErrNotFound)
	_, err = s.d.Exec(ctx, name, []string{"sh", "-c", "exit 0"})
	if s.h.Has(FeatureExec) {
		wantKind(t, "Exec", err, drivers.ErrNotFound)
	} else if !errors.Is(err, drivers.ErrNotFound) && !errors.Is(err, drivers.ErrUnsupported) {
		t.Errorf("Exec: got %v, want not found or unsupported", err)
	}
	_, err = s.d.Logs(ctx, name, drivers.LogOptions{})
	if s.h.Has(FeatureLogs) {
		wantKind(t, "Logs", err, drivers.ErrNotFound)
	} else if !errors.Is(err, drivers.ErrNotFound) && !errors.Is(err, drivers.ErrUnsupported) {
		t.Errorf("Logs: got %v, want not found or unsupported", err)
	}
	_, err = s.d.Usage(ctx, name)
	wantKind(t, "Usage", err, drivers.ErrNotFound)
	stop, err := s.d.Watch(name, func(drivers.Exit) { t.Errorf("Watch of an unknown instance fired") })
	if s.h.Has(FeatureWatch) {
		wantKind(t, "Watch", err, drivers.ErrNotFound)
	} else if !errors.Is(err, drivers.ErrNotFound) && !errors.Is(err, drivers.ErrUnsupported) {
		t.Errorf("Watch: got %v, want not found or unsupported", err)
	}
	if err == nil && stop != nil {
		stop()
	}
}

// DRV-1, SEC-3: bad names are refused before anything is created.
func (s *suite) testInvalid(t *testing.T) {
	ctx := s.ctx(t)
	for _, bad := range []string{"", "Upper", "has space", "a/b", "../" + s.name("up"), "-lead", "under_score", "dot.ted", s.name("x") + strings.Repeat("y", drivers.MaxNameLen)} {
		spec := s.h.Spec(bad, longRun, s.labels(nil))
		wantKind(t, fmt.Sprintf("Validate name %q", bad), s.d.Validate(ctx, spec), drivers.ErrInvalid)
		err := s.d.Create(ctx, spec)
		wantKind(t, fmt.Sprintf("Create name %q", bad), err, drivers.ErrInvalid)
		if err == nil {
			s.remove(t, bad)
		}
		if err := s.d.Start(ctx, bad); !errors.Is(err, drivers.ErrInvalid) && !errors.Is(err, drivers.ErrNotFound) {
			t.Errorf("Start name %q: got %v, want invalid or not found", bad, err)
		}
	}
	got, err := s.d.List(ctx, s.labels(nil))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, st := range got {
		if !strings.HasPrefix(st.Name, s.name("")) {
			t.Errorf("a refused Create left instance %q", st.Name)
		}
	}
}

// DRV-1: calls on different instances are safe at the same time (-race).
func (s *suite) testConcurrent(t *testing.T) {
	const workers = 6
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for i := range workers {
		name := s.create(t, fmt.Sprintf("conc%d", i), longRun, drivers.Labels{"drivertest.role": "conc"})
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- s.cycle(name)
		}()
		go func() {
			defer wg.Done()
			for range 5 {
				if _, err := s.d.List(context.Background(), drivers.Labels{"drivertest.run": s.run, "drivertest.role": "conc"}); err != nil {
					errs <- fmt.Errorf("List: %w", err)
					return
				}
			}
			errs <- nil
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// cycle starts, inspects, stops, restarts, kills and deletes name.
func (s *suite) cycle(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	defer cancel()
	steps := []struct {
		what string
		fn   func() error
	}{
		{"Start", func() error { return s.d.Start(ctx, name) }},
		{"Inspect", func() error { _, err := s.d.Inspect(ctx, name); return err }},
		{"Stop", func() error { return s.d.Stop(ctx, name, s.h.Grace) }},
		{"Start", func() error { return s.d.Start(ctx, name) }},
		{"Kill", func() error { return s.d.Kill(ctx, name) }},
		{"wait stopped", func() error { return s.pollStopped(ctx, name) }},
		{"Delete", func() error { return s.d.Delete(ctx, name) }},
	}
	for _, st := range steps {
		if err := st.fn(); err != nil {
			return fmt.Errorf("%s %s: %w", st.what, name, err)
		}
	}
	return nil
}

// pollStopped waits, without a *testing.T, until name is stopped.
func (s *suite) pollStopped(ctx context.Context, name string) error {
	for {
		st, err := s.d.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if st.State == drivers.StateStopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkLabels fails t unless st carries every label in want.
func checkLabels(t *testing.T, st drivers.Status, want drivers.Labels) {
	t.Helper()
	for k, v := range want {
		if st.Labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q (labels %v)", st.Name, k, st.Labels[k], v, st.Labels)
		}
	}
}

// names returns the sorted names in sts.
func names(sts []drivers.Status) []string {
	var out []string
	for _, st := range sts {
		out = append(out, st.Name)
	}
	slices.Sort(out)
	return out
}

// DRV-16: Usage of a running instance counts at least its one process and
// some memory, its CPU counter never goes back, and a stopped instance
// uses nothing.
func (s *suite) testUsage(t *testing.T) {
	ctx := s.ctx(t)
	name := s.create(t, "usage", longRun, nil)
	if u, err := s.d.Usage(ctx, name); err != nil || u != (drivers.Usage{}) {
		t.Errorf("Usage of a created instance: %+v %v, want zero", u, err)
	}
	s.start(t, name)
	var first drivers.Usage
	s.eventually(t, "usage of the running instance", func() bool {
		u, err := s.d.Usage(ctx, name)
		if err != nil {
			t.Logf("Usage: %v", err)
			return false
		}
		first = u
		return u.Pids >= 1 && u.MemoryBytes > 0
	})
	if first.CPU < 0 || first.MemoryPeakBytes < 0 {
		t.Errorf("negative usage: %+v", first)
	}
	again, err := s.d.Usage(ctx, name)
	if err != nil || again.CPU < first.CPU {
		t.Errorf("the CPU counter went from %v to %v (%v)", first.CPU, again.CPU, err)
	}
	if err := s.d.Stop(ctx, name, s.h.Grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	s.waitStopped(t, name)
	if u, err := s.d.Usage(ctx, name); err != nil || u != (drivers.Usage{}) {
		t.Errorf("Usage of a stopped instance: %+v %v, want zero", u, err)
	}
}
