package lifecycle

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Event is something that happened, fed to Step by the daemon loop.
type Event interface {
	fmt.Stringer
	isEvent()
}

// BootRequested starts the first boot (in resolving, no hold marker).
type BootRequested struct{}

// HoldPresent reports the hold marker at start: the daemon comes up stopped
// (DMN-4).
type HoldPresent struct{}

// PhaseDone reports that a boot phase finished.
type PhaseDone struct{ Phase Phase }

// PhaseFailed reports that a boot phase failed. Class is CauseConfig or
// CauseTransient (DMN-7), or CauseCorrupt from open_journal on (REL-5).
type PhaseFailed struct {
	Phase  Phase
	Class  CauseClass
	Reason string
}

// BackoffElapsed is the retry timer of boot attempt Attempt firing. A timer
// of an older attempt is refused, so the loop never needs to cancel one.
type BackoffElapsed struct{ Attempt int }

// ConfigChanged reports that the config file (or a stack file it lists)
// changed on disk (DMN-16, after debouncing).
type ConfigChanged struct{}

// StartRequested is the operator's start.
type StartRequested struct{}

// StopRequested is the operator's stop; Hold also writes the hold marker.
type StopRequested struct{ Hold bool }

// RestartRequested is the operator's restart (= stop + start).
type RestartRequested struct{}

// RetryRequested is the operator's retry: boot a failed boot now.
type RetryRequested struct{}

// ExitRequested ends the process after a drain: the operator's exit or
// SIGTERM/SIGINT. Source names it, for logs ("operator", "SIGTERM").
type ExitRequested struct{ Source string }

// ReconfigureRequested is the operator's reconfigure, or SIGHUP.
type ReconfigureRequested struct{}

// DrainDone reports that the tree is stopped.
type DrainDone struct{}

// DrainFailed reports that the tree could not be stopped.
type DrainFailed struct{ Reason string }

// JournalReleased reports that the journal is closed.
type JournalReleased struct{}

// JournalReleaseFailed reports that the journal could not be closed.
type JournalReleaseFailed struct{ Reason string }

// RootGaveUp reports that the root supervisor ended (SUP-8). Chain holds the
// reasons outermost first.
type RootGaveUp struct{ Chain []string }

// ReinitRequested asks to move What ("journal", "identity") to the attic.
// Epoch is the stop epoch the operator saw when confirming (DMN-14).
type ReinitRequested struct {
	What  string
	Epoch uint64
}

// ReinitDone reports that What was moved to the attic. In failed the
// daemon boots at once on the new journal (or identity); in stopped it
// stays stopped.
type ReinitDone struct{ What string }

func (BootRequested) isEvent()        {}
func (HoldPresent) isEvent()          {}
func (PhaseDone) isEvent()            {}
func (PhaseFailed) isEvent()          {}
func (BackoffElapsed) isEvent()       {}
func (ConfigChanged) isEvent()        {}
func (StartRequested) isEvent()       {}
func (StopRequested) isEvent()        {}
func (RestartRequested) isEvent()     {}
func (RetryRequested) isEvent()       {}
func (ExitRequested) isEvent()        {}
func (ReconfigureRequested) isEvent() {}
func (DrainDone) isEvent()            {}
func (DrainFailed) isEvent()          {}
func (JournalReleased) isEvent()      {}
func (JournalReleaseFailed) isEvent() {}
func (RootGaveUp) isEvent()           {}
func (ReinitRequested) isEvent()      {}
func (ReinitDone) isEvent()           {}

func (BootRequested) String() string    { return "boot" }
func (HoldPresent) String() string      { return "hold_present" }
func (e PhaseDone) String() string      { return "phase_done(" + string(e.Phase) + ")" }
func (e PhaseFailed) String() string    { return fmt.Sprintf("phase_failed(%s, %s)", e.Phase, e.Class) }
func (e BackoffElapsed) String() string { return fmt.Sprintf("backoff_elapsed(attempt %d)", e.Attempt) }
func (ConfigChanged) String() string    { return "config_changed" }
func (StartRequested) String() string   { return "start" }
func (e StopRequested) String() string {
	if e.Hold {
		return "stop --hold"
	}
	return "stop"
}
func (RestartRequested) String() string { return "restart" }
func (RetryRequested) String() string   { return "retry" }
func (e ExitRequested) String() string {
	if e.Source == "" {
		return "exit"
	}
	return "exit(" + e.Source + ")"
}
func (ReconfigureRequested) String() string { return "reconfigure" }
func (DrainDone) String() string            { return "drain_done" }
func (DrainFailed) String() string          { return "drain_failed" }
func (JournalReleased) String() string      { return "journal_released" }
func (JournalReleaseFailed) String() string { return "journal_release_failed" }
func (e RootGaveUp) String() string {
	return "root_gave_up(" + strings.Join(e.Chain, ": ") + ")"
}
func (e ReinitRequested) String() string {
	return fmt.Sprintf("reinit(%s, epoch %d)", e.What, e.Epoch)
}

func (e ReinitDone) String() string { return "reinit_done(" + e.What + ")" }

// FromSignal maps a process signal to its event (DMN-8): SIGTERM and SIGINT
// exit, SIGHUP reconfigures. Other signals have no event.
func FromSignal(sig os.Signal) (Event, bool) {
	switch sig {
	case syscall.SIGTERM:
		return ExitRequested{Source: "SIGTERM"}, true
	case syscall.SIGINT:
		return ExitRequested{Source: "SIGINT"}, true
	case syscall.SIGHUP:
		return ReconfigureRequested{}, true
	}
	return nil, false
}
