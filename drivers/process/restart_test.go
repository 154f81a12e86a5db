package process_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/cgroup"
	"github.com/engenho/engenho/drivers/process"
)

// watchRestart arms a restart at once of name's current run; the exit
// comes on the returned channel.
func watchRestart(t *testing.T, d *process.Driver, name string, p drivers.RestartPolicy) (<-chan drivers.Exit, func()) {
	t.Helper()
	ch := make(chan drivers.Exit, 1)
	stop, err := d.WatchRestart(name, p, func(e drivers.Exit) { ch <- e })
	if err != nil {
		t.Fatalf("WatchRestart %s: %v", name, err)
	}
	return ch, stop
}

// staysStopped checks that name is stopped and, a moment later, still is
// (nothing restarts it behind the caller's back).
func staysStopped(t *testing.T, d *process.Driver, name string) {
	t.Helper()
	for range 3 {
		if st, err := d.Inspect(ctxT(t), name); err != nil || st.State != drivers.StateStopped {
			t.Fatalf("%s: %+v %v, want stopped", name, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PERF-1, DRV-4: a run whose watch authorized a restart is started again
// by the driver itself when it ends: the watch hears Restarted, a new run
// is up (recorded on disk before the watch is told), and the
// authorization was for one restart only.
func TestPERF1WatchRestartStartsTheNextRunAtOnce(t *testing.T) {
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, shSpec("again", "sleep 3600", nil))
	first := mustStart(t, d, "again")
	exits, _ := watchRestart(t, d, "again", drivers.RestartPolicy{})
	unix.Kill(first.Pid, unix.SIGKILL)
	e := recvExit(t, exits, "the first run's end")
	if !e.Restarted || e.Signal != "killed" || e.ExitCode != -1 {
		t.Fatalf("exit %+v, want killed and restarted", e)
	}
	second, err := d.Inspect(ctxT(t), "again")
	if err != nil || second.State != drivers.StateRunning || second.Pid == first.Pid || !second.StartedAt.After(first.StartedAt) {
		t.Fatalf("after the restart: %+v %v (first run %+v)", second, err, first)
	}
	if rec := stateOf(t, dir, "again"); rec["running"] != true || rec["pid"] != float64(second.Pid) {
		t.Errorf("the restarted run is not recorded before its watch is told: %v", rec)
	}
	// One restart only: the next end stays an end.
	plain := watchExit(t, d, "again")
	unix.Kill(second.Pid, unix.SIGKILL)
	if e := recvExit(t, plain, "the second run's end"); e.Restarted {
		t.Fatalf("second exit %+v restarted without an authorization", e)
	}
	staysStopped(t, d, "again")
}

// PERF-1: an on-failure authorization restarts a run that failed, not
// one that exited 0.
func TestPERF1WatchRestartOnFailureOnly(t *testing.T) {
	d := newDriver(t, t.TempDir())
	defer d.Close()
	for _, c := range []struct {
		code    int
		restart bool
	}{{0, false}, {3, true}} {
		name := "onfail-" + strconv.Itoa(c.code)
		flag := filepath.Join(t.TempDir(), "go")
		// The run waits for the flag, so the watch is armed before it ends,
		// and takes it: a run after it waits again.
		mustCreate(t, d, shSpec(name, "while [ ! -e "+flag+" ]; do sleep 0.01; done; rm "+flag+"; exit "+strconv.Itoa(c.code), nil))
		mustStart(t, d, name)
		exits, _ := watchRestart(t, d, name, drivers.RestartPolicy{OnFailureOnly: true})
		if err := os.WriteFile(flag, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		e := recvExit(t, exits, name)
		if e.ExitCode != c.code || e.Restarted != c.restart {
			t.Errorf("%s: exit %+v, want code %d restarted %v", name, e, c.code, c.restart)
		}
		if c.restart {
			if st, _ := d.Inspect(ctxT(t), name); st.State != drivers.StateRunning {
				t.Errorf("%s: %+v after the restart", name, st)
			}
			d.Kill(ctxT(t), name)
		} else {
			staysStopped(t, d, name)
		}
	}
}

// PERF-1: Stop, Kill and cancelling the watch withdraw the
// authorization; so does a start that cannot be made, which the watch
// hears as an end that did not restart.
func TestPERF1RestartAuthorizationIsWithdrawn(t *testing.T) {
	d := newDriver(t, t.TempDir())
	defer d.Close()
	ends := map[string]func(name string, pid int, stop func()){
		"stop": func(name string, _ int, _ func()) {
			if err := d.Stop(ctxT(t), name, time.Second); err != nil {
				t.Fatal(err)
			}
		},
		"kill": func(name string, _ int, _ func()) {
			if err := d.Kill(ctxT(t), name); err != nil {
				t.Fatal(err)
			}
		},
		"cancel": func(_ string, pid int, stop func()) {
			stop()
			unix.Kill(pid, unix.SIGKILL)
		},
	}
	for how, end := range ends {
		name := "withdrawn-" + how
		mustCreate(t, d, shSpec(name, "sleep 3600", nil))
		st := mustStart(t, d, name)
		exits, stop := watchRestart(t, d, name, drivers.RestartPolicy{})
		end(name, st.Pid, stop)
		if how != "cancel" {
			if e := recvExit(t, exits, name); e.Restarted {
				t.Errorf("%s: exit %+v restarted", how, e)
			}
		}
		waitFor(t, name+" gone", func() bool { return !alive(st.Pid) })
		// With no watch left (cancel), nothing waits for the reaper to
		// record the end: a run reaped a moment ago may still read as
		// running. A restart would read as running for good (sleep 3600).
		waitFor(t, name+" recorded stopped", func() bool {
			got, err := d.Inspect(ctxT(t), name)
			return err == nil && got.State == drivers.StateStopped
		})
		staysStopped(t, d, name)
	}

	// The program is gone by the time of the restart: the start fails.
	bin := filepath.Join(t.TempDir(), "sleeper")
	if b, err := os.ReadFile("/bin/sleep"); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copying sleep: %v", err)
	}
	mustCreate(t, d, drivers.Spec{Name: "vanished", Command: []string{bin, "3600"}})
	st := mustStart(t, d, "vanished")
	exits, _ := watchRestart(t, d, "vanished", drivers.RestartPolicy{})
	os.Remove(bin)
	unix.Kill(st.Pid, unix.SIGKILL)
	if e := recvExit(t, exits, "vanished"); e.Restarted || e.Signal != "killed" {
		t.Errorf("exit %+v, want killed, not restarted", e)
	}
	staysStopped(t, d, "vanished")
}

// PERF-1, DRV-12: a restart at once is in the instance's cgroup from its
// first instruction, as any start (the spawner thread joined the group
// ahead of the fork), and no thread of the daemon stays in the group
// after it.
func TestPERF1RestartAtOnceStartsInsideTheCgroup(t *testing.T) {
	h := needCgroups(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, shSpec("placed", "cat /proc/self/cgroup; sleep 3600", nil))
	st := mustStart(t, d, "placed")
	g := groupOf(t, h, dir, "placed")
	waitLogs(t, d, "placed", "pids:")
	for i := range 3 {
		exits, _ := watchRestart(t, d, "placed", drivers.RestartPolicy{})
		unix.Kill(st.Pid, unix.SIGKILL)
		if e := recvExit(t, exits, "placed"); !e.Restarted {
			t.Fatalf("restart %d: exit %+v", i, e)
		}
		st, _ = d.Inspect(ctxT(t), "placed")
		logs := waitForLines(t, d, "placed", "pids:", i+2)
		for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
			if h.Missing(c) == nil && h.Version() == cgroup.V1 && strings.Count(logs, ":"+c+":/"+g.Rel()+"\n") != i+2 {
				t.Errorf("restart %d: a run's first command is not in %s of %s:\n%s", i, g.Rel(), c, logs)
			}
		}
	}
	waitFor(t, "no thread of ours in the instance's cgroup", func() bool { return len(ourThreadsIn(t, h, g)) == 0 })
	d.Kill(ctxT(t), "placed")
}

// waitForLines waits until name's logs have n lines containing s.
func waitForLines(t *testing.T, d drivers.Driver, name, s string, n int) string {
	t.Helper()
	var logs string
	waitFor(t, "the run's output", func() bool {
		logs = readLogs(t, d, name)
		return strings.Count(logs, s) >= n
	})
	return logs
}

// ourThreadsIn lists this process's threads found in g's tasks (v1).
func ourThreadsIn(t *testing.T, h *cgroup.Host, g *cgroup.Group) []int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var ours []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			ours = append(ours, n)
		}
	}
	var in []int
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
		if h.Missing(c) != nil || h.Version() != cgroup.V1 {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(g.Dir(c), "tasks"))
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil && slices.Contains(ours, n) {
				in = append(in, n)
			}
		}
	}
	return in
}
