package lifecycle

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// StateName is the lifecycle state reported by status.
type StateName string

const (
	// Resolving: the process holds the data directory lock and is deciding
	// whether to boot (no hold marker) or come up stopped (hold marker).
	Resolving StateName = "resolving"
	// Booting: running the boot phases in order (see Phases).
	Booting StateName = "booting"
	// Running: the supervision tree is up and serving.
	Running StateName = "running"
	// Draining: stopping the tree, then releasing the journal (DrainStep),
	// then going where Then says.
	Draining StateName = "draining"
	// Stopped: the runtime is down, the daemon stays up, waiting for start.
	Stopped StateName = "stopped"
	// Failed: a boot failed (or the root supervisor gave up); waiting for the
	// retry timer (RetryBackoff) or for a config change or an operator's
	// retry (RetryHold).
	Failed StateName = "failed"
	// Wedged: the drain or the journal release failed; the journal may still
	// be held. Only retry (resume the failed step) or exit get out.
	Wedged StateName = "wedged"
	// Exiting: the process is ending. Terminal.
	Exiting StateName = "exiting"
)

// Phase is one boot phase. They run in the order of Phases.
type Phase string

const (
	PhaseResolveConfig Phase = "resolve_config"
	PhaseOpenJournal   Phase = "open_journal"
	PhaseAdopt         Phase = "adopt"
	PhaseStartTree     Phase = "start_tree"
	PhaseListen        Phase = "listen"
)

// Phases lists the boot phases in the order they run.
var Phases = []Phase{PhaseResolveConfig, PhaseOpenJournal, PhaseAdopt, PhaseStartTree, PhaseListen}

// phaseIndex is the position of p in Phases, or -1.
func phaseIndex(p Phase) int {
	for i, q := range Phases {
		if q == p {
			return i
		}
	}
	return -1
}

// nextPhase is the phase after p; false after the last one.
func nextPhase(p Phase) (Phase, bool) {
	i := phaseIndex(p)
	if i < 0 || i+1 >= len(Phases) {
		return "", false
	}
	return Phases[i+1], true
}

// opensSomething reports whether, once phase p has run (or failed), the boot
// may hold something that must be undone by a drain. resolve_config only
// reads files; every later phase opens the journal or builds on it.
func opensSomething(p Phase) bool { return phaseIndex(p) >= phaseIndex(PhaseOpenJournal) }

// treeExists reports whether the supervision tree may exist during phase p.
func treeExists(p Phase) bool { return phaseIndex(p) >= phaseIndex(PhaseStartTree) }

// RetryMode says how a failed state is left.
type RetryMode string

const (
	// RetryBackoff: a timer boots again after RetryDelay (1s doubling to 60s).
	RetryBackoff RetryMode = "backoff"
	// RetryHold: waits for a config change or an operator's retry.
	RetryHold RetryMode = "hold"
)

// Target is where an interrupted boot or a drain goes next.
type Target string

const (
	TargetNone    Target = ""
	TargetStopped Target = "stopped"
	TargetFailed  Target = "failed"
	TargetBoot    Target = "boot"
	TargetExit    Target = "exit"
)

// DrainStep is the step a drain is in.
type DrainStep string

const (
	// DrainTree: stopping the supervision tree in reverse order, each actor
	// within its budget, hosts checkpointed.
	DrainTree DrainStep = "tree"
	// DrainJournal: closing the journal so a crash now would leave it
	// released (DMN-3).
	DrainJournal DrainStep = "journal"
)

// CauseClass classifies a failure.
type CauseClass string

const (
	// CauseConfig: the config does not resolve; retrying without a change is
	// pointless, so the boot fails into hold (DMN-7).
	CauseConfig CauseClass = "config"
	// CauseTransient: something may come back (a driver not reachable); the
	// boot fails into backoff (DMN-7).
	CauseTransient CauseClass = "transient"
	// CauseCorrupt: the journal is damaged or cannot be written (REL-5).
	// Retrying cannot repair it, so the boot fails into hold; the failure's
	// reason names the damaged file and the command that recovers
	// (`engenho reinit journal`, or `engenho retry` once it is writable).
	CauseCorrupt CauseClass = "corrupt"
	// CauseSupervision: the root supervisor gave up (SUP-8); handled like a
	// transient cause.
	CauseSupervision CauseClass = "supervision"
	// CauseDrain: the tree could not be stopped.
	CauseDrain CauseClass = "drain"
	// CauseRelease: the journal could not be released.
	CauseRelease CauseClass = "release"
)

// retryFor is the retry mode a failure of class c leads to.
func retryFor(c CauseClass) RetryMode {
	if c == CauseConfig || c == CauseCorrupt {
		return RetryHold
	}
	return RetryBackoff
}

// classAllowed reports whether a boot phase can fail with class c: config
// and transient anywhere, corrupt only once the journal is read.
func classAllowed(p Phase, c CauseClass) bool {
	switch c {
	case CauseConfig, CauseTransient:
		return true
	case CauseCorrupt:
		return opensSomething(p)
	}
	return false
}

// Failure is the last error the lifecycle saw.
type Failure struct {
	// Phase is the boot phase that failed; empty outside a boot.
	Phase Phase      `json:"phase,omitempty"`
	Class CauseClass `json:"class"`
	// Reasons is the chain of reasons, outermost first (for a root that gave
	// up: root, then the stack, service, replica that caused it).
	Reasons []string `json:"reasons"`
}

func (f Failure) Error() string {
	var b strings.Builder
	if f.Phase != "" {
		b.WriteString(string(f.Phase))
		b.WriteString(": ")
	}
	b.WriteString(string(f.Class))
	for _, r := range f.Reasons {
		b.WriteString(": ")
		b.WriteString(r)
	}
	return b.String()
}

// Config holds the lifecycle's tunables.
type Config struct {
	// DrainBudget bounds a drain (default 60s, inside systemd's 90s
	// TimeoutStopSec, DMN-8).
	DrainBudget time.Duration
	// BackoffFirst is the first retry delay after a transient failure (1s).
	BackoffFirst time.Duration
	// BackoffCap is the longest retry delay (60s).
	BackoffCap time.Duration
}

// DefaultConfig is the spec's configuration: 60s drain, backoff 1s..60s.
func DefaultConfig() Config {
	return Config{DrainBudget: 60 * time.Second, BackoffFirst: time.Second, BackoffCap: 60 * time.Second}
}

// backoff is the retry delay after the n-th consecutive failure (n >= 1):
// first, doubling, capped.
func (c Config) backoff(n int) time.Duration {
	d := c.BackoffFirst
	for i := 1; i < n && d < c.BackoffCap; i++ {
		d *= 2
	}
	return min(d, c.BackoffCap)
}

// State is the lifecycle state: a plain value, safe to copy and publish.
type State struct {
	Name StateName `json:"state"`
	// Phase is the boot phase being run (booting only).
	Phase Phase `json:"phase,omitempty"`
	// Then is where the lifecycle goes next: in booting, a pending
	// interruption applied at the next phase boundary; in draining and
	// wedged, where the drain leads once the journal is released.
	Then Target `json:"then,omitempty"`
	// DrainStep is the drain's current (draining) or failed (wedged) step.
	DrainStep DrainStep `json:"drain_step,omitempty"`
	// Retry is the retry mode in failed, and the mode a drain towards failed
	// will land in.
	Retry RetryMode `json:"retry,omitempty"`
	// RetryDelay is the backoff delay in failed/backoff.
	RetryDelay time.Duration `json:"-"`
	// Hold is what the hold marker (DATA/control/hold, DMN-4) must say. The
	// loop writes or clears the marker whenever this changes.
	Hold bool `json:"hold"`
	// ConfigStale is set when the config changed while a boot was reading
	// it; the boot re-reads it when it ends (DMN-16).
	ConfigStale bool `json:"config_stale,omitempty"`
	// Attempt counts boot attempts since the process started.
	Attempt int `json:"boot_attempt"`
	// Failures counts consecutive failed boots (and root give-ups) since the
	// runtime last reached running; it drives the backoff.
	Failures int `json:"consecutive_failures"`
	// Epoch counts the times the runtime entered running (DMN-14): a reinit
	// carries the epoch its user saw and is refused if it moved.
	Epoch uint64 `json:"epoch"`
	// LastError is the last failure since the runtime last reached running.
	LastError *Failure `json:"last_error,omitempty"`
	// Config is the lifecycle's configuration, not reported.
	Config Config `json:"-"`
}

// New returns the starting state, resolving. Zero fields of cfg take the
// defaults of DefaultConfig.
func New(cfg Config) State {
	def := DefaultConfig()
	if cfg.DrainBudget <= 0 {
		cfg.DrainBudget = def.DrainBudget
	}
	if cfg.BackoffFirst <= 0 {
		cfg.BackoffFirst = def.BackoffFirst
	}
	if cfg.BackoffCap < cfg.BackoffFirst {
		cfg.BackoffCap = max(def.BackoffCap, cfg.BackoffFirst)
	}
	return State{Name: Resolving, Config: cfg}
}

// String is a short form for logs: "booting/adopt", "failed/backoff(4s)",
// "draining/tree>stopped", "stopped+hold".
func (s State) String() string {
	var b strings.Builder
	b.WriteString(string(s.Name))
	switch s.Name {
	case Booting:
		b.WriteString("/" + string(s.Phase))
	case Draining, Wedged:
		b.WriteString("/" + string(s.DrainStep))
	case Failed:
		b.WriteString("/" + string(s.Retry))
		if s.Retry == RetryBackoff {
			b.WriteString("(" + s.RetryDelay.String() + ")")
		}
	}
	if s.Then != TargetNone {
		b.WriteString(">" + string(s.Then))
	}
	if s.Hold {
		b.WriteString("+hold")
	}
	return b.String()
}

// stateJSON is State's wire form: the delay as a duration string.
type stateJSON struct {
	stateFields
	RetryDelay string `json:"retry_delay,omitempty"`
}

// stateFields has State's fields without its methods, so encoding it does
// not recurse into State.MarshalJSON.
type stateFields State

// MarshalJSON writes the snapshot with retry_delay as a string ("4s").
func (s State) MarshalJSON() ([]byte, error) {
	v := stateJSON{stateFields: stateFields(s)}
	if s.RetryDelay > 0 {
		v.RetryDelay = s.RetryDelay.String()
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON wrote (Config is not carried).
func (s *State) UnmarshalJSON(data []byte) error {
	var v stateJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*s = State(v.stateFields)
	if v.RetryDelay != "" {
		d, err := time.ParseDuration(v.RetryDelay)
		if err != nil {
			return fmt.Errorf("lifecycle state: retry_delay %q: %w", v.RetryDelay, err)
		}
		s.RetryDelay = d
	}
	return nil
}
