//go:build chaos

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/daemon"
	"github.com/engenho/engenho/runtime/logging"
)

// This file is the only place that puts fault injection (chaos/inject)
// into the daemon, and only in the chaos build: go build -tags chaos.
func init() { chaosHooks = newChaosHooks }

// The chaos op's kinds (CHS-2, CHS-3). The daemon answers none of them
// unless its config sets chaos.enabled.
const (
	chaosPanic       = "panic"        // target: an actor path; the actor panics in its Receive
	chaosDriver      = "driver"       // params: an inject.Rule on the drivers
	chaosStore       = "store"        // params: an inject.Rule on the object store
	chaosClear       = "clear"        // disarm every rule
	chaosFaults      = "faults"       // detail: the armed rules (JSON)
	chaosInstances   = "instances"    // detail: every instance the drivers hold, unfiltered (JSON)
	chaosGoroutines  = "goroutines"   // detail: goroutines grouped by function and creator (JSON)
	chaosExpireLease = "expire-lease" // target: a host; its lease record is made expired
	chaosClock       = "clock"        // params: jump=DURATION (the wall time moves, the monotonic does not), or reset=1
)

// faultRegistry makes the daemon's fault registry on first use. A bad
// ENGENHO_CHAOS_PLANT is logged and no bug is planted.
type faultRegistry struct {
	log   *logging.Logger
	clock *inject.JumpClock
	once  sync.Once
	f     *inject.Faults
}

func (r *faultRegistry) faults() *inject.Faults {
	r.once.Do(func() {
		clk := r.clock // the daemon's own clock in this binary
		f, err := inject.New(clk)
		if err != nil {
			r.log.Error().Err(err).Msg("chaos: no bug planted")
			f = inject.NewWithPlant(clk, inject.PlantNone)
		}
		if p := f.Plant(); p != inject.PlantNone {
			r.log.Warn().Str("plant", string(p)).Msg("chaos: a bug is planted in this daemon (self-test)")
		}
		r.f = f
	})
	return r.f
}

func newChaosHooks(log *logging.Logger) *daemon.Hooks {
	r := &faultRegistry{log: log, clock: inject.NewJumpClock(clock.New())}
	return &daemon.Hooks{
		Clock:            r.clock,
		WrapDriver:       func(d drivers.Driver) drivers.Driver { return inject.WrapDriver(d, r.faults()) },
		WrapStore:        func(s objstore.Store, prefix string) objstore.Store { return inject.WrapStore(s, prefix, r.faults()) },
		AllowInjectPanic: r.faults().Plant().Kind() != inject.PlantDropPanic,
		SkipJournalCheck: func() bool { return r.faults().Plant().Kind() == inject.PlantSkipJournalCheck },
		KeepFailedWrites: func() bool { return r.faults().Plant().Kind() == inject.PlantKeepFailedWrite },
		Ops: map[string]daemon.OpFunc{
			chaosPanic:       chaosPanicOp,
			chaosDriver:      r.armOp(inject.LayerDriver),
			chaosStore:       r.armOp(inject.LayerStore),
			chaosClear:       r.clearOp,
			chaosFaults:      r.faultsOp,
			chaosInstances:   chaosInstancesOp,
			chaosGoroutines:  chaosGoroutinesOp,
			chaosExpireLease: r.expireLeaseOp,
			chaosClock:       r.clockOp,
		},
	}
}

func result(args control.ChaosArgs) control.ChaosResult {
	return control.ChaosResult{Kind: args.Kind, Target: args.Target}
}

func chaosPanicOp(_ context.Context, rt daemon.Running, args control.ChaosArgs) (control.ChaosResult, error) {
	res := result(args)
	if _, ok := rt.Tree.Get(args.Target); !ok {
		return res, control.Errorf(control.CodeNotFound, "chaos panic: no actor at %q (see `engenho tree`)", args.Target)
	}
	rt.Deliver(args.Target, messages.InjectPanic{Reason: "chaos"})
	res.Detail = "panic sent"
	return res, nil
}

func (r *faultRegistry) armOp(layer inject.Layer) daemon.OpFunc {
	return func(_ context.Context, rt daemon.Running, args control.ChaosArgs) (control.ChaosResult, error) {
		res := result(args)
		rule, err := inject.ParseRule(layer, args.Params)
		if err == nil {
			var id uint64
			id, err = r.faults().Arm(rule)
			res.Detail = fmt.Sprintf("rule %d armed", id)
		}
		if err != nil {
			return res, control.Errorf(control.CodeInvalid, "chaos %s: %v", args.Kind, err)
		}
		rt.Log.Warn().Str("layer", string(layer)).Str("op", rule.Op).Str("mode", string(rule.Mode)).Str("match", rule.Match).
			Int("count", rule.Count).Msg("chaos: fault armed")
		return res, nil
	}
}

func (r *faultRegistry) clearOp(_ context.Context, _ daemon.Running, args control.ChaosArgs) (control.ChaosResult, error) {
	res := result(args)
	res.Detail = fmt.Sprintf("%d rules cleared", r.faults().Clear())
	return res, nil
}

func (r *faultRegistry) faultsOp(_ context.Context, _ daemon.Running, args control.ChaosArgs) (control.ChaosResult, error) {
	return chaosJSON(result(args), r.faults().Rules())
}

func chaosGoroutinesOp(_ context.Context, _ daemon.Running, args control.ChaosArgs) (control.ChaosResult, error) {
	return chaosJSON(result(args), inject.Goroutines())
}

func (r *faultRegistry) expireLeaseOp(ctx context.Context, _ daemon.Running, args control.ChaosArgs) (control.ChaosResult, error) {
	res := result(args)
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rec, err := r.faults().ExpireLease(lctx, args.Target)
	if err != nil {
		return res, control.Errorf(control.CodeInvalid, "chaos expire-lease: %v", err)
	}
	res.Detail = fmt.Sprintf("lease of %s (holder %s, epoch %d) expired at %s", args.Target, rec.Holder, rec.Epoch, rec.Expiry.Format(time.RFC3339Nano))
	return res, nil
}

// chaosInstancesOp lists every instance of every driver, bypassing the
// fault hooks: the suite's view of what really runs.
func chaosInstancesOp(ctx context.Context, rt daemon.Running, args control.ChaosArgs) (control.ChaosResult, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	names := make([]string, 0, len(rt.Drivers))
	for name := range rt.Drivers {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []inject.Instance
	var errs []error
	for _, name := range names {
		all, err := inject.Unwrap(rt.Drivers[name]).List(lctx, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("driver %s: %w", name, err))
			continue
		}
		for _, st := range all {
			out = append(out, inject.Instance{Driver: name, Status: st})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return result(args), control.Errorf(control.CodeUnavailable, "chaos instances: %v", err)
	}
	return chaosJSON(result(args), out)
}

func chaosJSON(res control.ChaosResult, v any) (control.ChaosResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return res, control.Errorf(control.CodeInvalid, "chaos %s: encoding: %v", res.Kind, err)
	}
	res.Detail = string(b)
	return res, nil
}

// clockOp jumps the daemon's wall time (jump=DURATION, negative back) or
// undoes every jump (reset=1); its monotonic time never moves.
func (r *faultRegistry) clockOp(_ context.Context, rt daemon.Running, args control.ChaosArgs) (control.ChaosResult, error) {
	res := result(args)
	switch {
	case args.Params["reset"] != "":
		r.clock.Reset()
	case args.Params["jump"] != "":
		d, err := time.ParseDuration(args.Params["jump"])
		if err != nil {
			return res, control.Errorf(control.CodeInvalid, "chaos clock: jump=%q: %v", args.Params["jump"], err)
		}
		r.clock.Jump(d)
	default:
		return res, control.Errorf(control.CodeInvalid, "chaos clock: want jump=DURATION or reset=1")
	}
	rt.Log.Warn().Dur("offset", r.clock.Offset()).Msg("chaos: wall clock jumped")
	res.Detail = fmt.Sprintf("wall clock offset %s", r.clock.Offset())
	return res, nil
}
