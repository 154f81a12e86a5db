package inject

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/objstore"
)

// Layer is what a rule applies to.
type Layer string

const (
	LayerDriver Layer = "driver"
	LayerStore  Layer = "store"
)

// Mode is how an armed call misbehaves.
type Mode string

const (
	// ModeFail returns an error of the rule's Kind at once.
	ModeFail Mode = "fail"
	// ModeTimeout waits Delay (or until the caller's context ends), then
	// fails with a transient error wrapping context.DeadlineExceeded.
	ModeTimeout Mode = "timeout"
	// ModeHang blocks until the caller's context ends.
	ModeHang Mode = "hang"
	// ModeLatency waits Delay, then makes the real call.
	ModeLatency Mode = "latency"
	// ModeConflict (store only) fails a conditional put or delete with
	// ErrPreconditionFailed, as if another writer had just won.
	ModeConflict Mode = "conflict"
)

// Driver operations a rule can name (Watch is never faulted: it has no
// context to end a hang).
var driverOps = []string{"validate", "create", "start", "stop", "kill", "delete", "inspect", "exec", "logs", "list"}

// Store operations a rule can name.
var storeOps = []string{"get", "put", "delete", "list"}

// Kinds of error a ModeFail rule returns.
var kinds = map[string]error{
	"transient": drivers.ErrTransient,
	"not_found": drivers.ErrNotFound,
	"invalid":   drivers.ErrInvalid,
}

// Rule is one armed fault.
type Rule struct {
	Layer Layer `json:"layer"`
	// Driver names the driver ("process", "incus"); empty is any.
	Driver string `json:"driver,omitempty"`
	// Op names the operation; empty is any.
	Op string `json:"op,omitempty"`
	// Match is a prefix of the instance name (driver) or a substring of the
	// key (store); empty is any.
	Match string `json:"match,omitempty"`
	Mode  Mode   `json:"mode"`
	// Kind is the error kind of ModeFail: transient, not_found, invalid.
	Kind string `json:"kind,omitempty"`
	// Count is how many calls the rule hits; 0 is every call until cleared.
	Count int           `json:"count"`
	Delay time.Duration `json:"delay,omitempty"`
}

// ErrBadRule is the kind of every rule validation error.
var ErrBadRule = errors.New("bad chaos rule")

func badRule(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRule, fmt.Sprintf(format, args...))
}

// Validate checks the rule is complete and consistent.
func (r Rule) Validate() error {
	ops := driverOps
	switch r.Layer {
	case LayerDriver:
	case LayerStore:
		ops = storeOps
	default:
		return badRule("layer %q: want driver or store", r.Layer)
	}
	if r.Op != "" && !slices.Contains(ops, r.Op) {
		return badRule("op %q: want one of %v", r.Op, ops)
	}
	switch r.Mode {
	case ModeFail:
		if _, ok := kinds[r.Kind]; !ok {
			return badRule("kind %q: want transient, not_found or invalid", r.Kind)
		}
	case ModeTimeout, ModeLatency:
		if r.Delay <= 0 {
			return badRule("mode %s needs a delay", r.Mode)
		}
	case ModeHang:
	case ModeConflict:
		if r.Layer != LayerStore {
			return badRule("mode conflict applies to the store only")
		}
	default:
		return badRule("mode %q: want fail, timeout, hang, latency or conflict", r.Mode)
	}
	if r.Count < 0 {
		return badRule("count %d: want 0 (every call) or more", r.Count)
	}
	if r.Delay < 0 || r.Delay > time.Hour {
		return badRule("delay %s: want 0..1h", r.Delay)
	}
	return nil
}

// ParseRule reads a rule from the chaos op's params: op, driver, match,
// mode, kind, count, delay (a Go duration).
func ParseRule(layer Layer, params map[string]string) (Rule, error) {
	r := Rule{Layer: layer, Driver: params["driver"], Op: params["op"], Match: params["match"],
		Mode: Mode(params["mode"]), Kind: params["kind"]}
	if r.Mode == ModeFail && r.Kind == "" {
		r.Kind = "transient"
	}
	if s := params["count"]; s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return Rule{}, badRule("count %q: want a number", s)
		}
		r.Count = n
	}
	if s := params["delay"]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return Rule{}, badRule("delay %q: want a duration such as 500ms", s)
		}
		r.Delay = d
	}
	for k := range params {
		if !slices.Contains([]string{"op", "driver", "match", "mode", "kind", "count", "delay"}, k) {
			return Rule{}, badRule("unknown param %q", k)
		}
	}
	return r, r.Validate()
}

// matches reports whether the rule covers a call.
func (r Rule) matches(layer Layer, driver, op, name string) bool {
	if r.Layer != layer || (r.Driver != "" && r.Driver != driver) || (r.Op != "" && r.Op != op) {
		return false
	}
	if r.Match == "" {
		return true
	}
	if layer == LayerStore {
		return strings.Contains(name, r.Match)
	}
	return strings.HasPrefix(name, r.Match)
}

// kindErr is the error kind a fail rule returns; store conflicts return
// ErrPreconditionFailed.
func (r Rule) kindErr() error {
	if r.Mode == ModeConflict {
		return objstore.ErrPreconditionFailed
	}
	if k, ok := kinds[r.Kind]; ok {
		return k
	}
	return drivers.ErrTransient
}
