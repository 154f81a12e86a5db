package process

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers/cgroup"
)

// The reaper is the one place in the process that spawns, signals and reaps
// the driver's children. It is shared by every Driver in the process (tests
// open several) and runs while at least one Driver is open.
//
// Exits are seen through pidfds in one epoll set, watched by one goroutine:
// a pidfd turns readable the moment its process exits, for our children and
// for adopted processes alike (DRV-3, DRV-4). Children are reaped with
// wait4(pid) only after their exit is seen and under r.mu, so a pid is never
// reused while the reaper may still signal it. In subreaper mode a second
// goroutine also answers SIGCHLD with wait4(-1) so orphans reparented to us
// are reaped; that is why every child of the daemon must come from here.

// exitStatus is how a watched process ended.
type exitStatus struct {
	code   int    // exit code, -1 when signalled or unknown
	signal string // "killed", "terminated", ... ; empty when it exited
	// leftovers: the run's cgroup still held processes; they were sent
	// SIGKILL.
	leftovers bool
	// prejoined: the spawner thread was sent into the run's cgroup for a
	// restart at once (restart.go); whoever does not restart sends it
	// back.
	prejoined bool
}

var unknownExit = exitStatus{code: -1}

func statusOf(ws unix.WaitStatus) exitStatus {
	switch {
	case ws.Exited():
		return exitStatus{code: ws.ExitStatus()}
	case ws.Signaled():
		return exitStatus{code: -1, signal: ws.Signal().String()}
	}
	return unknownExit
}

// proc is one watched process.
type proc struct {
	pid   int
	pidfd int
	// child: we spawned it and reap it; otherwise adopted (not our child),
	// and only its exit is seen, not its status.
	child bool
	// onExit runs in the reaper goroutine once, after the process is gone.
	// nil once its driver closed; a child is then still reaped.
	onExit func(exitStatus)
	// cg is the run's cgroup, emptied when its main process ends
	// (DRV-15); nil for probes and runs without one.
	cg *cgroup.Group
	// restartArmed: a watch authorized a restart at once of this run
	// (restart.go), so the spawner thread joins cg as soon as the exit is
	// seen, while the exit is handled and the start prepared.
	restartArmed atomic.Bool
}

type reaper struct {
	spawnMu sync.Mutex // held across a fork; taken before mu
	mu      sync.Mutex
	refs    int
	epfd    int
	wakefd  int // eventfd: wakes the loop to stop
	byFd    map[int]*proc
	byPid   map[int]*proc // children only
	loopEnd chan struct{}
	sigch   chan os.Signal // SIGCHLD, in subreaper mode
	sigEnd  chan struct{}
	subreap bool
	// forker forks into v1 cgroups from one thread kept for it, while
	// the reaper runs (cgroup.Spawner).
	forker *cgroup.Spawner
}

// theReaper is the process-wide reaper; its maps outlive a stop so children
// left running by a closed Driver are reaped once a reaper runs again.
var theReaper = &reaper{epfd: -1, wakefd: -1, byFd: make(map[int]*proc), byPid: make(map[int]*proc)}

// acquire starts the reaper for one more Driver.
func (r *reaper) acquire() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refs > 0 {
		r.refs++
		return nil
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return fmt.Errorf("eventfd: %w", err)
	}
	if err := epollAdd(epfd, wakefd); err != nil {
		unix.Close(epfd)
		unix.Close(wakefd)
		return err
	}
	for fd := range r.byFd {
		if err := epollAdd(epfd, fd); err != nil {
			unix.Close(epfd)
			unix.Close(wakefd)
			return err
		}
	}
	r.epfd, r.wakefd, r.refs = epfd, wakefd, 1
	r.forker = cgroup.NewSpawner()
	r.loopEnd = make(chan struct{})
	go r.loop(epfd, wakefd, r.loopEnd)
	if r.subreap {
		r.startSweepLocked()
	}
	return nil
}

// release stops the reaper when the last Driver is done with it.
func (r *reaper) release() {
	r.mu.Lock()
	r.refs--
	if r.refs > 0 {
		r.mu.Unlock()
		return
	}
	loopEnd, sigEnd := r.loopEnd, r.sigEnd
	var one [8]byte
	one[0] = 1
	unix.Write(r.wakefd, one[:])
	if r.sigch != nil {
		signal.Stop(r.sigch)
		close(r.sigch)
		r.sigch, r.sigEnd = nil, nil
	}
	// Adopted processes nobody watches any more are dropped; children stay
	// registered so the next reaper reaps them.
	for fd, p := range r.byFd {
		if !p.child {
			delete(r.byFd, fd)
			unix.Close(fd)
		}
	}
	forker := r.forker
	r.mu.Unlock()
	<-loopEnd
	if sigEnd != nil {
		<-sigEnd
	}
	forker.Close()
	r.mu.Lock()
	unix.Close(r.epfd)
	unix.Close(r.wakefd)
	r.epfd, r.wakefd = -1, -1
	r.mu.Unlock()
}

func epollAdd(epfd, fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add %d: %w", fd, err)
	}
	return nil
}

// loop waits for pidfds to turn readable and finishes their processes.
func (r *reaper) loop(epfd, wakefd int, end chan struct{}) {
	defer close(end)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return // epfd closed under us: only at shutdown
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == wakefd {
				return
			}
			r.finishFd(fd)
		}
		// Let what the exits made runnable (a restart, the watches' hand
		// off) run now: epoll_wait is a blocking syscall that keeps this
		// goroutine's P until the runtime's monitor takes it back, up to
		// milliseconds later, and the goroutines readied here wait on it.
		runtime.Gosched()
	}
}

// finishFd handles the exit of the process behind pidfd fd.
func (r *reaper) finishFd(fd int) {
	r.mu.Lock()
	p, ok := r.byFd[fd]
	// An event can be stale: its pidfd was closed (the sweep reaped the
	// child, or an adopted watch was dropped) and the number reused by a
	// new pidfd in the meantime. Only a pidfd that is readable now means an
	// exit.
	if !ok || !exited(fd) {
		r.mu.Unlock()
		return
	}
	prejoined := p.restartArmed.Load() && r.prejoinLocked(p.cg)
	status := unknownExit
	if p.child {
		status = r.reapLocked(p)
	} else {
		// An adopted run's leader is reaped by whoever inherited it, not
		// by us; what is left of its group is killed as for a child.
		signalPgrp(p.pidfd, p.pid, unix.SIGKILL)
		status.leftovers = emptyGroup(p)
	}
	status.prejoined = prejoined
	r.forgetLocked(p)
	onExit := p.onExit
	r.mu.Unlock()
	if onExit != nil {
		onExit(status)
	} else if prejoined {
		r.unjoin(p.cg)
	}
}

// reapLocked ends a child that has exited: what is left of its process
// group is killed first (while the zombie still holds the pgid, so the
// signal cannot reach a stranger), then the zombie is reaped.
func (r *reaper) reapLocked(p *proc) exitStatus {
	signalPgrp(p.pidfd, p.pid, unix.SIGKILL)
	leftovers := emptyGroup(p)
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(p.pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return exitStatus{code: -1, leftovers: leftovers} // reaped elsewhere: a broken spawning rule
		}
		st := statusOf(ws)
		st.leftovers = leftovers
		return st
	}
}

// emptyGroup sends SIGKILL to whatever is left in the run's cgroup, also
// processes that left its process group: one read of cgroup.procs when
// nothing is (DRV-15). It reports whether something was.
func emptyGroup(p *proc) bool {
	if p.cg == nil {
		return false
	}
	n, _ := p.cg.Signal(unix.SIGKILL)
	return n > 0
}

// forgetLocked drops p from the maps and closes its pidfd.
func (r *reaper) forgetLocked(p *proc) {
	delete(r.byFd, p.pidfd)
	if p.child {
		delete(r.byPid, p.pid)
	}
	if r.epfd >= 0 && r.refs > 0 {
		unix.EpollCtl(r.epfd, unix.EPOLL_CTL_DEL, p.pidfd, nil)
	}
	unix.Close(p.pidfd)
}

// spawned is a started child.
type spawned struct {
	proc      *proc
	procStart uint64 // /proc/PID/stat starttime, in clock ticks
}

// spawn starts argv0 as a child and watches it. onExit runs once, in the
// reaper goroutine, when it has ended and been reaped. The start time is
// read before the child is watched, so it is its own even if it has
// already exited (nobody can reap it before it is registered).
//
// spawnMu, not r.mu, is held across the fork, so exits keep being handled
// while a child starts; only the subreaper sweep, whose wait4(-1) could
// otherwise reap a child before it is registered, waits for it.
//
// With a cgroup in, the child is placed in it before its first
// instruction (cgroup.Group.Start); run says it is the cgroup's run, whose
// end empties the cgroup.
func (r *reaper) spawn(argv0 string, argv []string, attr *syscall.ProcAttr, in *cgroup.Group, run bool, onExit func(exitStatus)) (spawned, error) {
	pidfd := -1
	sys := *attr.Sys
	sys.PidFD = &pidfd
	a := *attr
	a.Sys = &sys

	r.spawnMu.Lock()
	defer r.spawnMu.Unlock()
	r.mu.Lock()
	forker := r.forker
	r.mu.Unlock()
	var pid int
	fork := func() (err error) {
		pid, err = syscall.ForkExec(argv0, argv, &a)
		return err
	}
	var err error
	if in != nil {
		err = forker.Start(in, &sys, fork)
	} else {
		err = fork()
	}
	if err != nil {
		return spawned{}, err
	}
	abandon := func(err error) (spawned, error) {
		unix.Kill(-pid, unix.SIGKILL)
		unix.Wait4(pid, nil, 0, nil)
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		return spawned{}, err
	}
	if pidfd < 0 { // kernel without CLONE_PIDFD: the zombie keeps pid ours
		if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
			pidfd = -1
			return abandon(fmt.Errorf("pidfd_open %d: %w", pid, err))
		}
	}
	start, err := procStartTime(pid)
	if err != nil {
		// Out of file descriptors (EMFILE): the run is recorded without
		// its start time, and the next daemon tells it by its run token
		// (Driver.recordedStart). Failing the start would be worse.
		start = 0
	}
	p := &proc{pid: pid, pidfd: pidfd, child: true, onExit: onExit}
	if run {
		p.cg = in
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refs == 0 {
		return abandon(errClosed)
	}
	if err := epollAdd(r.epfd, pidfd); err != nil {
		return abandon(err)
	}
	r.byFd[pidfd] = p
	r.byPid[pid] = p
	return spawned{proc: p, procStart: start}, nil
}

var errClosed = errors.New("driver closed")

// adopt watches a process that is not our child: pid, if its start time
// is procStart. It reports false when pid is gone or is someone else.
func (r *reaper) adopt(pid int, procStart uint64, cg *cgroup.Group, onExit func(exitStatus)) (*proc, bool, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	// The pidfd pins the process it was opened on; checking the start time
	// after opening it proves that process is the instance.
	start, err := procStartTime(pid)
	if err != nil || start != procStart || exited(pidfd) {
		unix.Close(pidfd)
		return nil, false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refs == 0 {
		unix.Close(pidfd)
		return nil, false, errClosed
	}
	p := &proc{pid: pid, pidfd: pidfd, onExit: onExit, cg: cg}
	if err := epollAdd(r.epfd, pidfd); err != nil {
		unix.Close(pidfd)
		return nil, false, err
	}
	r.byFd[pidfd] = p
	return p, true, nil
}

// exited reports whether the process behind pidfd has ended.
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// signalGroup sends sig to p's process group and to p itself, unless p has
// already been seen to end. It reports whether p was still watched.
func (r *reaper) signalGroup(p *proc, sig unix.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byFd[p.pidfd] != p {
		return false
	}
	signalPgrp(p.pidfd, p.pid, sig)
	unix.PidfdSendSignal(p.pidfd, sig, nil, 0) // should p have left its group
	return true
}

// pidfdSignalProcessGroup is PIDFD_SIGNAL_PROCESS_GROUP (linux/pidfd.h,
// Linux 6.9): pidfd_send_signal then signals the process group that the
// pidfd's process created, i.e. a pidfd on the group's leader. The group
// is named by the leader, which the pidfd pins, not by a number, so the
// signal reaches the run's own group even after its leader died and was
// reaped by someone else, and never a later group that reused the number.
const pidfdSignalProcessGroup = 1 << 2

// groupByNumber is set once the kernel refuses pidfdSignalProcessGroup.
var groupByNumber atomic.Bool

// signalPgrp sends sig to every process of process group pgid, named
// through pidfd, a pidfd on its leader (pid pgid) kept open for the whole
// call (the reaper holds r.mu, so a child is not reaped meanwhile).
//
// Before Linux 6.9 the group can only be named by number. The number is
// the group's while its leader is unreaped or any member lives; it could
// name a stranger's group only if every member died and the kernel handed
// the number out again (a full wrap of the pid space) between the
// leader's exit, seen at once by pidfd, and this call.
func signalPgrp(pidfd, pgid int, sig unix.Signal) {
	if !groupByNumber.Load() {
		err := unix.PidfdSendSignal(pidfd, sig, nil, pidfdSignalProcessGroup)
		if !errors.Is(err, unix.EINVAL) {
			return // sent, or ESRCH: the group is empty
		}
		groupByNumber.Store(true)
	}
	unix.Kill(-pgid, sig)
}

// detach stops reporting p's exit (its Driver is closing). A child is still
// reaped when it ends; an adopted process is simply no longer watched.
func (r *reaper) detach(p *proc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byFd[p.pidfd] != p {
		return
	}
	p.onExit = nil
	if !p.child {
		r.forgetLocked(p)
	}
}

// BecomeSubreaper makes this process the child subreaper
// (prctl PR_SET_CHILD_SUBREAPER), so orphaned grandchildren of workloads are
// reparented to it, and makes the reaper reap them on SIGCHLD (DRV-3). The
// daemon calls it once at start. From then on every child of the process
// must be spawned by a process Driver: a child started any other way (e.g.
// os/exec) may be reaped here and its Wait would fail.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_CHILD_SUBREAPER: %w", err)
	}
	r := theReaper
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.subreap {
		r.subreap = true
		if r.refs > 0 {
			r.startSweepLocked()
		}
	}
	return nil
}

// startSweepLocked starts the SIGCHLD goroutine; r.mu must be held.
func (r *reaper) startSweepLocked() {
	r.sigch = make(chan os.Signal, 1)
	r.sigEnd = make(chan struct{})
	signal.Notify(r.sigch, unix.SIGCHLD)
	go r.sweepLoop(r.sigch, r.sigEnd)
	r.sigch <- unix.SIGCHLD // orphans may already be waiting
}

func (r *reaper) sweepLoop(sigch chan os.Signal, end chan struct{}) {
	defer close(end)
	for range sigch {
		r.sweep()
	}
}

// sweep reaps every child that has exited: orphans silently, our own
// children as finishFd would (their pidfd event then finds nothing).
func (r *reaper) sweep() {
	r.spawnMu.Lock()
	defer r.spawnMu.Unlock()
	for {
		r.mu.Lock()
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			r.mu.Unlock()
			continue
		}
		if err != nil || pid <= 0 {
			r.mu.Unlock()
			return
		}
		p := r.byPid[pid]
		if p == nil {
			r.mu.Unlock()
			continue // an orphan: reaped, nothing to report
		}
		signalPgrp(p.pidfd, p.pid, unix.SIGKILL) // the rest of its group
		st := statusOf(ws)
		st.leftovers = emptyGroup(p)
		r.forgetLocked(p)
		onExit := p.onExit
		r.mu.Unlock()
		if onExit != nil {
			onExit(st)
		}
	}
}
