package daemon

import (
	"context"
	"github.com/engenho/engenho/drivers/clock"
	"sort"
	"strings"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/rs/zerolog"
)

// Hooks put fault injection into a daemon (the chaos suite, CHS-2). The
// shipped binary has none: Options.Hooks is nil, chaos.enabled: true is a
// config error and the chaos op is refused. Only the chaos build fills them
// (cmd/engenho/chaos_hooks.go, -tags chaos); even then nothing is wrapped,
// allowed or answered unless the config sets chaos.enabled.
type Hooks struct {
	// WrapDriver, when set, wraps every instance driver the daemon makes.
	WrapDriver func(drivers.Driver) drivers.Driver
	// WrapStore, when set, wraps the object store; prefix is its key
	// prefix.
	WrapStore func(store objstore.Store, prefix string) objstore.Store
	// Ops answer the kinds of the `chaos` control op, by kind.
	Ops map[string]OpFunc
	// AllowInjectPanic lets messages.InjectPanic make an actor panic
	// (supervise.System.AllowInjectPanic).
	AllowInjectPanic bool
	// SkipJournalCheck, when set and true, opens the journal without its
	// check: a bug the chaos self-test plants (ENGENHO_CHAOS_PLANT
	// skip-journal-check) to prove the campaign notices.
	SkipJournalCheck func() bool
	// KeepFailedWrites, when set and true, opens the journal with
	// journal.Options.KeepFailedWrites: a bug the self-test plants
	// (keep-failed-write).
	KeepFailedWrites func() bool
	// Clock, when set, is the clock the daemon runs on (unless Options
	// names one): the chaos build's, whose wall time can jump.
	Clock clock.Clock
}

// OpFunc answers one kind of the chaos op on the running daemon.
type OpFunc func(ctx context.Context, rt Running, args control.ChaosArgs) (control.ChaosResult, error)

// Running is what an OpFunc may use of the running daemon.
type Running struct {
	// Drivers are the instance drivers by config name, as the tree uses
	// them (wrapped by WrapDriver).
	Drivers map[string]drivers.Driver
	// Tree is the live actor tree.
	Tree *supervise.Tree
	// Deliver sends msg to the actor at path (through the root).
	Deliver func(path string, msg any)
	// Log is the daemon's logger.
	Log zerolog.Logger
}

// errNoChaos is the chaos op's answer in a binary built without the tag.
const errNoChaos = "chaos: this engenho was built without -tags chaos, so it has no fault injection; " +
	"the chaos suite runs the chaos build (go build -tags chaos ./cmd/engenho)"

// chaosOn reports whether fault injection is on: compiled in (hooks) and
// enabled in the config.
func (d *Daemon) chaosOn(s Settings) bool { return d.opts.Hooks != nil && s.ChaosEnabled }

// wrapDriver passes drv through the WrapDriver hook when chaos is on; boot
// calls it on every driver it makes.
func (d *Daemon) wrapDriver(s Settings, drv drivers.Driver) drivers.Driver {
	if !d.chaosOn(s) || d.opts.Hooks.WrapDriver == nil {
		return drv
	}
	return d.opts.Hooks.WrapDriver(drv)
}

// wrapStore passes the object store through the WrapStore hook when chaos
// is on.
func (d *Daemon) wrapStore(s Settings, store objstore.Store, prefix string) objstore.Store {
	if !d.chaosOn(s) || d.opts.Hooks.WrapStore == nil {
		return store
	}
	return d.opts.Hooks.WrapStore(store, prefix)
}

// skipJournalCheck says whether a planted bug skips the journal check.
func (d *Daemon) skipJournalCheck(s Settings) bool {
	return d.chaosOn(s) && d.opts.Hooks.SkipJournalCheck != nil && d.opts.Hooks.SkipJournalCheck()
}

// keepFailedWrites says whether a planted bug keeps the journal's failed
// writes in force.
func (d *Daemon) keepFailedWrites(s Settings) bool {
	return d.chaosOn(s) && d.opts.Hooks.KeepFailedWrites != nil && d.opts.Hooks.KeepFailedWrites()
}

// allowInjectPanic says whether the tree's actors panic on
// messages.InjectPanic.
func (d *Daemon) allowInjectPanic(s Settings) bool {
	return d.chaosOn(s) && d.opts.Hooks.AllowInjectPanic
}

// chaos answers the chaos op (CHS-2, CHS-3) through the Ops hooks.
func (d *Daemon) chaos(ctx context.Context, rt *runtime, args control.ChaosArgs) (control.ChaosResult, error) {
	op, ok := d.opts.Hooks.Ops[args.Kind]
	if !ok {
		kinds := make([]string, 0, len(d.opts.Hooks.Ops))
		for k := range d.opts.Hooks.Ops {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		return control.ChaosResult{Kind: args.Kind, Target: args.Target},
			control.Errorf(control.CodeInvalid, "chaos kind %q: want one of %s", args.Kind, strings.Join(kinds, ", "))
	}
	return op(ctx, Running{
		Drivers: rt.drivers,
		Tree:    rt.sys.Tree,
		Deliver: func(path string, msg any) { rt.engine.Send(rt.root, messages.Deliver{Path: path, Msg: msg}) },
		Log:     d.log.Logger,
	}, args)
}
