package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"sort"
	"sync"
	"time"
	"weak"

	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// The chaos op's kinds (CHS-2). Every one is refused unless the config
// sets chaos.enabled (handler.Chaos checks).
const (
	chaosPanic       = "panic"        // target: an actor path; the actor panics in its Receive
	chaosDriver      = "driver"       // params: an inject.Rule on the drivers
	chaosStore       = "store"        // params: an inject.Rule on the object store
	chaosClear       = "clear"        // disarm every rule
	chaosFaults      = "faults"       // detail: the armed rules (JSON)
	chaosInstances   = "instances"    // detail: every instance the drivers hold, unfiltered (JSON)
	chaosGoroutines  = "goroutines"   // detail: goroutines grouped by function and creator (JSON)
	chaosExpireLease = "expire-lease" // target: a host; its lease record is made expired
)

// chaosRegistry holds each daemon's fault registry without keeping the
// daemon alive.
var chaosRegistry sync.Map // weak.Pointer[Daemon] -> *inject.Faults

// faults is the daemon's fault registry, made on first use. A bad
// ENGENHO_CHAOS_PLANT is logged and no bug is planted.
func (d *Daemon) faults() *inject.Faults {
	key := weak.Make(d)
	if f, ok := chaosRegistry.Load(key); ok {
		return f.(*inject.Faults)
	}
	f, err := inject.New(d.clk)
	if err != nil {
		d.log.Error().Err(err).Msg("chaos: no bug planted")
		f = inject.NewWithPlant(d.clk, inject.PlantNone)
	}
	got, loaded := chaosRegistry.LoadOrStore(key, f)
	if !loaded {
		goruntime.AddCleanup(d, func(k weak.Pointer[Daemon]) { chaosRegistry.Delete(k) }, key)
		if p := f.Plant(); p != inject.PlantNone {
			d.log.Warn().Str("plant", string(p)).Msg("chaos: a bug is planted in this daemon (self-test)")
		}
	}
	return got.(*inject.Faults)
}

// chaosDriver wraps drv with the fault hooks when chaos is enabled; boot
// calls it on every driver it makes.
func (d *Daemon) chaosDriver(s Settings, drv drivers.Driver) drivers.Driver {
	if !s.ChaosEnabled {
		return drv
	}
	return inject.WrapDriver(drv, d.faults())
}

// chaosStore wraps the object store when chaos is enabled. The activator
// wiring calls it on the store it opens, with the key prefix it uses:
//
//	store = d.chaosStore(settings, store, prefix)
func (d *Daemon) chaosStore(s Settings, store objstore.Store, prefix string) objstore.Store {
	if !s.ChaosEnabled {
		return store
	}
	return inject.WrapStore(store, prefix, d.faults())
}

// chaos injects one fault into the running daemon, or reports what the
// chaos suite observes through it (CHS-2, CHS-3).
func (d *Daemon) chaos(ctx context.Context, rt *runtime, args control.ChaosArgs) (control.ChaosResult, error) {
	res := control.ChaosResult{Kind: args.Kind, Target: args.Target}
	f := d.faults()
	switch args.Kind {
	case chaosPanic:
		if _, ok := rt.sys.Tree.Get(args.Target); !ok {
			return res, control.Errorf(control.CodeNotFound, "chaos panic: no actor at %q (see `engenho tree`)", args.Target)
		}
		rt.engine.Send(rt.root, messages.Deliver{Path: args.Target, Msg: messages.InjectPanic{Reason: "chaos"}})
		res.Detail = "panic sent"
		return res, nil
	case chaosDriver, chaosStore:
		layer := inject.LayerDriver
		if args.Kind == chaosStore {
			layer = inject.LayerStore
		}
		rule, err := inject.ParseRule(layer, args.Params)
		if err == nil {
			var id uint64
			id, err = f.Arm(rule)
			res.Detail = fmt.Sprintf("rule %d armed", id)
		}
		if err != nil {
			return res, control.Errorf(control.CodeInvalid, "chaos %s: %v", args.Kind, err)
		}
		d.log.Warn().Str("layer", string(layer)).Str("op", rule.Op).Str("mode", string(rule.Mode)).Str("match", rule.Match).
			Int("count", rule.Count).Msg("chaos: fault armed")
		return res, nil
	case chaosClear:
		res.Detail = fmt.Sprintf("%d rules cleared", f.Clear())
		return res, nil
	case chaosFaults:
		return chaosJSON(res, f.Rules())
	case chaosInstances:
		all, err := chaosListInstances(ctx, rt)
		if err != nil {
			return res, control.Errorf(control.CodeUnavailable, "chaos instances: %v", err)
		}
		return chaosJSON(res, all)
	case chaosGoroutines:
		return chaosJSON(res, inject.Goroutines())
	case chaosExpireLease:
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rec, err := f.ExpireLease(lctx, args.Target)
		if err != nil {
			return res, control.Errorf(control.CodeInvalid, "chaos expire-lease: %v", err)
		}
		res.Detail = fmt.Sprintf("lease of %s (holder %s, epoch %d) expired at %s", args.Target, rec.Holder, rec.Epoch, rec.Expiry.Format(time.RFC3339Nano))
		return res, nil
	}
	return res, control.Errorf(control.CodeInvalid, "chaos kind %q: want one of %s, %s, %s, %s, %s, %s, %s, %s", args.Kind,
		chaosPanic, chaosDriver, chaosStore, chaosClear, chaosFaults, chaosInstances, chaosGoroutines, chaosExpireLease)
}

// chaosListInstances lists every instance of every driver, bypassing the
// fault hooks: the suite's view of what really runs.
func chaosListInstances(ctx context.Context, rt *runtime) ([]inject.Instance, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	names := make([]string, 0, len(rt.drivers))
	for name := range rt.drivers {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []inject.Instance
	var errs []error
	for _, name := range names {
		all, err := inject.Unwrap(rt.drivers[name]).List(lctx, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("driver %s: %w", name, err))
			continue
		}
		for _, st := range all {
			out = append(out, inject.Instance{Driver: name, Status: st})
		}
	}
	return out, errors.Join(errs...)
}

func chaosJSON(res control.ChaosResult, v any) (control.ChaosResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return res, control.Errorf(control.CodeInvalid, "chaos %s: encoding: %v", res.Kind, err)
	}
	res.Detail = string(b)
	return res, nil
}
