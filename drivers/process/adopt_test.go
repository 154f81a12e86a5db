package process_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
)

// DRV-4: a Driver closed without stopping its workloads (a daemon
// restart) leaves them running; a new Driver on the same Dir adopts them
// with the same pid and StartedAt, sees their exit by pidfd, and the
// process is still reaped.
func TestAdoptAfterClose(t *testing.T) {
	dir := t.TempDir()
	a := newDriver(t, dir)
	mustCreate(t, a, shSpec("kept", "echo up; sleep 3600", drivers.Labels{"app": "kept"}))
	before := mustStart(t, a, "kept")
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !alive(before.Pid) {
		t.Fatalf("Close killed the workload")
	}

	b := newDriver(t, dir)
	defer b.Close()
	after, err := b.Inspect(ctxT(t), "kept")
	if err != nil {
		t.Fatalf("Inspect after restart: %v", err)
	}
	if after.State != drivers.StateRunning || after.Pid != before.Pid || !after.StartedAt.Equal(before.StartedAt) {
		t.Fatalf("adopted status %+v, want running pid %d started %v", after, before.Pid, before.StartedAt)
	}
	if got, _ := b.List(ctxT(t), drivers.Labels{"app": "kept"}); len(got) != 1 || got[0].State != drivers.StateRunning {
		t.Errorf("List after restart: %+v", got)
	}
	exit := watchExit(t, b, "kept")
	unix.Kill(before.Pid, unix.SIGKILL)
	if e := recvExit(t, exit, "adopted kept"); e.ExitCode != -1 || e.Name != "kept" {
		t.Errorf("adopted exit %+v, want code -1 (not our child: unknown)", e)
	}
	if st, _ := b.Inspect(ctxT(t), "kept"); st.State != drivers.StateStopped {
		t.Errorf("after the adopted process died: state %q", st.State)
	}
	waitFor(t, "the old child to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(before.Pid))
		return os.IsNotExist(err)
	})
	// It starts again as an ordinary child.
	again := mustStart(t, b, "kept")
	if again.Pid == before.Pid || !again.StartedAt.After(before.StartedAt) {
		t.Errorf("restart after adoption: %+v", again)
	}
	b.Kill(ctxT(t), "kept")
}

// DRV-4: the daemon is SIGKILLed (no Close, no cleanup); a new Driver on
// its Dir adopts the workloads it left: same StartedAt, Exec and Stop
// work, and Watch fires when one is killed.
func TestAdoptAfterDaemonCrash(t *testing.T) {
	dir := t.TempDir()
	helper, out := startHelper(t, "daemon:"+dir)
	started := map[string][2]string{}
	for out.Scan() && out.Text() != "ready" {
		f := strings.Fields(out.Text())
		if len(f) != 4 || f[0] != "started" {
			t.Fatalf("helper: %q", out.Text())
		}
		started[f[1]] = [2]string{f[2], f[3]}
	}
	if len(started) != 2 {
		t.Fatalf("helper did not start both workloads: %v", started)
	}
	helper.Process.Signal(unix.SIGKILL)
	helper.Wait()

	b := newDriver(t, dir)
	defer b.Close()
	for name, s := range started {
		pid, _ := strconv.Atoi(s[0])
		at, _ := time.Parse(time.RFC3339Nano, s[1])
		st, err := b.Inspect(ctxT(t), name)
		if err != nil || st.State != drivers.StateRunning || st.Pid != pid || !st.StartedAt.Equal(at) {
			t.Fatalf("%s after the crash: %+v %v, want running pid %d started %v", name, st, err, pid, at)
		}
	}
	res, err := b.Exec(ctxT(t), "survivor", []string{"sh", "-c", "echo probe"})
	if err != nil || string(res.Stdout) != "probe\n" {
		t.Errorf("Exec on an adopted instance: %+v %v", res, err)
	}

	survivor, _ := strconv.Atoi(started["survivor"][0])
	exit := watchExit(t, b, "survivor")
	unix.Kill(survivor, unix.SIGKILL)
	recvExit(t, exit, "adopted survivor")

	stopper, _ := strconv.Atoi(started["stopper"][0])
	if err := b.Stop(ctxT(t), "stopper", 5*time.Second); err != nil {
		t.Fatalf("Stop of an adopted instance: %v", err)
	}
	if st, _ := b.Inspect(ctxT(t), "stopper"); st.State != drivers.StateStopped {
		t.Errorf("after Stop: state %q", st.State)
	}
	waitFor(t, "the stopped adopted process to be gone", func() bool { return !alive(stopper) })
	if logs := readLogs(t, b, "stopper"); logs != "up\n" {
		t.Errorf("logs of the adopted run: %q", logs)
	}
}

// DRV-3: with BecomeSubreaper, orphaned grandchildren are reparented to
// the daemon and reaped, and the daemon's own children still report their
// exit codes.
func TestSubreaperReapsOrphans(t *testing.T) {
	_, out := startHelper(t, "subreaper:"+t.TempDir())
	var lines []string
	for out.Scan() {
		lines = append(lines, out.Text())
	}
	got := strings.Join(lines, "\n")
	if strings.Contains(got, "error") || !strings.Contains(got, "code 5") || !strings.Contains(got, "reaped") {
		t.Fatalf("subreaper helper said:\n%s", got)
	}
}

// startThenCrash starts script as name on a Driver over dir, then leaves
// dir as a daemon killed between spawning that run and recording it would.
func startThenCrash(t *testing.T, dir, name, script string) drivers.Status {
	t.Helper()
	a := newDriver(t, dir)
	mustCreate(t, a, shSpec(name, script, nil))
	st := mustStart(t, a, name)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	crashBeforeRecorded(t, dir, name)
	return st
}

// crashBeforeRecorded rewrites name's state file to what a daemon killed
// after spawning a run, before recording it, leaves behind: the launch
// saved, the run not.
func crashBeforeRecorded(t *testing.T, dir, name string) {
	t.Helper()
	editState(t, dir, name, func(rec map[string]any) {
		if rec["run_token"] == nil {
			t.Fatal("no run token recorded")
		}
		delete(rec, "pid")
		delete(rec, "proc_start")
		delete(rec, "started_at")
		rec["running"], rec["launching"] = false, true
	})
}

// editState decodes name's state file under dir, lets edit change the
// record, and writes it back.
func editState(t *testing.T, dir, name string, edit func(rec map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "instances", name, "state.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	edit(rec)
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// DRV-4 across the launch window: a daemon killed after it spawned a run
// but before it recorded the run leaves a live process the state file does
// not name. The next Driver finds it by its run token and adopts it, so it
// is neither orphaned nor started a second time beside itself (the chaos
// campaign's rollout finding: the second run could not bind the slot's
// host port and crash-looped).
func TestAdoptRunNotYetRecorded(t *testing.T) {
	dir := t.TempDir()
	before := startThenCrash(t, dir, "early", "sleep 3600 & wait")

	b := newDriver(t, dir)
	defer b.Close()
	after, err := b.Inspect(ctxT(t), "early")
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if after.State != drivers.StateRunning || after.Pid != before.Pid {
		t.Fatalf("after the restart: %+v, want the unrecorded run (pid %d) adopted", after, before.Pid)
	}
	exit := watchExit(t, b, "early")
	if err := b.Stop(ctxT(t), "early", 2*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	recvExit(t, exit, "adopted early")
	waitFor(t, "the adopted run gone", func() bool { return !alive(before.Pid) })
}

// A launch whose run never came (or already ended) is forgotten: the
// instance is stopped and starts normally.
func TestLaunchWithoutRunIsForgotten(t *testing.T) {
	dir := t.TempDir()
	before := startThenCrash(t, dir, "brief", "sleep 3600")
	unix.Kill(before.Pid, unix.SIGKILL)
	waitFor(t, "the run gone", func() bool { return !alive(before.Pid) })

	b := newDriver(t, dir)
	defer b.Close()
	if st, err := b.Inspect(ctxT(t), "brief"); err != nil || st.State != drivers.StateStopped {
		t.Fatalf("after the restart: %+v %v, want stopped", st, err)
	}
	again := mustStart(t, b, "brief")
	if again.Pid == before.Pid {
		t.Fatalf("restart: %+v", again)
	}
	b.Kill(ctxT(t), "brief")
}

// REL-5, issue 18 (disk: a torn state file): a state file that does not
// decode cannot be managed, so a new Driver on the Dir ends its run
// (every process naming the instance, its cgroup), moves its directory to
// DIR/damaged for the operator, and no longer knows the instance (the
// service fills the slot afresh); it never crashes and never leaves the
// run as an orphan beside the fresh one. A sound instance beside it is
// adopted as always.
func TestRELTornStateFileIsQuarantined(t *testing.T) {
	dir := t.TempDir()
	a := newDriver(t, dir)
	torn := shSpec("torn", "echo up; sleep 3600", drivers.Labels{"app": "torn"})
	torn.Env = map[string]string{"ENGENHO_INSTANCE": "torn"}
	mustCreate(t, a, torn)
	run := mustStart(t, a, "torn")
	mustCreate(t, a, shSpec("sound", "sleep 3600", drivers.Labels{"app": "sound"}))
	sound := mustStart(t, a, "sound")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "instances", "torn", "state.json")
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}

	c := newDriver(t, dir)
	defer c.Close()
	if _, err := c.Inspect(ctxT(t), "torn"); !errors.Is(err, drivers.ErrNotFound) {
		t.Fatalf("inspect of the torn instance: %v, want not found", err)
	}
	waitFor(t, "the torn instance's run to end", func() bool { return !alive(run.Pid) })
	kept, _ := filepath.Glob(filepath.Join(dir, "damaged", "torn-*", "state.json"))
	if len(kept) != 1 {
		t.Fatalf("the torn state file was not kept under damaged/: %v", kept)
	}
	if st, err := c.Inspect(ctxT(t), "sound"); err != nil || st.Pid != sound.Pid || st.State != drivers.StateRunning {
		t.Fatalf("the sound instance beside it: %+v %v", st, err)
	}
	mustCreate(t, c, torn) // the name is free again
	_ = c.Kill(ctxT(t), "sound")
}

// DRV-4: a run started while the daemon had no file descriptor left to
// read /proc with is recorded without its start time. The next daemon
// must still adopt it (its run token says it is the same run), not call it
// gone and kill it: the chaos campaign saw a healthy worker restarted by
// a daemon kill that followed a daemon.fd-limit (seed 3, fault 37).
func TestAdoptARunRecordedWithoutItsStartTime(t *testing.T) {
	dir := t.TempDir()
	a := newDriver(t, dir)
	mustCreate(t, a, shSpec("emfile", "sleep 3600 & wait", nil))
	before := mustStart(t, a, "emfile")
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	editState(t, dir, "emfile", func(rec map[string]any) {
		if rec["proc_start"] == nil || rec["running"] != true {
			t.Fatalf("state file of emfile %v: no running run with a start time to take out", rec)
		}
		delete(rec, "proc_start")
	})

	d := newDriver(t, dir)
	defer d.Close()
	after, err := d.Inspect(ctxT(t), "emfile")
	if err != nil || after.State != drivers.StateRunning || after.Pid != before.Pid {
		t.Fatalf("after the restart: %+v %v, want the run (pid %d) adopted", after, err, before.Pid)
	}
	if !alive(before.Pid) {
		t.Fatal("the run was killed instead of adopted")
	}
	exit := watchExit(t, d, "emfile")
	if err := d.Stop(ctxT(t), "emfile", 2*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	recvExit(t, exit, "adopted emfile")
}
