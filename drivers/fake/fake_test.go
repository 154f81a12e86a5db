package fake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newFake(t testing.TB) (*fake.Driver, *clock.Fake) {
	fc := clock.NewFake(t0)
	return fake.New(fake.Options{Clock: fc, Seed: 42}), fc
}

func create(t testing.TB, d *fake.Driver, name, script string) {
	t.Helper()
	if err := d.Create(context.Background(), shSpec(name, script, drivers.Labels{"app": "x"})); err != nil {
		t.Fatalf("Create %s: %v", name, err)
	}
}

func state(t testing.TB, d *fake.Driver, name string) drivers.Status {
	t.Helper()
	st, err := d.Inspect(context.Background(), name)
	if err != nil {
		t.Fatalf("Inspect %s: %v", name, err)
	}
	return st
}

// DRV-11: FailNext fails exactly the next N calls of an op with the kind
// asked for; other ops are untouched; Calls counts every call.
func TestFailNext(t *testing.T) {
	d, _ := newFake(t)
	ctx := context.Background()
	create(t, d, "a", "sleep 10")
	d.FailNext(fake.OpStart, 2, drivers.ErrTransient)
	for i := range 2 {
		err := d.Start(ctx, "a")
		if !errors.Is(err, drivers.ErrTransient) {
			t.Fatalf("start %d: %v, want transient", i, err)
		}
		var de *drivers.Error
		if !errors.As(err, &de) || de.Op != fake.OpStart || de.Instance != "a" {
			t.Errorf("error %v is not a *drivers.Error naming op and instance", err)
		}
	}
	if st := state(t, d, "a"); st.State != drivers.StateStopped {
		t.Errorf("failed starts changed state to %q", st.State)
	}
	if err := d.Start(ctx, "a"); err != nil {
		t.Fatalf("third start: %v", err)
	}
	if d.Calls(fake.OpStart) != 3 || d.Starts("a") != 1 {
		t.Errorf("calls %d starts %d, want 3 and 1", d.Calls(fake.OpStart), d.Starts("a"))
	}
	d.FailNext(fake.OpInspect, 1, drivers.ErrNotFound)
	if _, err := d.Inspect(ctx, "a"); !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("inspect: %v, want the injected not found", err)
	}
	d.FailNext(fake.OpWatch, 1, drivers.ErrUnsupported)
	if _, err := d.Watch("a", func(drivers.Exit) {}); !errors.Is(err, drivers.ErrUnsupported) {
		t.Errorf("watch: %v, want the injected unsupported", err)
	}
}

// DRV-11: latency goes through the clock, so a fake-clock test crosses it
// without sleeping; a ctx that ends first cuts it short.
func TestLatencyOnTheClock(t *testing.T) {
	d, fc := newFake(t)
	create(t, d, "a", "sleep 10")
	d.SetLatency(fake.OpStart, 5*time.Second)
	done := make(chan error, 1)
	go func() { done <- d.Start(context.Background(), "a") }()
	if !fc.WaitForTimers(1, 10*time.Second) {
		t.Fatal("Start did not wait on the clock")
	}
	select {
	case err := <-done:
		t.Fatalf("Start returned before the latency passed: %v", err)
	default:
	}
	fc.Advance(5 * time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if st := state(t, d, "a"); !st.StartedAt.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("StartedAt %v, want the clock's now after the latency", st.StartedAt)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- d.Start(ctx, "a") }()
	fc.WaitForTimers(2, 10*time.Second) // the program's sleep and the latency
	cancel()
	if err := <-done; !errors.Is(err, drivers.ErrTransient) {
		t.Errorf("cancelled slow call: %v, want transient", err)
	}
}

// DRV-11: HangNext blocks the next calls until their ctx ends.
func TestHangNext(t *testing.T) {
	d, _ := newFake(t)
	create(t, d, "a", "sleep 10")
	d.HangNext(fake.OpStop, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Stop(ctx, "a", time.Second) }()
	select {
	case err := <-done:
		t.Fatalf("hung call returned before cancel: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, drivers.ErrTransient) || !errors.Is(err, context.Canceled) {
		t.Errorf("hung call: %v, want transient wrapping context.Canceled", err)
	}
	if err := d.Stop(context.Background(), "a", time.Second); err != nil {
		t.Errorf("the next call hangs too: %v", err)
	}
}

// DRV-11: Die and DieAt end a run; Watch fires with the code, once.
func TestDieAndDieAt(t *testing.T) {
	d, fc := newFake(t)
	ctx := context.Background()
	create(t, d, "a", "sleep 100")
	d.Start(ctx, "a")
	var mu sync.Mutex
	var exits []drivers.Exit
	d.Watch("a", func(e drivers.Exit) { mu.Lock(); exits = append(exits, e); mu.Unlock() })
	d.DieAt("a", t0.Add(30*time.Second), 9)
	fc.Advance(29 * time.Second)
	if st := state(t, d, "a"); st.State != drivers.StateRunning {
		t.Fatalf("died early: %q", st.State)
	}
	fc.Advance(time.Second)
	mu.Lock()
	got := append([]drivers.Exit(nil), exits...)
	mu.Unlock()
	if len(got) != 1 || got[0].ExitCode != 9 || !got[0].At.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("exits %+v, want one with code 9 at +30s", got)
	}
	if st := state(t, d, "a"); st.State != drivers.StateStopped || st.ExitCode != 9 {
		t.Errorf("after DieAt: %+v", st)
	}
	if d.Die("a", 1) {
		t.Errorf("Die of a stopped instance reported a death")
	}
	d.Start(ctx, "a")
	if !d.Die("a", 3) {
		t.Errorf("Die of a running instance reported nothing")
	}
	if st := state(t, d, "a"); st.ExitCode != 3 {
		t.Errorf("after Die: code %d", st.ExitCode)
	}
}

// DRV-11: programs follow the clock: a script's sleep ends on Advance, and
// Stop of a program ignoring SIGTERM waits the grace on the clock.
func TestProgramsOnTheClock(t *testing.T) {
	d, fc := newFake(t)
	ctx := context.Background()
	create(t, d, "job", "echo start; sleep 60; echo end; exit 4")
	d.Start(ctx, "job")
	fc.Advance(59 * time.Second)
	if st := state(t, d, "job"); st.State != drivers.StateRunning {
		t.Fatalf("job ended before its sleep: %q", st.State)
	}
	fc.Advance(time.Second)
	if st := state(t, d, "job"); st.State != drivers.StateStopped || st.ExitCode != 4 {
		t.Fatalf("job after its sleep: %+v", st)
	}
	rc, _ := d.Logs(ctx, "job", drivers.LogOptions{})
	if b, _ := io.ReadAll(rc); string(b) != "start\nend\n" {
		t.Errorf("logs %q", b)
	}

	create(t, d, "stubborn", "trap '' TERM; sleep 3600")
	d.Start(ctx, "stubborn")
	done := make(chan error, 1)
	go func() { done <- d.Stop(ctx, "stubborn", 10*time.Second) }()
	fc.WaitForTimers(2, 10*time.Second) // its sleep and the grace
	if st := state(t, d, "stubborn"); st.State != drivers.StateRunning {
		t.Fatalf("SIGTERM ended a program that ignores it")
	}
	fc.Advance(10 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := state(t, d, "stubborn"); st.State != drivers.StateStopped {
		t.Errorf("after the grace: %q", st.State)
	}
}

// DRV-11: SetExec scripts probe results; SetAddress overrides addresses.
func TestSetExecAndAddress(t *testing.T) {
	d, _ := newFake(t)
	ctx := context.Background()
	spec := shSpec("web", "sleep 3600", nil)
	spec.Ports = []drivers.Port{{Target: 80, HostPort: 8080}}
	d.Create(ctx, spec)
	d.Start(ctx, "web")
	healthy := false
	d.SetExec(func(name string, argv []string) (drivers.ExecResult, error) {
		if healthy {
			return drivers.ExecResult{ExitCode: 0, Stdout: []byte("ok")}, nil
		}
		return drivers.ExecResult{ExitCode: 1, Stderr: []byte("down")}, nil
	})
	if r, _ := d.Exec(ctx, "web", []string{"probe"}); r.ExitCode != 1 {
		t.Errorf("scripted unhealthy probe: %+v", r)
	}
	healthy = true
	if r, _ := d.Exec(ctx, "web", []string{"probe"}); r.ExitCode != 0 || string(r.Stdout) != "ok" {
		t.Errorf("scripted healthy probe: %+v", r)
	}
	if st := state(t, d, "web"); st.Addresses[80] != "127.0.0.1:8080" {
		t.Errorf("address from the spec: %v", st.Addresses)
	}
	d.SetAddress("web", 80, "10.0.0.5:80")
	if st := state(t, d, "web"); st.Addresses[80] != "10.0.0.5:80" {
		t.Errorf("address override: %v", st.Addresses)
	}
	if err := d.SetAddress("nope", 80, "x"); !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("SetAddress of an unknown instance: %v", err)
	}
}

// DRV-11: the same seed and the same calls give the same results.
func TestDeterministicUnderSeed(t *testing.T) {
	run := func(seed uint64) string {
		d := fake.New(fake.Options{Clock: clock.NewFake(t0), Seed: seed})
		d.FailRate(fake.OpStart, 0.5, drivers.ErrTransient)
		ctx := context.Background()
		out := ""
		for i := range 40 {
			name := fmt.Sprintf("i%d", i)
			d.Create(ctx, shSpec(name, "sleep 10", nil))
			err := d.Start(ctx, name)
			st, _ := d.Inspect(ctx, name)
			out += fmt.Sprintf("%v/%d ", err == nil, st.Pid)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Errorf("same seed, different outcomes:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("different seeds gave identical fault patterns (suspicious): %s", a)
	}
}

// DRV-11: 10,000 instances are records: no goroutine per instance, and
// List by label stays correct.
func TestScalesWithoutGoroutines(t *testing.T) {
	d, _ := newFake(t)
	ctx := context.Background()
	before := runtime.NumGoroutine()
	const n = 10_000
	for i := range n {
		name := fmt.Sprintf("s-%d", i)
		spec := drivers.Spec{Name: name, Command: []string{"server"}, Labels: drivers.Labels{"svc": fmt.Sprint(i % 10)}}
		if err := d.Create(ctx, spec); err != nil {
			t.Fatal(err)
		}
		d.Start(ctx, name)
		d.Watch(name, func(drivers.Exit) {})
	}
	if g := runtime.NumGoroutine(); g > before+5 {
		t.Errorf("%d goroutines for %d instances (was %d)", g, n, before)
	}
	got, _ := d.List(ctx, drivers.Labels{"svc": "3"})
	if len(got) != n/10 {
		t.Errorf("List found %d, want %d", len(got), n/10)
	}
	if d.Len() != n {
		t.Errorf("Len %d", d.Len())
	}
}

// Benchmarks the fake at scale: one restart cycle among 10,000 instances.
func BenchmarkRestartAmong10k(b *testing.B) {
	d, _ := newFake(b)
	ctx := context.Background()
	for i := range 10_000 {
		name := fmt.Sprintf("s-%d", i)
		d.Create(ctx, drivers.Spec{Name: name, Command: []string{"server"}})
		d.Start(ctx, name)
	}
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("s-%d", i%10_000)
		stop, _ := d.Watch(name, func(drivers.Exit) { d.Start(ctx, name) })
		d.Die(name, 1)
		stop()
	}
}

// SVC-8, SVC-9 support: ForceState reports a transitional state; Restart
// is a restart the caller did not make (new StartedAt, not in Starts).
func TestForceStateAndRestart(t *testing.T) {
	d, fc := newFake(t)
	ctx := context.Background()
	create(t, d, "a", "sleep 3600")
	d.Start(ctx, "a")
	d.ForceState("a", drivers.StateRestarting)
	if st := state(t, d, "a"); st.State != drivers.StateRestarting {
		t.Errorf("forced state: %q", st.State)
	}
	d.ForceState("a", "")
	first := state(t, d, "a")
	fired := make(chan drivers.Exit, 1)
	d.Watch("a", func(e drivers.Exit) { fired <- e })
	fc.Advance(time.Second)
	if !d.Restart("a") {
		t.Fatal("Restart of a running instance reported nothing")
	}
	if e := <-fired; e.Signal != "killed" {
		t.Errorf("the old run's exit: %+v", e)
	}
	second := state(t, d, "a")
	if second.State != drivers.StateRunning || !second.StartedAt.After(first.StartedAt) || second.Pid == first.Pid {
		t.Errorf("after Restart: %+v (was %+v)", second, first)
	}
	if d.Starts("a") != 1 {
		t.Errorf("Starts counts the external restart: %d", d.Starts("a"))
	}
}
