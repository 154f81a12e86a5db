package process_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/process"
)

// stateOf reads name's state file as a map.
func stateOf(t *testing.T, dir, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "instances", name, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func writeState(t *testing.T, dir, name string, rec map[string]any) {
	t.Helper()
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(dir, "instances", name, "state.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// tokenIn is the run token in pid's environment.
func tokenIn(t *testing.T, pid int) string {
	t.Helper()
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(process.EnvRunToken+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// killAndRestart SIGKILLs name's run and starts it again once its exit
// is seen, as a replica restarting at once does.
func killAndRestart(t *testing.T, d *process.Driver, name string, pid int) drivers.Status {
	t.Helper()
	exit := watchExit(t, d, name)
	unix.Kill(pid, unix.SIGKILL)
	recvExit(t, exit, name)
	return mustStart(t, d, name)
}

// DRV-4, PERF-1: every run is announced on disk before it is spawned, the
// restart's with no write on its path: the state file names the next
// run's token (next_token) before Start is called, the run started then
// carries it, and its record names a new one.
func TestDRV4RestartIsAnnouncedBeforeItsSpawn(t *testing.T) {
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, shSpec("armed", "sleep 3600", nil))
	next, _ := stateOf(t, dir, "armed")["next_token"].(string)
	if next == "" {
		t.Fatal("Create announced no next_token")
	}
	st := mustStart(t, d, "armed")
	for i := range 3 {
		if got := tokenIn(t, st.Pid); got != next {
			t.Fatalf("run %d carries token %q, want %q, the one on disk before its Start", i, got, next)
		}
		rec := stateOf(t, dir, "armed")
		if rec["run_token"] != next || rec["next_token"] == next || rec["next_token"] == "" || rec["launching"] == true {
			t.Fatalf("run %d recorded as %v, want run_token %s and a new next_token", i, rec, next)
		}
		next = rec["next_token"].(string)
		st = killAndRestart(t, d, "armed", st.Pid)
	}
	d.Kill(ctxT(t), "armed")
}

// DRV-4: a daemon that restarted a run (announced ahead, no write before
// the spawn) and died before recording it leaves a live process that the
// state file names only as next_token, over the record of the run that
// ended, running or already recorded as ended. The next Driver finds it
// and adopts it: not killed with what the ended run left in the cgroup,
// not started a second time.
func TestDRV4AdoptRestartNotYetRecorded(t *testing.T) {
	for _, exitRecorded := range []bool{false, true} {
		t.Run("exit recorded "+strconv.FormatBool(exitRecorded), func(t *testing.T) {
			dir := t.TempDir()
			a := newDriver(t, dir)
			mustCreate(t, a, shSpec("early", "sleep 3600", nil))
			first := mustStart(t, a, "early")
			before := stateOf(t, dir, "early") // the first run, recorded
			second := killAndRestart(t, a, "early", first.Pid)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			// What the disk held while the second run was being spawned.
			rec := before
			if exitRecorded {
				rec["running"], rec["exit_code"] = false, -1
				delete(rec, "pid")
				delete(rec, "proc_start")
				delete(rec, "started_at")
			}
			writeState(t, dir, "early", rec)

			b := newDriver(t, dir)
			defer b.Close()
			after, err := b.Inspect(ctxT(t), "early")
			if err != nil {
				t.Fatal(err)
			}
			if after.State != drivers.StateRunning || after.Pid != second.Pid {
				t.Fatalf("after the restart: %+v, want the unrecorded run (pid %d) adopted", after, second.Pid)
			}
			if !alive(second.Pid) {
				t.Fatal("the adopted run was killed")
			}
			rec = stateOf(t, dir, "early")
			if rec["run_token"] != before["next_token"] || rec["next_token"] == before["next_token"] || rec["next_token"] == "" {
				t.Errorf("adopted run recorded as %v", rec)
			}
			exit := watchExit(t, b, "early")
			if err := b.Stop(ctxT(t), "early", 2*time.Second); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			recvExit(t, exit, "adopted early")
			waitFor(t, "the adopted run gone", func() bool { return !alive(second.Pid) })
		})
	}
}

// A restart announced but never spawned is nothing: the instance is
// stopped and starts normally with that token.
func TestDRV4AnnouncedRestartThatNeverRanIsNothing(t *testing.T) {
	dir := t.TempDir()
	a := newDriver(t, dir)
	mustCreate(t, a, shSpec("quiet", "sleep 3600", nil))
	st := mustStart(t, a, "quiet")
	if err := a.Stop(ctxT(t), "quiet", time.Second); err != nil {
		t.Fatal(err)
	}
	next := stateOf(t, dir, "quiet")["next_token"]
	a.Close()

	b := newDriver(t, dir)
	defer b.Close()
	if got, err := b.Inspect(ctxT(t), "quiet"); err != nil || got.State != drivers.StateStopped {
		t.Fatalf("after the restart: %+v %v, want stopped", got, err)
	}
	again := mustStart(t, b, "quiet")
	if again.Pid == st.Pid || tokenIn(t, again.Pid) != next {
		t.Errorf("start after the restart: %+v carries %q, want %v", again, tokenIn(t, again.Pid), next)
	}
	b.Kill(ctxT(t), "quiet")
}
