package process

import (
	"context"
	"errors"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/cgroup"
)

// A restart at once (drivers.RestartWatcher, PERF-1). The supervisor
// authorizes one restart of the current run ahead, through its watch,
// when its policy would restart the next failure at once anyway. When
// the run ends, the next one is started from the exit handling itself:
// the spawner thread joins the instance's cgroup (v1) while a goroutine
// prepares the start, and the supervisor hears of it afterwards, with
// the exit, to keep its accounting. Nothing else is skipped: the launch
// is announced on disk before the spawn (launch.go), the run is recorded
// before the watches are told, and what the last run left is killed
// first, as for any start.

// restartAuth is a restart authorized by the watch with id watch.
type restartAuth struct {
	watch  uint64
	policy drivers.RestartPolicy
}

// WatchRestart is Watch that also authorizes one restart at once of the
// current run (drivers.RestartWatcher). Stop, Kill and the returned stop
// func withdraw it.
func (d *Driver) WatchRestart(name string, p drivers.RestartPolicy, fn func(drivers.Exit)) (func(), error) {
	return d.watch(name, fn, &p)
}

var _ drivers.RestartWatcher = (*Driver)(nil)

// disarmRestart withdraws a restart authorized for the current run, or
// under way for the last one; in.mu must be held.
func (in *instance) disarmRestart() {
	in.restart, in.pendingRestart = nil, 0
	if in.proc != nil {
		in.proc.restartArmed.Store(false)
	}
}

// errNotRestarted: the instance was stopped, started or deleted between
// its run's end and the restart.
var errNotRestarted = errors.New("no longer to be restarted")

// restartAtOnce hands the end of run to a restart when a watch
// authorized one and the exit qualifies; it then owns the rest of the
// exit handling, in.mu (held on entry) is released and it reports true.
func (d *Driver) restartAtOnce(in *instance, run uint64, st exitStatus, exit drivers.Exit, ws []*drivers.OnceWatch) bool {
	auth := in.restart
	in.restart = nil
	if auth == nil || auth.policy.OnFailureOnly && !exit.Failed() || in.secretsLost != nil {
		if st.prejoined {
			d.r.unjoin(in.cg) // no fork follows
		}
		return false
	}
	in.pendingRestart = run
	in.mu.Unlock()
	go d.restartAfter(in, run, st, exit, ws)
	return true
}

// restartAfter starts in's next run after run ended, then tells the
// watches of the ended run, their Exit saying whether it restarted. The
// exit's OOM reason is read after the spawn: off the restart's path.
func (d *Driver) restartAfter(in *instance, run uint64, st exitStatus, exit drivers.Exit, ws []*drivers.OnceWatch) {
	defer d.bg.Done()
	in.mu.Lock()
	err := errNotRestarted
	if in.pendingRestart == run && in.proc == nil && !in.deleted && !d.isClosed() {
		_, err = d.startLocked(context.Background(), in)
	}
	in.pendingRestart = 0
	cg := in.cg
	exit.Reason = d.oomReason(in, st)
	exit.Restarted = err == nil
	if in.proc == nil {
		in.lastExit, in.rec.Reason = exit, exit.Reason
	}
	var snap record
	var v uint64
	if in.proc == nil || exit.Reason != "" {
		// The exit, when no run follows; the OOM count, when it grew.
		snap, v = in.snapshot()
	}
	in.mu.Unlock()
	if err != nil {
		d.r.unjoin(cg)
		if !errors.Is(err, errNotRestarted) {
			d.log.Warn().Err(err).Str("instance", in.name).Msg("the restart at once failed; the supervisor starts it again")
		}
	}
	if v > 0 {
		if perr := in.persist(snap, v); perr != nil {
			d.log.Error().Err(perr).Str("instance", in.name).Msg("cannot record the exit")
		}
	}
	fireAll(ws, exit)
	d.log.Debug().Str("instance", in.name).Int("exit_code", st.code).Str("signal", st.signal).Bool("restarted", exit.Restarted).Msg("instance exited")
}

func (d *Driver) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// prejoinLocked moves the spawner thread into g ahead of the fork a
// restart is about to make (cgroup.Spawner.Prejoin); it never waits.
// r.mu must be held.
func (r *reaper) prejoinLocked(g *cgroup.Group) bool {
	if g == nil {
		return false
	}
	r.forker.Prejoin(g)
	return true
}

// unjoin takes the spawner thread out of g when the fork did not come.
func (r *reaper) unjoin(g *cgroup.Group) {
	if g == nil {
		return
	}
	r.mu.Lock()
	forker := r.forker
	r.mu.Unlock()
	forker.Release(g)
}
