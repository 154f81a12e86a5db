package process_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/cgroup"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/process"
)

// These run real workloads in real cgroups on this machine (root; cgroup
// v1 hybrid on the test VM), below this test process's own subtree.

func needCgroups(t *testing.T) *cgroup.Host {
	t.Helper()
	drivertest.Need(t, "cgroups", os.Geteuid() == 0, "the process driver makes cgroups only as root")
	h, err := cgroup.Detect(cgroup.Options{Root: cgroupRoot})
	drivertest.Need(t, "cgroups", err == nil, "no usable cgroup hierarchy: "+errString(err))
	return h
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// groupOf opens the cgroup dir's state file names for instance name.
func groupOf(t *testing.T, h *cgroup.Host, dir, name string) *cgroup.Group {
	t.Helper()
	rel := stateField(t, dir, name).Cgroup
	if rel == "" {
		t.Fatalf("%s: the state file names no cgroup", name)
	}
	g, ok := h.Open(rel, cgroup.Limits{})
	if !ok {
		t.Fatalf("%s: cgroup %s does not exist", name, rel)
	}
	return g
}

type stateFile struct {
	Cgroup   string `json:"cgroup"`
	OOMKills uint64 `json:"oom_kills"`
	Reason   string `json:"reason"`
	Pid      int    `json:"pid"`
}

func stateField(t *testing.T, dir, name string) stateFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "instances", name, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func readCounter(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// gone reports whether none of the group's directories exists any more.
func gone(g *cgroup.Group) bool {
	for _, c := range []string{cgroup.CPU, cgroup.CPUAcct, cgroup.Memory, cgroup.Pids} {
		if dir := g.Dir(c); dir != "" {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				return false
			}
		}
	}
	return true
}

// DRV-12: a run is in its instance's cgroup from its first instruction
// (its first command prints its own /proc/self/cgroup); the cgroup lives
// across a crash and its restart, and Stop removes it.
func TestDRV12EachRunIsInItsOwnCgroup(t *testing.T) {
	h := needCgroups(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, shSpec("own", "cat /proc/self/cgroup; sleep 3600", nil))
	mustStart(t, d, "own")
	g := groupOf(t, h, dir, "own")
	logs := waitLogs(t, d, "own", "pids:")
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
		if h.Missing(c) == nil && h.Version() == cgroup.V1 && !strings.Contains(logs, ":"+c+":/"+g.Rel()+"\n") {
			t.Errorf("the run's first command is not in %s of %s:\n%s", g.Rel(), c, logs)
		}
	}
	first, err := d.Usage(ctxT(t), "own")
	if err != nil || first.Pids < 1 || first.MemoryBytes <= 0 {
		t.Fatalf("Usage: %+v %v", first, err)
	}
	// A crash and its restart keep the cgroup (nothing made on the
	// restart path).
	exits := watchExit(t, d, "own")
	st, _ := d.Inspect(ctxT(t), "own")
	unix.Kill(st.Pid, unix.SIGKILL)
	recvExit(t, exits, "the crash")
	mustStart(t, d, "own")
	if again := groupOf(t, h, dir, "own"); again.Rel() != g.Rel() || gone(g) {
		t.Errorf("the restart moved the run to %s from %s", again.Rel(), g.Rel())
	}
	if err := d.Stop(ctxT(t), "own", time.Second); err != nil {
		t.Fatal(err)
	}
	if !gone(g) || stateField(t, dir, "own").Cgroup != "" {
		t.Errorf("Stop left cgroup %s (state names %q)", g.Rel(), stateField(t, dir, "own").Cgroup)
	}
	if u, err := d.Usage(ctxT(t), "own"); err != nil || u != (drivers.Usage{}) {
		t.Errorf("Usage of a stopped instance: %+v %v, want zero", u, err)
	}
	mustStart(t, d, "own") // a new cgroup
	if g2 := groupOf(t, h, dir, "own"); gone(g2) {
		t.Errorf("no cgroup after a start that followed a stop")
	}
	if err := d.Kill(ctxT(t), "own"); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctxT(t), "own"); err != nil {
		t.Fatal(err)
	}
	if !gone(g) {
		t.Errorf("Delete left the cgroup")
	}
}

// DRV-13, DRV-14: a memory hog with a 64 MiB limit is OOM-killed by the
// kernel inside its own cgroup, and its exit says so, from the cgroup's
// OOM counter; the reason outlives the driver (state file).
func TestDRV14MemoryHogIsOOMKilled(t *testing.T) {
	h := needCgroups(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	spec := drivers.Spec{Name: "hog", Command: []string{"tail", "/dev/zero"}, Resources: drivers.Resources{MemoryBytes: 64 << 20}}
	mustCreate(t, d, spec)
	exits := watchExitAfterStart(t, d, "hog")
	g := groupOf(t, h, dir, "hog")
	limit := readCounter(t, filepath.Join(g.Dir(cgroup.Memory), "memory.limit_in_bytes"))
	if h.Version() == cgroup.V1 && limit != 64<<20 {
		t.Errorf("memory.limit_in_bytes = %d", limit)
	}
	e := recvExit(t, exits, "the hog's end")
	if e.Signal != "killed" || e.Reason != "oom-killed (limit 64 MiB)" {
		t.Fatalf("exit %+v, want killed with reason oom-killed (limit 64 MiB)", e)
	}
	if got := e.Describe(); got != "oom-killed (limit 64 MiB)" {
		t.Errorf("Describe: %q", got)
	}
	if n, err := g.OOMKills(); err != nil || n < 1 {
		t.Errorf("the cgroup's own OOM counter: %d %v", n, err)
	}
	// The exit is written off the restart path: wait for it.
	waitFor(t, "the exit in the state file", func() bool {
		sf := stateField(t, dir, "hog")
		return sf.Reason == e.Reason && sf.OOMKills >= 1
	})
	// A run that is killed otherwise is not called an OOM kill.
	d.Close()
	d = newDriver(t, dir)
	defer d.Close()
	exits = watchExitAfterStart(t, d, "hog")
	st, _ := d.Inspect(ctxT(t), "hog")
	if err := d.Kill(ctxT(t), "hog"); err != nil {
		t.Fatal(err)
	}
	if e := recvExit(t, exits, "the kill"); e.Reason != "" && st.Pid != 0 {
		// The hog may have been OOM-killed by itself first; only a kill
		// that beat it must carry no reason.
		if !strings.HasPrefix(e.Reason, "oom-killed") {
			t.Errorf("a plain kill got reason %q", e.Reason)
		}
	}
	if err := d.Delete(ctxT(t), "hog"); err != nil {
		t.Fatal(err)
	}
}

func watchExitAfterStart(t *testing.T, d drivers.Driver, name string) <-chan drivers.Exit {
	t.Helper()
	mustStart(t, d, name)
	return watchExit(t, d, name)
}

// DRV-13: a CPU spinner limited to 0.25 CPUs uses at most 30% of a core
// over 5s, as the cgroup's own cpuacct counter measures the kernel's
// enforcement; the driver's Usage agrees with that counter within 10%.
func TestDRV13CPUSpinnerStaysWithinItsQuota(t *testing.T) {
	h := needCgroups(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, drivers.Spec{Name: "spin", Command: []string{"sh", "-c", "while :; do :; done"}, Resources: drivers.Resources{CPUs: 0.25}})
	mustStart(t, d, "spin")
	defer d.Kill(ctxT(t), "spin")
	g := groupOf(t, h, dir, "spin")
	if h.Version() == cgroup.V1 {
		if q := readCounter(t, filepath.Join(g.Dir(cgroup.CPU), "cpu.cfs_quota_us")); q != 25000 {
			t.Errorf("cpu.cfs_quota_us = %d", q)
		}
	}
	counter := func() time.Duration {
		u, err := g.Usage()
		if err != nil {
			t.Fatal(err)
		}
		return u.CPU
	}
	time.Sleep(300 * time.Millisecond) // past the start
	c0, t0 := counter(), time.Now()
	time.Sleep(5 * time.Second)
	c1, t1 := counter(), time.Now()
	used := float64(c1-c0) / float64(t1.Sub(t0))
	t.Logf("the spinner used %.3f of a core over %v (limit 0.25)", used, t1.Sub(t0).Round(time.Millisecond))
	if used > 0.30 {
		t.Errorf("the spinner used %.3f of a core, more than 0.30", used)
	}
	if used < 0.05 {
		t.Errorf("the spinner used %.3f of a core: it did not spin", used)
	}
	u, err := d.Usage(ctxT(t), "spin")
	c2 := counter()
	if err != nil || !within(u.CPU.Seconds(), c2.Seconds(), 0.10) {
		t.Errorf("Usage CPU %v, the cgroup's counter %v: not within 10%% (%v)", u.CPU, c2, err)
	}
}

func within(got, want, frac float64) bool {
	return math.Abs(got-want) <= frac*math.Abs(want)
}

// DRV-13: a fork bomb stops at pids 50; Stop ends every process of it and
// removes the cgroup.
func TestDRV13ForkBombStopsAtPids(t *testing.T) {
	h := needCgroups(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, drivers.Spec{Name: "bomb", Command: []string{"sh", "-c", "f() { f & f & wait; }; f"},
		Resources: drivers.Resources{Pids: 50, CPUs: 0.25}})
	mustStart(t, d, "bomb")
	g := groupOf(t, h, dir, "bomb")
	// Until the kernel has refused a fork (pids.events counts them), the
	// group never holds more than 50 tasks.
	refused := func() bool {
		b, err := os.ReadFile(filepath.Join(g.Dir(cgroup.Pids), "pids.events"))
		return err == nil && strings.TrimSpace(string(b)) != "max 0"
	}
	sawMax := false
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !sawMax; time.Sleep(20 * time.Millisecond) {
		u, err := d.Usage(ctxT(t), "bomb")
		if err != nil {
			t.Fatal(err)
		}
		if u.Pids > 50 {
			t.Fatalf("pids %d passed the limit 50", u.Pids)
		}
		sawMax = refused()
	}
	if !sawMax {
		t.Fatalf("the kernel never refused a fork of the bomb (pids.events)")
	}
	if err := d.Stop(ctxT(t), "bomb", 100*time.Millisecond); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !gone(g) {
		t.Errorf("Stop left the bomb's cgroup")
	}
	if err := d.Delete(ctxT(t), "bomb"); err != nil {
		t.Fatal(err)
	}
}

// DRV-15: after a daemon SIGKILL the next driver adopts the run with its
// cgroup; Stop then ends every process in it, also one that left the
// process group (setsid), and removes the cgroup.
func TestDRV15AdoptedStopEmptiesAndRemovesTheCgroup(t *testing.T) {
	h := needCgroups(t)
	t.Setenv(helperScriptEnv, "setsid sleep 1001 & sleep 1000 & wait")
	dir := t.TempDir()
	crashedDaemonGroup(t, dir)
	var outside int
	waitFor(t, "the setsid child", func() bool { outside = sessionLeaderCarrying(t, dir); return outside > 0 })
	t.Cleanup(func() { unix.Kill(outside, unix.SIGKILL) })
	g := groupOf(t, h, dir, "grp")

	d := newDriver(t, dir)
	defer d.Close()
	if st, err := d.Inspect(ctxT(t), "grp"); err != nil || st.State != drivers.StateRunning {
		t.Fatalf("not adopted: %+v %v", st, err)
	}
	if pids, _ := g.Procs(); len(pids) < 3 {
		t.Fatalf("the cgroup holds %v, want the shell and its two sleeps", pids)
	}
	if err := d.Stop(ctxT(t), "grp", time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if alive(outside) {
		t.Errorf("the process that left the group (pid %d) outlived Stop", outside)
	}
	if !gone(g) {
		t.Errorf("Stop left cgroup %s", g.Rel())
	}
	if err := d.Delete(ctxT(t), "grp"); err != nil {
		t.Fatal(err)
	}
}

// DRV-16: a stable workload's usage (20 MB held, then asleep) matches the
// cgroup's own counters within 10%.
// The sleep is forked before "held" is printed, so the count of pids
// (sh and sleep) is settled when the test reads it.
func TestDRV16UsageMatchesTheCgroupCounters(t *testing.T) {
	h := needCgroups(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, shSpec("held", `x=$(head -c 20000000 /dev/zero | tr '\0' a); sleep 3600 & echo held; wait`, nil))
	mustStart(t, d, "held")
	defer d.Kill(ctxT(t), "held")
	waitLogs(t, d, "held", "held")
	g := groupOf(t, h, dir, "held")
	u, err := d.Usage(ctxT(t), "held")
	if err != nil {
		t.Fatal(err)
	}
	own, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if h.Version() == cgroup.V1 {
		own.Memory = readCounter(t, filepath.Join(g.Dir(cgroup.Memory), "memory.usage_in_bytes"))
		own.CPU = time.Duration(readCounter(t, filepath.Join(g.Dir(cgroup.CPUAcct), "cpuacct.usage")))
	}
	if u.MemoryBytes < 20e6 || !within(float64(u.MemoryBytes), float64(own.Memory), 0.10) {
		t.Errorf("memory %d, the cgroup's %d", u.MemoryBytes, own.Memory)
	}
	if !within(u.CPU.Seconds(), own.CPU.Seconds(), 0.10) || u.CPU <= 0 {
		t.Errorf("cpu %v, the cgroup's %v", u.CPU, own.CPU)
	}
	if u.MemoryPeakBytes < u.MemoryBytes || u.Pids != 2 {
		t.Errorf("peak %d below now %d, or pids %d (want sh and sleep)", u.MemoryPeakBytes, u.MemoryBytes, u.Pids)
	}
}

// DRV-17: a driver without cgroups refuses limits at Validate and Create,
// saying why; a spec without limits still runs and is measured from /proc.
func TestDRV17LimitsRefusedWithoutCgroups(t *testing.T) {
	d, err := process.New(process.Options{Dir: t.TempDir(), NoCgroups: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	limited := drivers.Spec{Name: "lim", Command: []string{"sleep", "100"}, Resources: drivers.Resources{MemoryBytes: 256 << 20}}
	for what, err := range map[string]error{"Validate": d.Validate(ctxT(t), limited), "Create": d.Create(ctxT(t), limited)} {
		if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), "memory 256 MiB cannot be enforced") {
			t.Errorf("%s of a limited spec without cgroups: %v", what, err)
		}
	}
	mustCreate(t, d, drivers.Spec{Name: "free", Command: []string{"sleep", "100"}})
	mustStart(t, d, "free")
	defer d.Kill(ctxT(t), "free")
	u, err := d.Usage(ctxT(t), "free")
	if err != nil || u.Pids != 1 || u.MemoryBytes <= 0 || u.MemoryPeakBytes < u.MemoryBytes {
		t.Errorf("usage from /proc: %+v %v", u, err)
	}
}

// DRV-17: a host whose cgroups lack a controller (here: a v1 host with no
// memory hierarchy) refuses a memory limit, naming the controller, and
// takes a cpus limit; so does one with more cpus than the node has.
func TestDRV17MissingControllerIsNamed(t *testing.T) {
	needCgroups(t)
	var info strings.Builder
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if !strings.Contains(line, " - cgroup cgroup ") || !strings.HasSuffix(line, ",memory") {
			info.WriteString(line + "\n")
		}
	}
	h, err := cgroup.Detect(cgroup.Options{Root: cgroupRoot, Mountinfo: []byte(info.String()), Version: cgroup.V1})
	if err != nil {
		t.Skipf("SKIP this host's cgroups are not v1 (%v)", err)
	}
	d, err := process.New(process.Options{Dir: t.TempDir(), Cgroups: h, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mem := drivers.Spec{Name: "mem", Command: []string{"sleep", "1"}, Resources: drivers.Resources{MemoryBytes: 64 << 20}}
	if err := d.Validate(ctxT(t), mem); !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), "the memory controller is not mounted") {
		t.Errorf("memory limit on a host without memory: %v", err)
	}
	cpu := drivers.Spec{Name: "cpu", Command: []string{"sleep", "1"}, Resources: drivers.Resources{CPUs: 0.5}}
	if err := d.Validate(ctxT(t), cpu); err != nil {
		t.Errorf("cpus limit: %v", err)
	}
	many := drivers.Spec{Name: "many", Command: []string{"sleep", "1"}, Resources: drivers.Resources{CPUs: float64(runtime.NumCPU() + 1)}}
	if err := d.Validate(ctxT(t), many); !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), "CPUs of this node") {
		t.Errorf("more cpus than the node: %v", err)
	}
}

// DRV-15: a cgroup whose removal fails half way (here: a child group made
// inside it keeps one hierarchy's directory busy) is not forgotten: Delete
// reports the failure as transient, keeps the instance, and a later Delete,
// once the obstacle is gone, removes every hierarchy's directory.
func TestDRV15HalfRemovedCgroupIsRetried(t *testing.T) {
	h := needCgroups(t)
	dir := t.TempDir()
	d := newDriver(t, dir)
	defer d.Close()
	mustCreate(t, d, shSpec("half", "sleep 1000", nil))
	mustStart(t, d, "half")
	g := groupOf(t, h, dir, "half")
	blocker := filepath.Join(g.Dir(cgroup.Memory), "blocker")
	if err := os.Mkdir(blocker, 0o755); err != nil {
		t.Fatalf("a child cgroup: %v", err)
	}
	t.Cleanup(func() { os.Remove(blocker) })
	if err := d.Stop(ctxT(t), "half", time.Second); !errors.Is(err, drivers.ErrTransient) {
		t.Fatalf("Stop with a busy cgroup = %v, want a transient error", err)
	}
	if err := d.Delete(ctxT(t), "half"); !errors.Is(err, drivers.ErrTransient) {
		t.Fatalf("Delete with a busy cgroup = %v, want a transient error", err)
	}
	if gone(g) {
		t.Fatal("the cgroup is gone although its memory directory is busy")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctxT(t), "half"); err != nil {
		t.Fatalf("Delete once the obstacle is gone: %v", err)
	}
	if !gone(g) {
		t.Errorf("Delete left cgroup %s in some hierarchy", g.Rel())
	}
}
