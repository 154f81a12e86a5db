package lifecycle

import (
	"fmt"
	"time"

	"github.com/engenho/engenho/messages/step"
)

// The lifecycle's own effects follow. Step returns at most one of them (or
// a step.Refuse); the daemon loop performs it, and each result of the
// effect comes back as an event.

// Exit codes the lifecycle asks for.
const (
	// ExitClean: the journal was released.
	ExitClean = 0
	// ExitUnreleased: the drain or the journal release failed; the next start
	// reports the run as crashed and adopts what is still running.
	ExitUnreleased = 1
)

// RunPhase: run boot phase Phase of attempt Attempt, then send PhaseDone or
// PhaseFailed. A phase that fails cleans up what it itself half did.
type RunPhase struct {
	step.Is
	Phase   Phase
	Attempt int
}

// AnnounceRunning: the runtime is running (epoch Epoch): send READY=1, mark
// the run live, record the boot attempt as successful. Reload: the config
// changed during the boot, apply it again as for ApplyConfig.
type AnnounceRunning struct {
	step.Is
	Epoch  uint64
	Reload bool
}

// ApplyConfig: re-read the config and apply what can be applied in place
// (DMN-16).
type ApplyConfig struct{ step.Is }

// StartDrain: stop the tree in reverse order within Budget, checkpoint
// hosts; then send DrainDone or DrainFailed.
type StartDrain struct {
	step.Is
	Budget time.Duration
}

// ReleaseJournal: close the journal and mark the run released; then send
// JournalReleased or JournalReleaseFailed.
type ReleaseJournal struct{ step.Is }

// ScheduleRetry: after Delay, send BackoffElapsed{Attempt}.
type ScheduleRetry struct {
	step.Is
	Delay   time.Duration
	Attempt int
}

// Exit: end the process with Code.
type Exit struct {
	step.Is
	Code int
}

// MoveToAttic: move What aside to DATA/attic/TIMESTAMP (DMN-14), holding
// the journal's lock through the move. The state does not change.
type MoveToAttic struct {
	step.Is
	What string
}

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
