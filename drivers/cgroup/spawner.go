package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Spawner forks children into v1 groups from one OS thread it keeps for
// that, instead of a new thread per fork (Group.Start): the thread joins
// the group ("0" into each hierarchy's tasks file), forks, answers, then
// goes back to its own groups (the daemon's) before it takes the next
// fork. Only the spawner's goroutine ever runs on that thread (it stays
// locked to it), and Go clones no thread from a locked one, so no other
// goroutine, and no other thread of the daemon, ever runs inside a
// workload's group. A new thread cost 0.1 ms at the median and up to 3 ms
// at p90 on the restart path (PERF-1, docs/drivers.md).
//
// Prejoin moves the thread into a group ahead of a fork that is coming
// (the process driver's restart of a run that just ended), so the joins
// happen while the fork is being prepared; Release takes it back home if
// the fork does not come. While it waits in a group the thread is listed
// in its tasks (Procs leaves the daemon out).
//
// The thread starts at the first fork into a v1 group and ends with
// Close. Should it fail to go back to its own groups, it ends (the
// runtime ends a thread whose goroutine exits locked: the kernel takes it
// out of every group) and the next fork starts another. On v2, Start is
// Group.Start: clone3 places the child.
type Spawner struct {
	mu     sync.Mutex
	t      *spawnThread // the running thread; nil when none
	closed bool
}

// spawnThread is the Spawner's thread and its queue. The thread sleeps in
// a read of an eventfd, the queue's doorbell: a write wakes it at once,
// whether or not the Go scheduler has a P to spare at that moment (a
// readied goroutine locked to its thread waits for one).
type spawnThread struct {
	bell  int // eventfd
	mu    sync.Mutex
	queue []spawnOp
	stop  bool
	ended chan struct{} // closed when the thread has ended
}

type opKind int

const (
	opFork opKind = iota
	opPrejoin
	opRelease
)

type spawnOp struct {
	kind opKind
	g    *Group
	fork func() error
	done chan error
}

// NewSpawner returns a Spawner; its thread starts with the first fork.
func NewSpawner() *Spawner { return &Spawner{} }

// Start runs fork, which must create the child with sys, so that the
// child is inside g before its first instruction, as Group.Start does. A
// nil Spawner is Group.Start.
func (s *Spawner) Start(g *Group, sys *syscall.SysProcAttr, fork func() error) error {
	if s == nil || g.h.version == V2 {
		return g.Start(sys, fork)
	}
	t, err := s.thread(true)
	if err != nil {
		return g.Start(sys, fork) // closed, or the thread cannot start: a thread of its own
	}
	op := spawnOp{kind: opFork, g: g, fork: fork, done: make(chan error, 1)}
	if !t.push(op) {
		return g.Start(sys, fork)
	}
	select {
	case err := <-op.done:
		return err
	case <-t.ended:
		select {
		case err := <-op.done: // answered just before it ended
			return err
		default:
			return g.Start(sys, fork)
		}
	}
}

// Prejoin moves the thread into g ahead of a fork into g, if the thread
// runs; it never waits. Every Prejoin is followed by a Start or a Release
// of g.
func (s *Spawner) Prejoin(g *Group) {
	if s == nil || g.h.version == V2 {
		return
	}
	if t, err := s.thread(false); err == nil {
		t.push(spawnOp{kind: opPrejoin, g: g})
	}
}

// Release takes the thread back home if it waits in g for a fork that
// will not come.
func (s *Spawner) Release(g *Group) {
	if s == nil || g.h.version == V2 {
		return
	}
	if t, err := s.thread(false); err == nil {
		t.push(spawnOp{kind: opRelease, g: g})
	}
}

// push queues op and rings; false when the thread is ending.
func (t *spawnThread) push(op spawnOp) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stop {
		return false
	}
	t.queue = append(t.queue, op)
	t.ring()
	return true
}

// ring wakes the thread; t.mu must be held (the eventfd is closed under
// it once stop is set).
func (t *spawnThread) ring() {
	one := [8]byte{1}
	unix.Write(t.bell, one[:])
}

// take waits for the doorbell and returns what is queued; stop when the
// thread is to end.
func (t *spawnThread) take() (ops []spawnOp, stop bool) {
	var b [8]byte
	for {
		_, err := unix.Read(t.bell, b[:])
		if err == nil || !errors.Is(err, unix.EINTR) {
			break
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ops, t.queue = t.queue, nil
	return ops, t.stop
}

// thread returns the running thread, starting one if none runs and start
// is set.
func (s *Spawner) thread(start bool) (*spawnThread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("spawner closed")
	}
	if t := s.t; t != nil {
		select {
		case <-t.ended:
		default:
			return t, nil
		}
	}
	if !start {
		return nil, errors.New("no spawner thread")
	}
	bell, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("cgroup spawner: eventfd: %w", err)
	}
	t := &spawnThread{bell: bell, ended: make(chan struct{})}
	started := make(chan error, 1)
	go t.loop(started)
	if err := <-started; err != nil {
		<-t.ended
		return nil, err
	}
	s.t = t
	return t, nil
}

// Close ends the thread, once a fork under way is done.
func (s *Spawner) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	t := s.t
	s.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	if !t.stop {
		t.stop = true
		t.ring()
	}
	t.mu.Unlock()
	<-t.ended
}

// loop is the spawner's thread.
func (t *spawnThread) loop(started chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread cannot be ended: hand over to another one.
		go t.loop(started)
		runtime.UnlockOSThread()
		return
	}
	// From here the thread is never unlocked: it ends with the goroutine.
	defer func() {
		t.mu.Lock()
		t.stop = true
		unix.Close(t.bell)
		t.mu.Unlock()
		close(t.ended)
	}()
	home, err := ownGroups()
	started <- err
	if err != nil {
		return
	}
	var in *Group // the group the thread waits in; nil: home
	for {
		ops, stop := t.take()
		if stop {
			return
		}
		for _, op := range ops {
			if in, err = step(in, op, home); err != nil {
				return // stuck in a workload's group: end the thread
			}
		}
	}
}

// step does one op; the thread is in group in (nil: home). It returns
// where the thread is, and an error only when it cannot get home.
func step(in *Group, op spawnOp, home map[string]string) (*Group, error) {
	if op.kind == opRelease {
		if in != op.g {
			return in, nil
		}
		return moveTo(in, nil, home)
	}
	var err error
	if in != op.g {
		if in, err = moveTo(in, op.g, home); in != nil && in != op.g {
			return in, err // stuck where it was
		}
	}
	if op.kind == opPrejoin && err == nil {
		return in, nil // waits there for the fork
	}
	if op.kind == opFork {
		if err == nil {
			err = op.fork()
		}
		// The caller runs on, on another thread: going home is off its
		// path.
		op.done <- err
	}
	return moveTo(in, nil, home)
}

// moveTo moves the calling thread from group from (nil: home) into group
// to (nil: home), by way of home. It returns where the thread is: to, or
// home after a join that failed (an error then); a thread that cannot get
// home returns an error with from.
func moveTo(from, to *Group, home map[string]string) (*Group, error) {
	if from != nil {
		if err := goHome(from.h.hs, home); err != nil {
			return from, err
		}
	}
	if to == nil {
		return nil, nil
	}
	if _, err := to.join(); err != nil {
		if herr := goHome(to.h.hs, home); herr != nil {
			return to, herr
		}
		return nil, err
	}
	return to, nil
}

// join moves the calling thread into g in every hierarchy ("0" names the
// writing thread: the kernel then moves just this thread without taking
// the cgroup-wide threadgroup lock, whose writer waits for an RCU grace
// period, milliseconds on a busy machine, where writing the tid would
// take it). It returns the hierarchies joined, also on failure.
func (g *Group) join() ([]hierarchy, error) {
	var joined []hierarchy
	for _, hy := range g.h.hs {
		if err := writeFile(filepath.Join(hy.mount, g.rel, "tasks"), "0"); err != nil {
			return joined, fmt.Errorf("cgroup %s: joining the group to start in it: %w", g.rel, err)
		}
		joined = append(joined, hy)
	}
	return joined, nil
}

// goHome moves the calling thread back to its own group (home, by
// /proc/PID/cgroup key) in each hierarchy of hs.
func goHome(hs []hierarchy, home map[string]string) error {
	for _, hy := range hs {
		p, ok := home[hy.procsKey]
		if !ok {
			return fmt.Errorf("cgroup: the spawner's own %s group is unknown", hy.procsKey)
		}
		if err := writeFile(filepath.Join(hy.mount, p, "tasks"), "0"); err != nil {
			return err
		}
	}
	return nil
}

// ownGroups reads the calling thread's v1 groups: key → path, as
// /proc/thread-self/cgroup lists them ("ID:KEY:PATH").
func ownGroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup: the spawner's own groups: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		_, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, p, ok := strings.Cut(rest, ":")
		if ok && key != "" {
			out[key] = p
		}
	}
	return out, nil
}
