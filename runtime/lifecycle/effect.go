package lifecycle

import (
	"fmt"
	"time"
)

// Effect is the one thing the daemon loop performs after a step. Each result
// of the effect comes back as an event.
type Effect interface {
	fmt.Stringer
	isEffect()
}

// Exit codes the lifecycle asks for.
const (
	// ExitClean: the journal was released.
	ExitClean = 0
	// ExitUnreleased: the drain or the journal release failed; the next start
	// reports the run as crashed and adopts what is still running.
	ExitUnreleased = 1
)

// None: nothing to do.
type None struct{}

// RunPhase: run boot phase Phase of attempt Attempt, then send PhaseDone or
// PhaseFailed. A phase that fails cleans up what it itself half did.
type RunPhase struct {
	Phase   Phase
	Attempt int
}

// AnnounceRunning: the runtime is running (epoch Epoch): send READY=1, mark
// the run live, record the boot attempt as successful. Reload: the config
// changed during the boot, apply it again as for ApplyConfig.
type AnnounceRunning struct {
	Epoch  uint64
	Reload bool
}

// ApplyConfig: re-read the config and apply what can be applied in place
// (DMN-16).
type ApplyConfig struct{}

// StartDrain: stop the tree in reverse order within Budget, checkpoint
// hosts; then send DrainDone or DrainFailed.
type StartDrain struct{ Budget time.Duration }

// ReleaseJournal: close the journal and mark the run released; then send
// JournalReleased or JournalReleaseFailed.
type ReleaseJournal struct{}

// ScheduleRetry: after Delay, send BackoffElapsed{Attempt}.
type ScheduleRetry struct {
	Delay   time.Duration
	Attempt int
}

// Exit: end the process with Code.
type Exit struct{ Code int }

// MoveToAttic: move What aside to DATA/attic/TIMESTAMP (DMN-14), holding
// the journal's lock through the move. The state does not change.
type MoveToAttic struct{ What string }

func (None) isEffect()            {}
func (RunPhase) isEffect()        {}
func (AnnounceRunning) isEffect() {}
func (ApplyConfig) isEffect()     {}
func (StartDrain) isEffect()      {}
func (ReleaseJournal) isEffect()  {}
func (ScheduleRetry) isEffect()   {}
func (Exit) isEffect()            {}
func (MoveToAttic) isEffect()     {}

func (None) String() string { return "none" }
func (e RunPhase) String() string {
	return fmt.Sprintf("run_phase(%s, attempt %d)", e.Phase, e.Attempt)
}
func (e AnnounceRunning) String() string {
	if e.Reload {
		return fmt.Sprintf("announce_running(epoch %d, reload)", e.Epoch)
	}
	return fmt.Sprintf("announce_running(epoch %d)", e.Epoch)
}
func (ApplyConfig) String() string    { return "apply_config" }
func (e StartDrain) String() string   { return "start_drain(" + e.Budget.String() + ")" }
func (ReleaseJournal) String() string { return "release_journal" }
func (e ScheduleRetry) String() string {
	return fmt.Sprintf("schedule_retry(%s, attempt %d)", e.Delay, e.Attempt)
}
func (e Exit) String() string        { return fmt.Sprintf("exit(%d)", e.Code) }
func (e MoveToAttic) String() string { return "move_to_attic(" + e.What + ")" }
