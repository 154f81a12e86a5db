package cgroup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Group is one instance's control group: a directory in each hierarchy
// the host uses, at the same relative path.
type Group struct {
	h      *Host
	rel    string // relative to each mount: ROOT/NAME
	limits Limits
	// counters are the usage files Usage keeps open (counters.go).
	counters *counterFiles
}

func newGroup(h *Host, rel string, l Limits) *Group {
	g := &Group{h: h, rel: rel, limits: l}
	newCounterFiles(g)
	return g
}

// Rel is the group's path relative to each hierarchy's mount; the
// process driver records it in the instance's state file.
func (g *Group) Rel() string { return g.rel }

// Limits are what Create applied (zero for a group found with Open).
func (g *Group) Limits() Limits { return g.limits }

// Dir is the group's directory in the hierarchy carrying controller c
// ("" when none does).
func (g *Group) Dir(c string) string {
	for _, hy := range g.h.hs {
		if g.h.version == V2 || slices.Contains(hy.controllers, c) {
			return filepath.Join(hy.mount, g.rel)
		}
	}
	return ""
}

func (g *Group) dirs() []string {
	out := make([]string, len(g.h.hs))
	for i, hy := range g.h.hs {
		out[i] = filepath.Join(hy.mount, g.rel)
	}
	return out
}

// primary is the hierarchy whose cgroup.procs lists the group's
// processes: every process of the group is in all its hierarchies.
func (g *Group) primary() hierarchy {
	if g.h.version == V2 {
		return g.h.hs[0]
	}
	for _, c := range []string{Pids, Memory, CPUAcct, CPU} {
		for _, hy := range g.h.hs {
			if slices.Contains(hy.controllers, c) {
				return hy
			}
		}
	}
	return g.h.hs[0]
}

// ErrBusy is the kind of the error Create returns when the group's
// directory exists and holds processes that are not the caller's.
var ErrBusy = errors.New("cgroup holds processes")

// Create makes the group ROOT/name in every hierarchy and applies l. A
// group left empty by an earlier run is reused, its limits written again;
// one that holds processes fails ErrBusy. A controller l needs that the
// host lacks fails ErrUnavailable. Nothing is left behind on failure.
func (h *Host) Create(name string, l Limits) (*Group, error) {
	if err := h.Check(l); err != nil {
		return nil, err
	}
	rel := filepath.Join(h.root, name)
	if err := checkRel(rel); err != nil || strings.Contains(name, "/") {
		return nil, fmt.Errorf("cgroup name %q: want a plain instance name", name)
	}
	g := newGroup(h, rel, l)
	for _, dir := range g.dirs() {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			g.removeDirs()
			return nil, fmt.Errorf("cgroup %s: %w", dir, err)
		}
	}
	if pids, err := g.Procs(); err != nil || len(pids) > 0 {
		if err == nil {
			err = fmt.Errorf("%w: %s holds %d processes (%v) that are not this instance's", ErrBusy, g.Dir(g.primary().controllersOr()), len(pids), pids)
		}
		return nil, err
	}
	if err := g.apply(); err != nil {
		g.removeDirs()
		return nil, err
	}
	return g, nil
}

func (hy hierarchy) controllersOr() string {
	if len(hy.controllers) > 0 {
		return hy.controllers[0]
	}
	return Memory
}

// Open returns the group at rel (as Rel gave it) when it exists: an
// adopted instance's group after a daemon restart. l are the limits it was
// made with.
func (h *Host) Open(rel string, l Limits) (*Group, bool) {
	if checkRel(rel) != nil {
		return nil, false
	}
	g := newGroup(h, rel, l)
	if _, err := os.Stat(filepath.Join(g.primary().mount, rel)); err != nil {
		return nil, false
	}
	return g, true
}

// Leftover opens what is left of group rel in any hierarchy, also where
// its primary directory is gone: a removal that failed half way (an rmdir
// busy in one v1 hierarchy) leaves directories Open does not find. Drain
// and Remove it like any group.
func (h *Host) Leftover(rel string) (*Group, bool) {
	if checkRel(rel) != nil {
		return nil, false
	}
	g := newGroup(h, rel, Limits{})
	for _, dir := range g.dirs() {
		if _, err := os.Stat(dir); err == nil {
			return g, true
		}
	}
	return nil, false
}

// apply writes every setting of the group's limits for the controllers
// the host has.
func (g *Group) apply() error {
	var set []setting
	if g.h.version == V2 {
		set = settingsV2(g.limits)
	} else {
		set = settingsV1(g.limits, g.h.memsw)
	}
	for _, s := range set {
		if g.h.Missing(s.controller) != nil {
			continue
		}
		var err error
		switch path := filepath.Join(g.Dir(s.controller), s.file); s.file {
		case "memory.memsw.limit_in_bytes":
			continue // written with memory.limit_in_bytes
		case "memory.limit_in_bytes":
			err = g.setMemoryV1(path, s.value)
		case "memory.swap.max":
			if err = writeFile(path, s.value); errors.Is(err, os.ErrNotExist) {
				err = nil // a kernel without swap accounting
			}
		default:
			err = writeFile(path, s.value)
		}
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", g.rel, err)
		}
	}
	return nil
}

// setMemoryV1 sets the v1 memory limit and, where swap is accounted, the
// memory+swap limit to the same value, so the limit cannot be dodged by
// swapping. The kernel keeps memsw >= limit at every step: when the
// limit cannot go first (it would pass memsw), memsw goes first.
func (g *Group) setMemoryV1(limitPath, value string) error {
	if !g.h.memsw {
		return writeFile(limitPath, value)
	}
	swPath := filepath.Join(filepath.Dir(limitPath), "memory.memsw.limit_in_bytes")
	if err := writeFile(limitPath, value); err == nil {
		return writeFile(swPath, value)
	} else if !errors.Is(err, unix.EINVAL) {
		return err
	}
	if err := writeFile(swPath, value); err != nil {
		return err
	}
	return writeFile(limitPath, value)
}

// RefreshCPU writes the group's cpu quota again. The kernel then refills
// the period's runtime and unthrottles the group, so a new run of a
// cpu-limited instance whose last run spent its quota is not held up to a
// period before its first instruction (a v1 start forks from a thread
// inside the group). A no-op without a cpus limit.
func (g *Group) RefreshCPU() error {
	if g.limits.CPUs <= 0 || g.h.Missing(CPU) != nil {
		return nil
	}
	if g.h.version == V2 {
		return writeFile(filepath.Join(g.Dir(CPU), "cpu.max"), strconv.FormatInt(quota(g.limits.CPUs), 10)+" "+strconv.Itoa(CFSPeriod))
	}
	return writeFile(filepath.Join(g.Dir(CPU), "cpu.cfs_quota_us"), strconv.FormatInt(quota(g.limits.CPUs), 10))
}

// Procs lists the processes (thread group ids) in the group. Zombies are
// not listed, nor the daemon itself: on v1 its spawner thread waits in a
// group for a moment ahead of a fork (Spawner.Prejoin).
func (g *Group) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(g.primary().mount, g.rel, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(parsePids(b), func(pid int) bool { return pid == os.Getpid() }), nil
}

func parsePids(b []byte) []int {
	var out []int
	for _, f := range bytes.Fields(b) {
		if n, err := strconv.Atoi(string(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Signal sends sig to every process in the group and returns how many it
// reached. Each is signalled through a pidfd opened on it and only after
// /proc shows it still in the group, so a pid reused between the listing
// and the signal is never hit. The daemon's own pid is never signalled.
// On v2, SIGKILL uses cgroup.kill, which also reaches processes forked
// meanwhile.
func (g *Group) Signal(sig unix.Signal) (int, error) {
	pids, err := g.Procs()
	if err != nil || len(pids) == 0 {
		return 0, err
	}
	if g.h.version == V2 && g.h.hasKill && sig == unix.SIGKILL {
		if err := writeFile(filepath.Join(g.primary().mount, g.rel, "cgroup.kill"), "1"); err == nil {
			return len(pids), nil
		}
	}
	self, n := os.Getpid(), 0
	for _, pid := range pids {
		if pid == self {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		if g.holds(pid) && unix.PidfdSendSignal(fd, sig, nil, 0) == nil {
			n++
		}
		unix.Close(fd)
	}
	return n, nil
}

// holds reports whether /proc/PID/cgroup places pid in the group.
func (g *Group) holds(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	return memberOf(b, g.primary().procsKey, g.h.version, "/"+g.rel)
}

// memberOf reads /proc/PID/cgroup ("ID:CONTROLLERS:PATH" per line) and
// reports whether the line of the hierarchy key (v1: its controllers as
// the kernel lists them; v2: the "0::" line) has path want.
func memberOf(procCgroup []byte, key string, v Version, want string) bool {
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if v == V2 && id == "0" && ctrls == "" || v == V1 && ctrls == key && key != "" {
			return p == want
		}
	}
	return false
}

// Drain kills everything in the group and waits until it is empty,
// sleeping through sleep between rounds (1ms, doubling to 100ms). It
// fails when ctx ends first.
func (g *Group) Drain(ctx context.Context, sleep func(context.Context, time.Duration) error) error {
	wait := time.Millisecond
	for {
		pids, err := g.Procs()
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", g.rel, err)
		}
		if len(pids) == 0 {
			return nil
		}
		if _, err := g.Signal(unix.SIGKILL); err != nil {
			return fmt.Errorf("cgroup %s: %w", g.rel, err)
		}
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("cgroup %s still holds %d processes: %w", g.rel, len(pids), err)
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Remove deletes the group's directories; the group must be empty
// (Drain). A directory already gone is fine. The kernel may hold a
// directory busy for a moment after its last process died; rmdir is
// tried again through sleep (up to about a second).
func (g *Group) Remove(ctx context.Context, sleep func(context.Context, time.Duration) error) error {
	var errs []error
	for _, dir := range g.dirs() {
		err := unix.Rmdir(dir)
		for try := 0; errors.Is(err, unix.EBUSY) && try < 20; try++ {
			if sleep(ctx, 50*time.Millisecond) != nil {
				break
			}
			err = unix.Rmdir(dir)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("cgroup %s: rmdir: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// removeDirs undoes a Create that failed half way.
func (g *Group) removeDirs() {
	for _, dir := range g.dirs() {
		unix.Rmdir(dir)
	}
}

// writeFile writes value to an existing control file.
func writeFile(path, value string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(value)); err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}
