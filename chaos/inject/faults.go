package inject

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
)

// PlantEnv names the planted bug of a chaos-enabled daemon (self-test only).
const PlantEnv = "ENGENHO_CHAOS_PLANT"

// Plant is a deliberately planted bug the chaos suite must catch.
type Plant string

const (
	// PlantNone: no bug.
	PlantNone Plant = ""
	// PlantForgetAdopt hides, for this daemon's life, every instance that
	// was already running when the driver was wrapped: List leaves it out
	// and Inspect says not found, as a replica actor that forgot to
	// re-adopt would behave after a restart.
	PlantForgetAdopt Plant = "forget-adopt"
	// PlantStopNoop makes Stop answer success without stopping anything,
	// so a stopped intent is silently not honoured.
	PlantStopNoop Plant = "stop-noop"
	// PlantSkipJournalCheck makes the daemon open its journal without
	// checking it in a child process first, as before REL-5: badger then
	// panics, leaks or silently drops records on a damaged journal.
	PlantSkipJournalCheck Plant = "skip-journal-check"
	// PlantHideExit hides the end of covered instances' runs: their
	// watches never fire, and Inspect and List go on reporting the last
	// running status seen, so the daemon believes a dead workload lives.
	// The serving-is-running invariant must catch it.
	PlantHideExit Plant = "hide-exit"
	// PlantDropPanic makes every actor drop injected panics with a
	// warning: a panic fault takes no effect. The fault-effect invariant
	// must catch it.
	PlantDropPanic Plant = "drop-panic"
	// PlantKeepFailedWrite makes the journal keep a commit the disk
	// failed (EIO) in force instead of undoing it, as before issue 18: an
	// intent refused with an I/O error still changes the journal, and
	// comes into force at the next restart.
	PlantKeepFailedWrite Plant = "keep-failed-write"
)

// Kind is the plant without its instance filter.
func (p Plant) Kind() Plant {
	kind, _, _ := strings.Cut(string(p), ":")
	return Plant(kind)
}

// Covers reports whether the plant applies to the named instance: a plant
// written KIND:PREFIX applies only to instances whose name starts with
// PREFIX (so a self-test breaks one service, not the whole node).
func (p Plant) Covers(instance string) bool {
	_, prefix, _ := strings.Cut(string(p), ":")
	return strings.HasPrefix(instance, prefix)
}

// ParsePlant reads a plant: KIND or KIND:INSTANCE-PREFIX; empty is
// PlantNone.
func ParsePlant(s string) (Plant, error) {
	switch p := Plant(s); p.Kind() {
	case PlantNone, PlantForgetAdopt, PlantStopNoop, PlantSkipJournalCheck, PlantHideExit, PlantDropPanic, PlantKeepFailedWrite:
		return p, nil
	}
	return PlantNone, badRule("%s %q: want one of %s, %s, %s, %s, %s, %s", PlantEnv, s, PlantForgetAdopt, PlantStopNoop,
		PlantSkipJournalCheck, PlantHideExit, PlantDropPanic, PlantKeepFailedWrite)
}

// Armed is a rule as the registry holds it.
type Armed struct {
	ID   uint64 `json:"id"`
	Rule Rule   `json:"rule"`
	// Left is how many calls the rule still hits (-1: every call).
	Left int `json:"left"`
	// Hits counts the calls it hit.
	Hits int `json:"hits"`
}

// Faults is one daemon's registry of armed faults, shared by its wrapped
// drivers and store. Safe for concurrent use.
type Faults struct {
	clk   clock.Clock
	plant Plant

	mu     sync.Mutex
	next   uint64
	rules  []*Armed
	stores []*Store // wrapped stores, newest last
}

// New returns an empty registry on clk, with the plant named by
// ENGENHO_CHAOS_PLANT (an unknown name is an error).
func New(clk clock.Clock) (*Faults, error) {
	plant, err := ParsePlant(os.Getenv(PlantEnv))
	if err != nil {
		return nil, err
	}
	return NewWithPlant(clk, plant), nil
}

// NewWithPlant returns an empty registry with the given plant.
func NewWithPlant(clk clock.Clock, plant Plant) *Faults {
	if clk == nil {
		clk = clock.New()
	}
	return &Faults{clk: clk, plant: plant}
}

// Plant is the planted bug, if any.
func (f *Faults) Plant() Plant { return f.plant }

// Arm validates and arms r; it returns the rule's id.
func (f *Faults) Arm(r Rule) (uint64, error) {
	if err := r.Validate(); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	left := r.Count
	if left == 0 {
		left = -1
	}
	f.rules = append(f.rules, &Armed{ID: f.next, Rule: r, Left: left})
	return f.next, nil
}

// Clear disarms every rule and reports how many were armed.
func (f *Faults) Clear() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.rules)
	f.rules = nil
	return n
}

// Rules lists the armed rules (spent ones included until Clear), by id.
func (f *Faults) Rules() []Armed {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Armed, 0, len(f.rules))
	for _, a := range f.rules {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// take finds the first live rule covering the call and spends one hit.
func (f *Faults) take(layer Layer, driver, op, name string, conditional bool) (Rule, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.rules {
		if a.Left == 0 || !a.Rule.matches(layer, driver, op, name) {
			continue
		}
		if a.Rule.Mode == ModeConflict && !conditional {
			continue // only conditional writes can lose a race
		}
		if a.Left > 0 {
			a.Left--
		}
		a.Hits++
		return a.Rule, true
	}
	return Rule{}, false
}

// Hit applies the rule armed for a call, if any: it returns the error the
// call must return, or nil to make the real call (after any latency).
// wrap builds the error of the caller's layer from a kind and a cause.
func (f *Faults) hit(ctx context.Context, layer Layer, driver, op, name string, conditional bool, wrap func(kind, cause error) error) error {
	r, ok := f.take(layer, driver, op, name, conditional)
	if !ok {
		return nil
	}
	switch r.Mode {
	case ModeFail, ModeConflict:
		return wrap(r.kindErr(), fmt.Errorf("chaos: injected %s", r.Mode))
	case ModeHang:
		<-ctx.Done()
		return wrap(drivers.ErrTransient, fmt.Errorf("chaos: hung until cancelled: %w", ctx.Err()))
	case ModeTimeout:
		if err := f.wait(ctx, r.Delay); err != nil {
			return wrap(drivers.ErrTransient, fmt.Errorf("chaos: hung until cancelled: %w", err))
		}
		return wrap(drivers.ErrTransient, fmt.Errorf("chaos: timed out after %s: %w", r.Delay, context.DeadlineExceeded))
	case ModeLatency:
		if err := f.wait(ctx, r.Delay); err != nil {
			return wrap(drivers.ErrTransient, fmt.Errorf("chaos: cancelled during injected latency: %w", err))
		}
	}
	return nil
}

// wait blocks for d on the registry's clock, or until ctx ends.
func (f *Faults) wait(ctx context.Context, d time.Duration) error {
	t := f.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
