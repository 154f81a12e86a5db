package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

const (
	runMarkerName = "run.json"
	holdName      = "hold"
)

// RunState is what the run marker says.
type RunState string

const (
	// RunLive: the daemon holds the journal open; dying now leaves it
	// unreleased.
	RunLive RunState = "live"
	// RunReleased: the journal is released; dying now is harmless.
	RunReleased RunState = "released"
)

// RunMarker is DATA/control/run.json (DMN-3).
type RunMarker struct {
	State RunState `json:"state"`
	Pid   int      `json:"pid"`
	// Phase is the lifecycle phase or state the run was in when it last
	// marked itself live ("adopt", "running", ...).
	Phase string `json:"phase,omitempty"`
	// StartedAt is when the run took the data directory lock.
	StartedAt time.Time `json:"started_at"`
	// UpdatedAt is when the marker was written.
	UpdatedAt time.Time `json:"updated_at"`
}

// MarkLive records that this process holds the journal, in phase.
func (d *Dir) MarkLive(phase string) error {
	return d.writeRunMarker(RunLive, phase)
}

// MarkReleased records that the journal is released.
func (d *Dir) MarkReleased() error {
	return d.writeRunMarker(RunReleased, "")
}

func (d *Dir) writeRunMarker(state RunState, phase string) error {
	if err := d.requireLock(); err != nil {
		return err
	}
	m := RunMarker{State: state, Pid: os.Getpid(), Phase: phase, StartedAt: d.startedAt.UTC(), UpdatedAt: d.clock.Now().UTC()}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(d.Control(), runMarkerName, append(data, '\n')); err != nil {
		return fmt.Errorf("datadir %s: run marker: %w", d.root, err)
	}
	return nil
}

// ReadRunMarker reads run.json; false if there is none.
func (d *Dir) ReadRunMarker() (RunMarker, bool, error) {
	data, err := os.ReadFile(d.RunMarkerPath())
	if errors.Is(err, os.ErrNotExist) {
		return RunMarker{}, false, nil
	}
	if err != nil {
		return RunMarker{}, false, fmt.Errorf("datadir %s: run marker: %w", d.root, err)
	}
	var m RunMarker
	if err := json.Unmarshal(data, &m); err != nil {
		return RunMarker{}, true, fmt.Errorf("datadir %s: run marker %s: %w", d.root, d.RunMarkerPath(), err)
	}
	if m.State != RunLive && m.State != RunReleased {
		return m, true, fmt.Errorf("datadir %s: run marker %s: unknown state %q", d.root, d.RunMarkerPath(), m.State)
	}
	return m, true, nil
}

// Outcome is how the previous run ended.
type Outcome string

const (
	// OutcomeFirst: no run marker, this is the data directory's first run.
	OutcomeFirst Outcome = "first"
	// OutcomeClean: the previous run released the journal.
	OutcomeClean Outcome = "clean"
	// OutcomeCrashed: the previous run died while live (or left a marker
	// that cannot be read). The daemon reports it as an event.
	OutcomeCrashed Outcome = "crashed"
)

// PreviousRun is the report of how the last run ended.
type PreviousRun struct {
	Outcome Outcome `json:"outcome"`
	// Detail says it for humans: "pid 4242 died live in phase adopt".
	Detail string `json:"detail"`
	// Marker is the previous run's marker, if one was read.
	Marker *RunMarker `json:"marker,omitempty"`
}

// PreviousRun reports how the previous run ended (DMN-3). Call it after
// Lock and before this run's first MarkLive: holding the lock proves that
// whoever wrote a live marker is dead, so a live marker means a crash (pids
// are not compared; they are reused, and a containerised daemon is always
// pid 1).
func (d *Dir) PreviousRun() (PreviousRun, error) {
	if err := d.requireLock(); err != nil {
		return PreviousRun{}, err
	}
	m, found, err := d.ReadRunMarker()
	switch {
	case !found && err == nil:
		return PreviousRun{Outcome: OutcomeFirst, Detail: "no run marker: first run"}, nil
	case !found:
		return PreviousRun{}, err
	case err != nil:
		// Markers are written atomically, so this is not a torn write of
		// ours; not knowing, assume the worst.
		return PreviousRun{Outcome: OutcomeCrashed, Detail: "run marker unreadable: " + err.Error()}, nil
	case m.State == RunLive:
		return PreviousRun{Outcome: OutcomeCrashed, Marker: &m,
			Detail: fmt.Sprintf("pid %d died live in phase %s (run started %s, last marked %s)",
				m.Pid, m.Phase, m.StartedAt.Format(time.RFC3339), m.UpdatedAt.Format(time.RFC3339))}, nil
	}
	return PreviousRun{Outcome: OutcomeClean, Marker: &m,
		Detail: fmt.Sprintf("pid %d released the journal at %s", m.Pid, m.UpdatedAt.Format(time.RFC3339))}, nil
}

// holdRecord is the hold marker's content, for humans reading it.
type holdRecord struct {
	SetAt time.Time `json:"set_at"`
	Pid   int       `json:"pid"`
}

// SetHold writes the hold marker (DMN-4): a relaunched daemon comes up
// stopped until start. An existing marker is kept as it is.
func (d *Dir) SetHold() error {
	if err := d.requireLock(); err != nil {
		return err
	}
	if held, err := d.HoldPresent(); err != nil || held {
		return err
	}
	data, err := json.Marshal(holdRecord{SetAt: d.clock.Now().UTC(), Pid: os.Getpid()})
	if err != nil {
		return err
	}
	if err := writeFileAtomic(d.Control(), holdName, append(data, '\n')); err != nil {
		return fmt.Errorf("datadir %s: hold marker: %w", d.root, err)
	}
	return nil
}

// ClearHold removes the hold marker; absent is fine.
func (d *Dir) ClearHold() error {
	if err := d.requireLock(); err != nil {
		return err
	}
	if err := removeFileDurably(d.Control(), holdName); err != nil {
		return fmt.Errorf("datadir %s: hold marker: %w", d.root, err)
	}
	return nil
}

// HoldPresent reports whether the hold marker exists.
func (d *Dir) HoldPresent() (bool, error) {
	_, err := os.Lstat(d.HoldPath())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("datadir %s: hold marker: %w", d.root, err)
	}
	return true, nil
}

// SyncHold makes the hold marker match held (the lifecycle's State.Hold).
func (d *Dir) SyncHold(held bool) error {
	if held {
		return d.SetHold()
	}
	return d.ClearHold()
}
