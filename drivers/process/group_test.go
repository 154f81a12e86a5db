package process_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/process"
)

// groupScript leaves a grandchild in the workload's process group: the
// shape of the orphan found after adoption (issue 13).
const groupScript = "sleep 1000 & wait"

// groupReps is how often each adoption scenario is repeated. Before the
// fix, Stop after adoption left the grandchild alive in 4 runs of 10 here
// (2 of 5 in the issue), so 20 clean runs in a row would happen by chance
// with probability 0.6^20, about 4e-5.
const groupReps = 20

// crashedDaemonGroup plays a daemon that starts the helper's script as
// "grp" on dir and is SIGKILLed once the script's child runs beside it
// in the group. It returns the run's pid, which is its process group.
func crashedDaemonGroup(t *testing.T, dir string) int {
	t.Helper()
	helper, out := startHelper(t, "group:"+dir)
	var pid int
	for out.Scan() && out.Text() != "ready" {
		f := strings.Fields(out.Text())
		if len(f) != 3 || f[0] != "started" {
			t.Fatalf("helper: %q", out.Text())
		}
		pid, _ = strconv.Atoi(f[2])
	}
	if pid == 0 {
		t.Fatal("helper started nothing")
	}
	t.Cleanup(func() { unix.Kill(-pid, unix.SIGKILL) })
	waitFor(t, "the script's child in the group", func() bool { return len(drivertest.GroupMembers(pid)) >= 2 })
	helper.Process.Signal(unix.SIGKILL)
	helper.Wait()
	return pid
}

// groupGone waits up to limit for pgid's group to empty. The kill is
// asynchronous; a group still there after limit has been left behind.
func groupGone(pgid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if len(drivertest.GroupMembers(pgid)) == 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// adoptedGroupEnds runs the adoption scenario groupReps times: a daemon
// running groupScript is SIGKILLed, a new Driver adopts the run, end
// ends it, and the whole group must be gone. It reports the runs that
// left a process behind.
func adoptedGroupEnds(t *testing.T, end func(d *process.Driver, pgid int) error) {
	t.Helper()
	leaks := 0
	for i := range groupReps {
		dir := t.TempDir()
		pgid := crashedDaemonGroup(t, dir)
		d := newDriver(t, dir)
		if st, err := d.Inspect(ctxT(t), "grp"); err != nil || st.State != drivers.StateRunning || st.Pid != pgid {
			d.Close()
			t.Fatalf("run %d: not adopted: %+v %v", i, st, err)
		}
		exit := watchExit(t, d, "grp")
		if err := end(d, pgid); err != nil {
			d.Close()
			t.Fatalf("run %d: %v", i, err)
		}
		recvExit(t, exit, "the adopted run")
		if !groupGone(pgid, 2*time.Second) {
			leaks++
			t.Errorf("run %d: left alive in group %d: %v", i, pgid, drivertest.GroupMembers(pgid))
		}
		d.Close()
	}
	if leaks > 0 {
		t.Errorf("%d of %d adopted runs left a process behind", leaks, groupReps)
	}
}

// DRV-3, DRV-4: after a daemon SIGKILL and adoption, Stop still ends the
// run's whole process group: the `sleep` the shell started dies with it,
// every time. (Root cause of the orphan in issue 13: for an adopted
// leader the group was signalled only if the leader was still alive just
// after it had been signalled, a race the leader often lost.)
func TestDRV4AdoptedStopKillsTheGroup(t *testing.T) {
	adoptedGroupEnds(t, func(d *process.Driver, _ int) error {
		return d.Stop(ctxT(t), "grp", 5*time.Second)
	})
}

// DRV-3, DRV-4: the same for Kill.
func TestDRV4AdoptedKillKillsTheGroup(t *testing.T) {
	adoptedGroupEnds(t, func(d *process.Driver, _ int) error {
		return d.Kill(ctxT(t), "grp")
	})
}

// DRV-3, DRV-4: when an adopted run's main process exits on its own,
// what is left of its group is killed, as for a run the driver started
// (the leader is reaped by whoever inherited it, not by us).
func TestDRV4AdoptedLeaderExitKillsTheGroup(t *testing.T) {
	adoptedGroupEnds(t, func(_ *process.Driver, pgid int) error {
		return unix.Kill(pgid, unix.SIGKILL)
	})
}

// DRV-3, DRV-4 on a kernel before 6.9 (no PIDFD_SIGNAL_PROCESS_GROUP):
// the group is named by number, and Stop still ends all of it.
func TestDRV4AdoptedStopKillsTheGroupByNumber(t *testing.T) {
	defer process.NameGroupsByNumber()()
	adoptedGroupEnds(t, func(d *process.Driver, _ int) error {
		return d.Stop(ctxT(t), "grp", 5*time.Second)
	})
}

// DRV-3, DRV-4, DRV-15: a run whose main process died while no daemon
// watched it is not adopted, and what it left is killed when the next
// Driver loads: its process group, and, through its cgroup, a process that
// left the group (setsid) too. Without cgroups that one is not reached.
func TestDRV4LeftoversOfAnUnwatchedRunAreKilled(t *testing.T) {
	t.Run("cgroup", func(t *testing.T) { leftoversOfAnUnwatchedRun(t, false) })
	t.Run("no cgroups", func(t *testing.T) {
		t.Setenv(helperNoCgroupsEnv, "1")
		leftoversOfAnUnwatchedRun(t, true)
	})
}

func leftoversOfAnUnwatchedRun(t *testing.T, noCgroups bool) {
	t.Setenv(helperScriptEnv, "setsid sleep 1001 & sleep 1000 & wait")
	dir := t.TempDir()
	pgid := crashedDaemonGroup(t, dir)
	var outside int
	waitFor(t, "the setsid child", func() bool { outside = sessionLeaderCarrying(t, dir); return outside > 0 })
	t.Cleanup(func() { unix.Kill(outside, unix.SIGKILL) })
	unix.Kill(pgid, unix.SIGKILL)
	waitFor(t, "the leader gone", func() bool { return !alive(pgid) })
	if len(drivertest.GroupMembers(pgid)) == 0 {
		t.Fatal("the leader took its group with it; nothing left to clean up")
	}

	d, err := process.New(process.Options{Dir: dir, CgroupRoot: cgroupRoot, NoCgroups: noCgroups, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if st, err := d.Inspect(ctxT(t), "grp"); err != nil || st.State != drivers.StateStopped {
		t.Fatalf("after the restart: %+v %v, want stopped", st, err)
	}
	if !groupGone(pgid, 2*time.Second) {
		t.Errorf("left alive in group %d: %v", pgid, drivertest.GroupMembers(pgid))
	}
	if noCgroups {
		if !alive(outside) {
			t.Errorf("without cgroups, the process that left the group (setsid, pid %d) was killed", outside)
		}
		return
	}
	waitFor(t, "the setsid child killed through the cgroup", func() bool { return !alive(outside) })
	if err := d.Delete(ctxT(t), "grp"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

// sessionLeaderCarrying finds the `sleep 1001` of the test's script: a
// process that carries the run token recorded in dir and leads its own
// process group (only this run's processes carry its token).
func sessionLeaderCarrying(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "instances", "grp", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Token string `json:"run_token"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Token == "" {
		t.Fatalf("no run token in %s: %v", b, err)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if string(cmd) == "sleep\x001001\x00" && processGroupOf(pid) == pid &&
			slices.Contains(strings.Split(string(env), "\x00"), process.EnvRunToken+"="+rec.Token) {
			return pid
		}
	}
	return 0
}

func processGroupOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, _ := strconv.Atoi(f[2])
	return n
}
