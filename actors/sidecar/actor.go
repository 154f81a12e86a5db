package sidecar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Env is what a sidecar actor uses of the node.
type Env struct {
	Driver drivers.Driver
	Events supervise.Emitter
	// Bin is the engenho binary, for ${ENGENHO_BIN}.
	Bin string
	// StepTimeout bounds a start; a stop is bounded by the grace plus it.
	StepTimeout time.Duration
}

// Params say which sidecar the actor runs.
type Params struct {
	Stack, Service string
	// Host is the hibernating host, for events ("" for a plain worker).
	Host       string
	Deployment string
	// Def is the service the sidecar belongs to (its env, user, image).
	Def     stackfile.Service
	Sidecar stackfile.Sidecar
	// Env is added to the sidecar's environment (ENGENHO_DATA_DIR...).
	Env map[string]string
}

// DefaultStepTimeout bounds a start when Env leaves it zero.
const DefaultStepTimeout = time.Minute

// ShutdownBudget is the budget a host gives a sidecar child: its grace
// plus the time to prove the stop.
func ShutdownBudget(sc stackfile.Sidecar) time.Duration {
	return sc.StopGracePeriod + 15*time.Second
}

// Actor is the sidecar actor.
type Actor struct {
	h       *supervise.Handle
	env     Env
	p       Params
	cfg     Config
	s       State
	name    string
	spec    drivers.Spec
	ctx     context.Context
	cancel  context.CancelFunc
	timers  *supervise.Timers
	unwatch func()
	run     uint64
}

// Produce returns the producer of a sidecar actor.
func Produce(env Env, p Params) supervise.Producer {
	if env.StepTimeout <= 0 {
		env.StepTimeout = DefaultStepTimeout
	}
	return func(h *supervise.Handle) actor.Receiver {
		return &Actor{h: h, env: env, p: p, cfg: ConfigOf(p.Sidecar)}
	}
}

// LabelsOf selects every instance of sidecar name of a service.
func LabelsOf(stack, service, name string) drivers.Labels {
	return drivers.Labels{drivers.LabelStack: stack, drivers.LabelService: service, stackfile.LabelSidecar: name}
}

func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.h.TrapShutdown()
		a.timers = supervise.NewTimers(a.h)
		a.ctx, a.cancel = context.WithCancel(context.Background())
		a.name, a.spec = a.render()
		a.step(Begin{})
	case actor.Stopped:
		a.stopAll()
	case messages.Shutdown, messages.SidecarStop:
		a.step(Stop{})
	case messages.SidecarOpDone:
		err := ""
		if m.Err != nil {
			err = m.Err.Error()
		}
		a.step(OpDone{Op: Op(m.Op), Err: err})
	case sidecarExit:
		if m.run == a.run {
			a.step(Exited{Code: m.exit.ExitCode, Signal: m.exit.Signal})
		}
	case watching:
		if m.run == a.run && a.unwatch == nil && (a.s.Op == OpStart || a.s.Phase == messages.SidecarRunning) {
			a.unwatch = m.stop
		} else {
			m.stop()
		}
	case messages.Timer:
		if a.timers.Fresh(m) {
			a.step(Timer{Name: m.Name})
		}
	}
}

// sidecarExit tags a watch's exit with the run it watched, so a late exit
// of an earlier run is ignored. It is the actor's own message.
type sidecarExit struct {
	run  uint64
	exit drivers.Exit
}

func (a *Actor) render() (string, drivers.Spec) {
	inst := stackfile.Instance{Stack: a.p.Stack, Slot: 1, ID: stackfile.NewInstanceID(), Deployment: a.p.Deployment, Bin: a.env.Bin}
	spec := stackfile.SidecarSpec(a.p.Def, a.p.Sidecar, inst)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	maps.Copy(spec.Env, a.p.Env)
	return spec.Name, spec
}

func (a *Actor) step(e any) {
	before := a.s
	var fx []step.Effect
	a.s, fx = Step(a.cfg, a.s, e, a.h.Clock().Now())
	supervise.Apply(a.h, supervise.Shell{
		Timers: a.timers, Events: a.env.Events, Own: a.perform,
		Event: messages.Event{Stack: a.p.Stack, Service: a.p.Service, Host: a.p.Host, Instance: a.name},
	}, fx)
	if a.s.Phase != before.Phase || a.s.Restarts != before.Restarts || a.s.Unproven != before.Unproven || a.s.Ended {
		a.report()
	}
}

// perform runs the sidecar core's own effect.
func (a *Actor) perform(f step.Effect) {
	if d, ok := f.(Do); ok {
		a.do(d.Op)
	}
}

func (a *Actor) report() {
	a.h.SetState(string(a.s.Phase), a.s.LastErr)
	a.h.Engine().Send(a.h.Parent(), messages.SidecarReport{
		Name: a.p.Sidecar.Name, Phase: a.s.Phase, AlwaysOn: a.cfg.AlwaysOn, Restarts: a.s.Restarts,
		ExitCode: a.s.ExitCode, Unproven: a.s.Unproven, LastErr: a.s.LastErr,
	})
}

// do runs op in a goroutine bounded by a timeout (SUP-4) and reports back.
func (a *Actor) do(op Op) {
	drv, self, eng := a.env.Driver, a.h.PID(), a.h.Engine()
	timeout := a.env.StepTimeout
	if op == OpStop || op == OpCleanup {
		timeout = a.p.Sidecar.StopGracePeriod + a.env.StepTimeout
	}
	ctx, cancel := clock.WithTimeout(a.h.Clock(), a.ctx, timeout)
	var fn func() error
	switch op {
	case OpCleanup:
		labels := LabelsOf(a.p.Stack, a.p.Service, a.p.Sidecar.Name)
		grace := a.p.Sidecar.StopGracePeriod
		fn = func() error { return Cleanup(ctx, drv, labels, grace) }
	case OpStart:
		a.unwatchRun()
		fn = a.startFn(ctx)
	case OpStop:
		a.unwatchRun()
		name, grace := a.name, a.p.Sidecar.StopGracePeriod
		fn = func() error { return StopAndDelete(ctx, drv, name, grace) }
	}
	go func() {
		defer cancel()
		err := fn()
		eng.Send(self, messages.SidecarOpDone{Op: string(op), Err: err})
	}()
}

// startFn creates the instance unless it exists, then starts a run and
// watches it.
func (a *Actor) startFn(ctx context.Context) func() error {
	drv, spec := a.env.Driver, a.spec
	a.run++
	run, self, eng := a.run, a.h.PID(), a.h.Engine()
	return func() error {
		if _, err := drv.Inspect(ctx, spec.Name); errors.Is(err, drivers.ErrNotFound) {
			if err := drv.Create(ctx, spec); err != nil {
				return fmt.Errorf("create: %w", err)
			}
		} else if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		if err := drv.Start(ctx, spec.Name); err != nil {
			return fmt.Errorf("start: %w", err)
		}
		stop, err := drv.Watch(spec.Name, func(e drivers.Exit) { eng.Send(self, sidecarExit{run: run, exit: e}) })
		if err == nil {
			eng.Send(self, watching{run: run, stop: stop})
		}
		return nil
	}
}

// watching hands the actor the stop func of run's watch (its own message).
type watching struct {
	run  uint64
	stop func()
}

func (a *Actor) unwatchRun() {
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
}

// stopAll ends the actor's goroutines and timers. The process is not
// touched here: a sidecar is stopped by SidecarStop or Shutdown.
func (a *Actor) stopAll() {
	if a.cancel != nil {
		a.cancel()
	}
	if a.timers != nil {
		a.timers.Stop()
	}
	a.unwatchRun()
}

// StopAndDelete stops an instance (SIGTERM, grace, kill) and deletes it.
// It returns nil only when the instance is proven gone or stopped: a Stop
// that failed is checked with Inspect before it counts as not proven.
func StopAndDelete(ctx context.Context, drv drivers.Driver, name string, grace time.Duration) error {
	err := drv.Stop(ctx, name, grace)
	if errors.Is(err, drivers.ErrNotFound) {
		return nil
	}
	if err != nil {
		st, ierr := drv.Inspect(ctx, name)
		switch {
		case errors.Is(ierr, drivers.ErrNotFound):
			return nil
		case ierr != nil || st.State != drivers.StateStopped:
			return fmt.Errorf("stop %s: %w", name, err)
		}
	}
	// Stopped is proven exited; an instance that could not be deleted is
	// removed by the next cleanup.
	_ = drv.Delete(ctx, name)
	return nil
}

// Cleanup stops and deletes every instance matching labels (what an earlier
// incarnation, or a daemon that died, left behind).
func Cleanup(ctx context.Context, drv drivers.Driver, labels drivers.Labels, grace time.Duration) error {
	found, err := drv.List(ctx, labels)
	if err != nil {
		return fmt.Errorf("listing leftovers: %w", err)
	}
	var errs []error
	for _, st := range found {
		errs = append(errs, StopAndDelete(ctx, drv, st.Name, grace))
	}
	return errors.Join(errs...)
}
