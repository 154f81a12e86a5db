package cgroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests make real groups on this machine (root, cgroup v1 hybrid on
// the test VM; v2 on the unified mount where there is one), below a
// subtree of their own that they remove.

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// need is drivertest.Need (which imports this package): skip with the
// reason, or fail when ENGENHO_REQUIRE names the component.
func need(t *testing.T, component string, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	for _, c := range strings.Split(os.Getenv("ENGENHO_REQUIRE"), ",") {
		if strings.TrimSpace(c) == component {
			t.Fatalf("%s required by ENGENHO_REQUIRE but unavailable: %s", component, reason)
		}
	}
	t.Skipf("SKIP %s unavailable: %s (ENGENHO_REQUIRE=%s makes this fail)", component, reason, component)
}

func testHost(t *testing.T, v Version) *Host {
	t.Helper()
	need(t, "cgroups", os.Geteuid() == 0, "the tests make cgroups, which needs root")
	var b [4]byte
	rand.Read(b[:])
	root := "engenho-test/cg-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := parseMountinfo(info)
	if v == V1 {
		need(t, "cgroups", len(v1) > 0, "no cgroup v1 hierarchy is mounted")
	} else {
		need(t, "cgroups", v2 != "", "no cgroup2 hierarchy is mounted")
	}
	h, err := Detect(Options{Root: root, Version: v})
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	t.Cleanup(func() { removeSubtree(t, h) })
	return h
}

// removeSubtree removes the test's root in every hierarchy (and its
// parent engenho-test when that is empty), failing on anything left.
func removeSubtree(t *testing.T, h *Host) {
	for _, hy := range h.hs {
		dir := filepath.Join(hy.mount, h.root)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				t.Errorf("left behind: cgroup %s", filepath.Join(dir, e.Name()))
				unix.Rmdir(filepath.Join(dir, e.Name()))
			}
		}
		if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Errorf("rmdir %s: %v", dir, err)
		}
		unix.Rmdir(filepath.Dir(dir))
	}
}

// child is a process started in a group, its output on a pipe.
type child struct {
	pid int
	out *os.File
}

func startIn(t *testing.T, g *Group, argv ...string) child {
	t.Helper()
	return startThrough(t, g.Start, argv...)
}

func (c child) wait(t *testing.T) (unix.WaitStatus, string) {
	t.Helper()
	var ws unix.WaitStatus
	if _, err := unix.Wait4(c.pid, &ws, 0, nil); err != nil {
		t.Fatalf("wait4: %v", err)
	}
	b, _ := io.ReadAll(c.out)
	return ws, string(b)
}

func mustCreate(t *testing.T, h *Host, name string, l Limits) *Group {
	t.Helper()
	g, err := h.Create(name, l)
	if err != nil {
		t.Fatalf("Create %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Drain(ctx, sleepCtx)
		g.Remove(ctx, sleepCtx)
	})
	return g
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// DRV-12: the child is in the group in every hierarchy from its first
// instruction (cat reads its own /proc/self/cgroup at once), and no
// thread of ours is left in the group after the start.
func TestDRV12V1ChildStartsInsideItsGroup(t *testing.T) {
	h := testHost(t, V1)
	g := mustCreate(t, h, "first", Limits{})
	for range 3 { // repeated: the start thread must never be one we keep
		c := startIn(t, g, "/bin/cat", "/proc/self/cgroup")
		ws, out := c.wait(t)
		if ws.ExitStatus() != 0 {
			t.Fatalf("cat: %v %s", ws, out)
		}
		for _, hy := range h.hs {
			if !memberOf([]byte(out), hy.procsKey, V1, "/"+g.Rel()) {
				t.Errorf("the child's /proc/self/cgroup does not place it in %s of %s:\n%s", g.Rel(), hy.mount, out)
			}
		}
		// The start thread ends with its goroutine, a moment after the
		// fork: wait for that (a thread kept in the group never goes).
		if !waitUntil(10*time.Second, func() bool { return len(oursIn(t, []*Group{g})) == 0 }) {
			t.Errorf("threads of the test process stay in %s: %v", g.Rel(), oursIn(t, []*Group{g}))
		}
	}
	u, err := g.Usage()
	if err != nil || u.CPU <= 0 || u.MemoryPeak <= 0 {
		t.Errorf("usage after three runs: %+v %v (cpu and peak should count them)", u, err)
	}
}

// DRV-12 with the Spawner (PERF-1): one kept thread forks every child,
// each inside its own group from its first instruction, in turn across
// two groups; the thread leaves each group after the fork (no thread of
// ours stays in a workload's group, where it would count against its
// pids and hold its removal), and Close ends it. A Start after Close
// still places the child (a thread of its own).
func TestDRV12V1SpawnerStartsEachChildInsideItsGroup(t *testing.T) {
	h := testHost(t, V1)
	gs := []*Group{mustCreate(t, h, "sp-a", Limits{}), mustCreate(t, h, "sp-b", Limits{})}
	s := NewSpawner()
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	for i := range 6 {
		if i == 5 {
			s.Close()
			closed = true
		}
		g := gs[i%2]
		c := startWith(t, s, g, "/bin/cat", "/proc/self/cgroup")
		ws, out := c.wait(t)
		if ws.ExitStatus() != 0 {
			t.Fatalf("cat: %v %s", ws, out)
		}
		for _, hy := range h.hs {
			if !memberOf([]byte(out), hy.procsKey, V1, "/"+g.Rel()) {
				t.Errorf("fork %d: the child's /proc/self/cgroup does not place it in %s of %s:\n%s", i, g.Rel(), hy.mount, out)
			}
		}
		if !waitUntil(10*time.Second, func() bool { return len(oursIn(t, gs)) == 0 }) {
			t.Errorf("fork %d: threads of the test process stay in the groups: %v", i, oursIn(t, gs))
		}
	}
}

// startWith is startIn through a Spawner.
func startWith(t *testing.T, s *Spawner, g *Group, argv ...string) child {
	t.Helper()
	return startThrough(t, func(sys *syscall.SysProcAttr, fork func() error) error { return s.Start(g, sys, fork) }, argv...)
}

// startThrough forks argv through start (a Group's or a Spawner's), its
// output on a pipe, and kills its process group at the test's end.
func startThrough(t *testing.T, start func(*syscall.SysProcAttr, func() error) error, argv ...string) child {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sys := &syscall.SysProcAttr{Setpgid: true}
	attr := &syscall.ProcAttr{Env: []string{"PATH=/usr/bin:/bin"}, Files: []uintptr{0, w.Fd(), w.Fd()}, Sys: sys}
	var pid int
	if err := start(sys, func() error {
		var err error
		pid, err = syscall.ForkExec(argv[0], argv, attr)
		return err
	}); err != nil {
		r.Close()
		t.Fatalf("Start %v: %v", argv, err)
	}
	t.Cleanup(func() {
		unix.Kill(-pid, unix.SIGKILL)
		unix.Wait4(pid, nil, unix.WNOHANG, nil)
		r.Close()
	})
	return child{pid: pid, out: r}
}

// oursIn lists the threads of this process found in the groups' tasks.
func oursIn(t *testing.T, gs []*Group) []int {
	ours := ownThreads(t)
	var in []int
	for _, g := range gs {
		for _, dir := range g.dirs() {
			for _, tid := range parsePids([]byte(readFile(t, filepath.Join(dir, "tasks")))) {
				if slices.Contains(ours, tid) {
					in = append(in, tid)
				}
			}
		}
	}
	return in
}

// waitUntil polls cond every 5ms until it holds or limit passes (a bound
// on a broken test, not a timing).
func waitUntil(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func ownThreads(t *testing.T) []int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// DRV-13, DRV-14: over its memory limit a process is OOM-killed by the
// kernel inside its group, and the group's counter says so.
func TestDRV14V1MemoryLimitOOMKillsInsideTheGroup(t *testing.T) {
	h := testHost(t, V1)
	limit := int64(16 << 20)
	g := mustCreate(t, h, "hog", Limits{MemoryBytes: limit})
	if got := readFile(t, filepath.Join(g.Dir(Memory), "memory.limit_in_bytes")); got != strconv.FormatInt(limit, 10) {
		t.Errorf("memory.limit_in_bytes = %s", got)
	}
	if h.memsw {
		if got := readFile(t, filepath.Join(g.Dir(Memory), "memory.memsw.limit_in_bytes")); got != strconv.FormatInt(limit, 10) {
			t.Errorf("memory.memsw.limit_in_bytes = %s", got)
		}
	}
	c := startIn(t, g, "/usr/bin/tail", "/dev/zero") // buffers a line that never ends
	ws, _ := c.wait(t)
	if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
		t.Fatalf("the hog ended with %v, want SIGKILL from the OOM killer", ws)
	}
	n, err := g.OOMKills()
	if err != nil || n < 1 {
		t.Errorf("OOMKills = %d, %v; want >= 1", n, err)
	}
	u, _ := g.Usage()
	if u.MemoryPeak > limit {
		t.Errorf("peak %d above the limit %d", u.MemoryPeak, limit)
	}
}

// DRV-13: a fork bomb stops at pids.max, and Drain ends it.
func TestDRV13V1PidsStopsAForkBomb(t *testing.T) {
	h := testHost(t, V1)
	g := mustCreate(t, h, "bomb", Limits{Pids: 20, CPUs: 0.2})
	if got := readFile(t, filepath.Join(g.Dir(CPU), "cpu.cfs_quota_us")); got != "20000" {
		t.Errorf("cpu.cfs_quota_us = %s", got)
	}
	startIn(t, g, "/bin/sh", "-c", "f() { f & f & wait; }; f")
	deadline := time.Now().Add(10 * time.Second)
	hitMax := false
	for time.Now().Before(deadline) && !hitMax {
		u, err := g.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if u.Pids > 20 {
			t.Fatalf("pids.current %d passed pids.max 20", u.Pids)
		}
		events := readFile(t, filepath.Join(g.Dir(Pids), "pids.events"))
		hitMax = events != "max 0"
		time.Sleep(20 * time.Millisecond)
	}
	if !hitMax {
		t.Fatalf("the bomb never reached pids.max (pids.events never moved)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.Drain(ctx, sleepCtx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if pids, _ := g.Procs(); len(pids) != 0 {
		t.Errorf("after Drain: %v", pids)
	}
}

// DRV-15: Drain reaches processes that left the process group (setsid),
// and Remove takes the group away in every hierarchy.
func TestDRV15V1DrainReachesEscapeesAndRemoveDeletes(t *testing.T) {
	h := testHost(t, V1)
	g, err := h.Create("esc", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	startIn(t, g, "/bin/sh", "-c", "setsid sleep 100 & sleep 100")
	waitProcs(t, g, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.Drain(ctx, sleepCtx); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(ctx, sleepCtx); err != nil {
		t.Fatal(err)
	}
	for _, dir := range g.dirs() {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", dir, err)
		}
	}
	if _, ok := h.Open(g.Rel(), Limits{}); ok {
		t.Errorf("Open finds a removed group")
	}
}

// DRV-12: a group left by an earlier run is reused when empty, refused
// (ErrBusy) while it holds processes.
func TestDRV12V1CreateReusesAnEmptyGroupOnly(t *testing.T) {
	h := testHost(t, V1)
	g := mustCreate(t, h, "again", Limits{MemoryBytes: 32 << 20})
	startIn(t, g, "/bin/sleep", "100")
	waitProcs(t, g, 1)
	if _, err := h.Create("again", Limits{}); !errors.Is(err, ErrBusy) {
		t.Errorf("Create over a busy group: %v, want ErrBusy", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.Drain(ctx, sleepCtx)
	again, err := h.Create("again", Limits{})
	if err != nil {
		t.Fatalf("Create over an empty group: %v", err)
	}
	if got := readFile(t, filepath.Join(again.Dir(Memory), "memory.limit_in_bytes")); got == strconv.Itoa(32<<20) {
		t.Errorf("the old limit was kept")
	}
}

func waitProcs(t *testing.T, g *Group, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if pids, _ := g.Procs(); len(pids) >= n {
			return
		}
	}
	t.Fatalf("the group never held %d processes", n)
}

// DRV-12 on cgroup v2 (the unified hierarchy; on the hybrid test VM it
// has no controllers, so only placement, cpu time and cgroup.kill are
// real there, and a limit is refused with the reason).
func TestDRV12V2PlacementKillAndCPUTime(t *testing.T) {
	h := testHost(t, V2)
	if h.Missing(Memory) != nil {
		if err := h.Check(Limits{MemoryBytes: 64 << 20}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("a memory limit without the controller: %v", err)
		} else {
			t.Logf("DRV-17 as refused here: %v", err)
		}
	}
	g := mustCreate(t, h, "v2", Limits{})
	c := startIn(t, g, "/bin/cat", "/proc/self/cgroup")
	if _, out := c.wait(t); !memberOf([]byte(out), "", V2, "/"+g.Rel()) {
		t.Errorf("the child is not in %s from the start:\n%s", g.Rel(), out)
	}
	busy := startIn(t, g, "/bin/sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	busy.wait(t)
	if u, err := g.Usage(); err != nil || u.CPU <= 0 {
		t.Errorf("cpu time from cpu.stat: %+v %v", u, err)
	}
	startIn(t, g, "/bin/sh", "-c", "setsid sleep 100 & sleep 100")
	waitProcs(t, g, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.Drain(ctx, sleepCtx); err != nil {
		t.Fatal(err)
	}
	if pids, _ := g.Procs(); len(pids) != 0 {
		t.Errorf("after Drain: %v", pids)
	}
}

// A removal that failed half way (on v1 an rmdir can be busy in one
// hierarchy while the others went) leaves directories Open does not find,
// since their primary one is gone; Leftover finds them so cleanup can
// finish the removal.
func TestDRV15LeftoverOfAHalfRemovedGroup(t *testing.T) {
	h := testHost(t, V1)
	g, err := h.Create("half", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Rmdir(filepath.Join(g.primary().mount, g.rel)); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Open(g.rel, Limits{}); ok {
		t.Fatal("Open found a group whose primary directory is gone")
	}
	left, ok := h.Leftover(g.rel)
	if len(h.hs) > 1 && !ok {
		t.Fatal("Leftover does not find what is left in the other hierarchies")
	}
	if ok {
		if err := left.Drain(context.Background(), sleepCtx); err != nil {
			t.Fatal(err)
		}
		if err := left.Remove(context.Background(), sleepCtx); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := h.Leftover(g.rel); ok {
		t.Fatal("still there after Remove")
	}
	if _, ok := h.Leftover("../escape"); ok {
		t.Fatal("Leftover took a path out of the subtree")
	}
}

// PERF-3, DRV-16: Usage keeps its counters open between samples (one
// pread each, no open and close), the counts still move, a removed group
// does not stay busy because of them, and Close gives them back.
func TestPERF3UsageCountersStayOpen(t *testing.T) {
	h := testHost(t, V1)
	g := mustCreate(t, h, "counted", Limits{})
	before := counterFDs.Load()
	c := startIn(t, g, "/bin/sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done; sleep 3600")
	u1, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	opened := counterFDs.Load() - before
	if opened <= 0 {
		t.Fatalf("no counter kept open after a Usage (%d)", opened)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c.out, buf); err != nil || string(buf) != "done\n" {
		t.Fatalf("child: %q %v", buf, err)
	}
	u2, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if got := counterFDs.Load() - before; got != opened {
		t.Errorf("a second Usage changed the open counters: %d, then %d", opened, got)
	}
	if u2.CPU <= u1.CPU || u2.Pids < 1 {
		t.Errorf("counts did not move through the kept descriptors: %+v, then %+v", u1, u2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Drain(ctx, sleepCtx); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(ctx, sleepCtx); err != nil {
		t.Fatalf("Remove with counters open: %v", err)
	}
	g.Close()
	if got := counterFDs.Load(); got != before {
		t.Errorf("Close left %d counters open", got-before)
	}
}
