package cgroup

import (
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start runs fork, which must create the child with sys (syscall.ForkExec
// with this SysProcAttr), so that the child is inside the group before it
// runs its first instruction: its first page and its first fork are
// already charged to the group's memory and pids limits.
//
//   - v2: clone3 with CLONE_INTO_CGROUP (sys.UseCgroupFD, Linux 5.7).
//   - v1: a process can only be moved after it exists, and Go gives no
//     hook between fork and exec. A new process starts in the groups of
//     the thread that forked it, so fork runs on an OS thread of its own
//     that first joined the group in every hierarchy ("0", itself,
//     written to each "tasks" file). That thread is never given back to the Go
//     scheduler: its goroutine ends locked, and the runtime ends the
//     thread, so no other goroutine ever runs inside a workload's group.
//     Go never clones a new thread from a locked one (it asks its
//     template thread), so the daemon's other threads stay where they are.
//     The main thread cannot be ended; should the goroutine land on it, it
//     forks from another.
func (g *Group) Start(sys *syscall.SysProcAttr, fork func() error) error {
	if g.h.version == V2 {
		fd, err := unix.Open(g.primary().mount+"/"+g.rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", g.rel, err)
		}
		defer unix.Close(fd)
		sys.UseCgroupFD, sys.CgroupFD = true, fd
		return fork()
	}
	done := make(chan error, 1)
	go g.forkInside(fork, done)
	return <-done
}

// forkInside runs on a thread of its own: see Start.
func (g *Group) forkInside(fork func() error, done chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread: hand the work to another one and keep this.
		go g.forkInside(fork, done)
		runtime.UnlockOSThread()
		return
	}
	// From here the thread is never unlocked: it ends with the goroutine.
	if _, err := g.join(); err != nil {
		done <- err
		return
	}
	done <- fork()
}
