package replica

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"runtime"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Env is what a replica actor uses of the node.
type Env struct {
	Driver drivers.Driver
	Prober *probe.Prober
	Events supervise.Emitter
	Board  *supervise.Board
	// StepTimeout bounds every driver call (SVC-11).
	StepTimeout time.Duration
	// OutputLines is how much of a failed run's output is kept (SVC-21).
	OutputLines int
}

// Params say which instance the actor owns and how.
type Params struct {
	Stack, Service string
	Slot           int
	ID             string
	Revision       string
	Deployment     string
	// Instance is the instance's name; Spec renders its driver spec
	// (called for each create, from any goroutine).
	Instance string
	Spec     func() drivers.Spec
	Config   *Config // shared by the replicas of one revision, read only
	// Ledger carries the slot's backoff history across actor restarts.
	Ledger    messages.Ledger
	HasLedger bool
	// Adopt is the observed instance when adopting one found running.
	Adopt *drivers.Status
	// Existing says the instance exists but its state is unknown: the actor
	// inspects before anything else (an actor restart, SUP-9).
	Existing bool
	Intent   messages.Intent
}

// Actor is the replica actor.
type Actor struct {
	h   *supervise.Handle
	env Env
	// p is read only: the service keeps one Params a replica and hands
	// every incarnation the same (PERF-3: a copy in each actor was 712
	// bytes a replica). cfg is what the actor steps with: p's Config, or
	// a copy of it when the actor must adjust it to its driver (the
	// service sets it right, so that copy is for other callers).
	p       *Params
	cfg     *Config
	s       State
	ctx     stopCtx // of its driver calls and probes
	timers  *supervise.Timers
	unwatch func()
	output  string
	// sent is what the service acts on of the last status sent to it
	// (PERF-3: the whole status was 400 bytes a replica).
	sent    decision
	hasSent bool
	// shown is what the board has of the replica, so a report that
	// changes nothing publishes nothing.
	shown   messages.ReplicaStatus
	onBoard bool
}

// Produce returns the producer of a replica actor for p, which the actor
// reads and never changes.
func Produce(env Env, p *Params) supervise.Producer {
	return func(h *supervise.Handle) actor.Receiver {
		return &Actor{h: h, env: env, p: p, cfg: p.Config, timers: supervise.NewTimers(h)}
	}
}

func (a *Actor) Receive(c *actor.Context) {
	supervise.GrowStack() // grows it once a burst, before receive's frames (PERF-3)
	a.receive(c)
}

func (a *Actor) receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		if _, ok := a.env.Driver.(drivers.RestartWatcher); ok && !a.cfg.Policy.DriverRestarts {
			c := *a.cfg
			c.Policy.DriverRestarts = true // PERF-1
			a.cfg = &c
		}
		a.s = State{Intent: a.p.Intent, Entry: a.p.Ledger, HasEntry: a.p.HasLedger}
		a.begin()
	case actor.Stopped:
		a.stop()
	case messages.Timer:
		if a.timers.Fresh(m) {
			a.step(m)
		}
	case messages.ReplicaOutput:
		a.output = m.Output
		a.report()
	case messages.ReplicaOpDone, messages.ReplicaExited, messages.ReplicaProbed, messages.ReplicaCommand, messages.ReplicaRetry,
		messages.ReplicaWithdrawn, messages.ReplicaSweep:
		a.step(m)
	case watchLost:
		a.step(WatchLost{})
	}
}

func (a *Actor) begin() {
	if a.p.Existing {
		a.s.Created, a.s.Phase, a.s.Op = true, PhaseAdopting, OpInspect
		if a.s.Intent == "" {
			a.s.Intent = messages.IntentRun
		}
		a.perform([]step.Effect{DoOp{Op: OpInspect}})
		a.report()
		return
	}
	a.step(Begin{Adopt: a.p.Adopt})
}

// step folds e into the actor's state in place (Step's own work, without
// copying the state in and out), then performs the effects.
func (a *Actor) step(e Event) {
	fx := apply(a.cfg, &a.s, e, a.h.Clock().Now())
	a.perform(fx)
	a.report()
}

// stop ends the actor's goroutines, timers and watch. The workload is
// not touched: an actor stop is not a workload stop (SUP-9).
func (a *Actor) stop() {
	a.ctx.stop()
	a.timers.Stop()
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
	// A replica that ends with its service (a panic, a restart) stays on
	// the board: the restarted service adopts its instance and a new actor
	// shows it again. One whose instance was never created has nothing to
	// adopt: left there, it would show its slot twice, "creating" forever.
	if a.s.Done || !a.s.Created {
		a.env.Board.DeleteReplica(a.p.Stack, a.p.Service, a.p.ID)
	}
}

// perform runs the core's effects: timers, events and the end through
// supervise.Apply, the replica's own here.
func (a *Actor) perform(fx []step.Effect) {
	supervise.Apply(a.h, supervise.Shell{
		Timers: a.timers,
		Events: a.env.Events,
		Event:  messages.Event{Stack: a.p.Stack, Service: a.p.Service, Instance: a.p.Instance},
		Own:    a.own,
	}, fx)
}

func (a *Actor) own(f step.Effect) {
	switch f := f.(type) {
	case DoOp:
		a.doOp(f.Op, f.Grace)
	case DoProbe:
		a.doProbe()
	case StartWatch:
		a.watch(f.Restart)
	case FetchOutput:
		a.fetchOutput()
	}
}

// doOp runs one driver call in a goroutine bounded by the step timeout
// (SUP-4, SVC-11) and reports back as a message. A driver that does not
// answer within the bound, even one that ignores its context, is reported
// as a transient failure, so the replica's step is never held longer.
func (a *Actor) doOp(op Op, grace time.Duration) {
	drv, name, specOf, self, eng := a.env.Driver, a.p.Instance, a.p.Spec, a.h.PID(), a.h.Engine()
	clk, bound, h, actx := a.h.Clock(), a.env.StepTimeout, a.h, context.Context(&a.ctx)
	ctx, cancel := clock.WithTimeout(clk, actx, bound)
	supervise.BoundedThen(ctx, clk, func(ctx context.Context) messages.ReplicaOpDone {
		res := messages.ReplicaOpDone{Op: op}
		switch op {
		case OpCreate:
			res.Err = drv.Create(ctx, specOf())
		case OpStart:
			res.Err = drv.Start(ctx, name)
		case OpStop:
			res.Err = drv.Stop(ctx, name, grace)
		case OpDelete:
			res.Err = drv.Delete(ctx, name)
		case OpInspect:
			res.Status, res.Err = drv.Inspect(ctx, name)
		}
		return res
	}, func(res messages.ReplicaOpDone, answered bool) {
		defer cancel()
		if !answered {
			h.Log().Warn().Str("op", string(op)).Dur("bound", bound).Msg("driver call ignored its deadline; abandoned")
			res = messages.ReplicaOpDone{Op: op, Err: drivers.Errorf(drv.Name(), string(op), name, drivers.ErrTransient,
				"no answer within the step bound (%s); the call was abandoned", bound)}
		} else if res.Err != nil && ctx.Err() != nil && actx.Err() == nil {
			res.Err = drivers.Wrap(drv.Name(), string(op), name, drivers.ErrTransient, context.Cause(ctx))
		}
		eng.Send(self, res)
	})
	if op == OpStart {
		// A start is a restart waiting (PERF-1): let its goroutine run now,
		// before the status report below readies the service's.
		runtime.Gosched()
	}
}

func (a *Actor) doProbe() {
	prober, cfg, self, eng := a.env.Prober, a.cfg.Probe, a.h.PID(), a.h.Engine()
	target := probe.Target{Instance: a.p.Instance, Addresses: a.s.Addresses}
	ctx := context.Context(&a.ctx)
	go func() {
		r := prober.Probe(ctx, cfg, target)
		eng.Send(self, messages.ReplicaProbed{Result: r})
	}()
}

// watch (re)arms the driver's watch of the instance's run; restart
// authorizes the driver to restart the run at once when it fails
// (drivers.RestartWatcher, PERF-1).
func (a *Actor) watch(restart bool) {
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
	self, eng := a.h.PID(), a.h.Engine()
	fn := func(e drivers.Exit) { eng.Send(self, messages.ReplicaExited{Exit: e}) }
	var stop func()
	var err error
	if rw, ok := a.env.Driver.(drivers.RestartWatcher); ok && restart {
		p := drivers.RestartPolicy{OnFailureOnly: a.cfg.Policy.Condition == "on-failure"}
		stop, err = rw.WatchRestart(a.p.Instance, p, fn)
	} else {
		stop, err = a.env.Driver.Watch(a.p.Instance, fn)
	}
	if err == nil {
		a.unwatch = stop
		return
	}
	if restart {
		eng.Send(self, watchLost{})
	}
	if !errors.Is(err, drivers.ErrUnsupported) {
		a.h.Log().Warn().Err(err).Msg("watch failed; relying on inspection")
	}
}

// watchLost tells the core a restart watch could not be armed.
type watchLost struct{}

func (a *Actor) fetchOutput() {
	drv, name, self, eng, lines := a.env.Driver, a.p.Instance, a.h.PID(), a.h.Engine(), a.env.OutputLines
	ctx, cancel := clock.WithTimeout(a.h.Clock(), &a.ctx, a.env.StepTimeout)
	go func() {
		defer cancel()
		rc, err := drv.Logs(ctx, name, drivers.LogOptions{Tail: lines})
		if err != nil {
			return
		}
		defer rc.Close()
		b, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
		eng.Send(self, messages.ReplicaOutput{Output: string(bytes.TrimSpace(b))})
	}()
}

// report publishes the snapshot, and tells the service when anything it
// decides on has changed.
func (a *Actor) report() {
	r := a.snapshot()
	if !a.onBoard || !same(&a.shown, &r) {
		r.Addresses = maps.Clone(r.Addresses) // the board's and the service's own copy
		a.env.Board.PutReplica(r)
		a.shown, a.onBoard = r, true
	} else {
		r.Addresses = a.shown.Addresses
	}
	a.h.SetState(string(r.Phase), r.Health)
	d := decisionOf(&r)
	if a.hasSent && d == a.sent {
		return
	}
	a.sent, a.hasSent = d, true
	a.h.Engine().Send(a.h.Parent(), r)
}

// snapshot is the replica's status; its Addresses are the state's own
// map (report copies it before it leaves the actor).
func (a *Actor) snapshot() messages.ReplicaStatus {
	s := &a.s
	r := messages.ReplicaStatus{
		Stack: a.p.Stack, Service: a.p.Service, Slot: a.p.Slot, ID: a.p.ID, Instance: a.p.Instance,
		Revision: a.p.Revision, Deployment: a.p.Deployment, Phase: string(s.Phase), Health: string(s.Health.Status),
		InRotation: s.InRotation, Addresses: s.Addresses, CreatedAt: s.CreatedAt, StartedAt: s.StartedAt,
		ServingSince: s.ServingSince, Restarts: s.Restarts, LastProbe: s.Health.Last.Output, LastError: s.LastError,
		FailureOutput: a.output, Ledger: s.Entry, HasLedger: s.HasEntry, Replace: s.Replace, Final: s.Done,
		Withdraw: s.Withdraw, Refused: s.Refused, RetireError: s.RetireError,
	}
	if r.Health == "" {
		r.Health = string(probe.StatusNone)
	}
	return r
}

// same reports whether a and b show the same: every field the board has.
func same(a, b *messages.ReplicaStatus) bool {
	return !changed(a, b) && a.Slot == b.Slot && a.Instance == b.Instance && a.Revision == b.Revision &&
		a.Deployment == b.Deployment && maps.Equal(a.Addresses, b.Addresses) && a.CreatedAt.Equal(b.CreatedAt) &&
		a.ServingSince.Equal(b.ServingSince) && a.LastProbe == b.LastProbe && a.Ledger == b.Ledger &&
		a.Usage == b.Usage
}

// changed reports whether b differs from a in anything the service acts on.
func changed(a, b *messages.ReplicaStatus) bool { return decisionOf(a) != decisionOf(b) }

// decision is what the service acts on of a replica's status, comparable
// with ==. The start time is kept as the instant (seconds and
// nanoseconds), so == is time.Time's Equal.
type decision struct {
	phase, health, lastError, failureOutput, refused, retireError string
	startedSec                                                    int64
	startedNsec, restarts, ledgerFailures, addresses              int
	inRotation, replace, final, hasLedger, withdraw               bool
}

func decisionOf(r *messages.ReplicaStatus) decision {
	return decision{phase: r.Phase, health: r.Health, lastError: r.LastError, failureOutput: r.FailureOutput,
		refused: r.Refused, retireError: r.RetireError, startedSec: r.StartedAt.Unix(), startedNsec: r.StartedAt.Nanosecond(),
		restarts: r.Restarts, ledgerFailures: r.Ledger.Failures, addresses: len(r.Addresses),
		inRotation: r.InRotation, replace: r.Replace, final: r.Final, hasLedger: r.HasLedger, withdraw: r.Withdraw}
}
