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
	ops    chan spawnOp
	ended  chan struct{} // closed when the current thread has ended
	stop   chan struct{}
	closed bool
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
func NewSpawner() *Spawner { return &Spawner{stop: make(chan struct{})} }

// Start runs fork, which must create the child with sys, so that the
// child is inside g before its first instruction, as Group.Start does. A
// nil Spawner is Group.Start.
func (s *Spawner) Start(g *Group, sys *syscall.SysProcAttr, fork func() error) error {
	if s == nil || g.h.version == V2 {
		return g.Start(sys, fork)
	}
	ops, ended, err := s.thread(true)
	if err != nil {
		return g.Start(sys, fork) // closed, or the thread cannot start: a thread of its own
	}
	op := spawnOp{kind: opFork, g: g, fork: fork, done: make(chan error, 1)}
	select {
	case ops <- op:
		return <-op.done
	case <-ended:
		return g.Start(sys, fork)
	}
}

// Prejoin moves the thread into g ahead of a fork into g, if the thread
// runs and is free to take it now; it never waits. Every Prejoin is
// followed by a Start or a Release of g.
func (s *Spawner) Prejoin(g *Group) {
	if s == nil || g.h.version == V2 {
		return
	}
	ops, _, err := s.thread(false)
	if err != nil {
		return
	}
	select {
	case ops <- spawnOp{kind: opPrejoin, g: g}:
	default:
	}
}

// Release takes the thread back home if it waits in g for a fork that
// will not come.
func (s *Spawner) Release(g *Group) {
	if s == nil || g.h.version == V2 {
		return
	}
	ops, ended, err := s.thread(false)
	if err != nil {
		return
	}
	select {
	case ops <- spawnOp{kind: opRelease, g: g}:
	case <-ended:
	}
}

// thread returns the running thread's queue, starting one if none runs
// and start is set.
func (s *Spawner) thread(start bool) (chan spawnOp, chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, errors.New("spawner closed")
	}
	if s.ops != nil {
		select {
		case <-s.ended:
		default:
			return s.ops, s.ended, nil
		}
	}
	if !start {
		return nil, nil, errors.New("no spawner thread")
	}
	ops, ended, started := make(chan spawnOp, 16), make(chan struct{}), make(chan error, 1)
	go s.loop(ops, ended, started)
	if err := <-started; err != nil {
		<-ended
		return nil, nil, err
	}
	s.ops, s.ended = ops, ended
	return ops, ended, nil
}

// Close ends the thread, once a fork under way is done.
func (s *Spawner) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	ended := s.ended
	s.mu.Unlock()
	if ended != nil {
		<-ended
	}
}

// loop is the spawner's thread.
func (s *Spawner) loop(ops chan spawnOp, ended chan struct{}, started chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread cannot be ended: hand over to another one.
		go s.loop(ops, ended, started)
		runtime.UnlockOSThread()
		return
	}
	// From here the thread is never unlocked: it ends with the goroutine.
	defer close(ended)
	home, err := ownGroups()
	started <- err
	if err != nil {
		return
	}
	var in *Group // the group the thread waits in; nil: home
	for {
		select {
		case <-s.stop:
			return
		case op := <-ops:
			var err error
			if op.kind != opRelease && in != op.g {
				in, err = moveTo(in, op.g, home)
			}
			switch op.kind {
			case opFork:
				if err == nil {
					err = op.fork()
				}
				// The caller runs on, on another thread (the runtime hands
				// it to an idle one): going home is off its path.
				op.done <- err
			case opRelease:
				if in != op.g {
					continue
				}
			}
			if err != nil || op.kind != opPrejoin {
				if in, err = moveTo(in, nil, home); err != nil {
					return // stuck in a workload's group: end the thread
				}
			}
		}
	}
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
