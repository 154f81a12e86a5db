package journal

import (
	"errors"
	"fmt"
)

var (
	// ErrLocked: another process (or another Journal in this process) has
	// the directory open. The error is a *LockedError.
	ErrLocked = errors.New("journal directory is locked")
	// ErrClosed: the journal was closed.
	ErrClosed = errors.New("journal is closed")
	// ErrInvalid: a record or name given to the journal is not acceptable;
	// the wrapping error says which field and why. Nothing was written.
	ErrInvalid = errors.New("invalid journal input")
	// ErrNoPrevious: a rollback was asked for a stack with no previous
	// deployment.
	ErrNoPrevious = errors.New("no previous deployment")
	// ErrNotFound: the record named does not exist.
	ErrNotFound = errors.New("not found")
	// ErrEventLogFailed: an event batch could not be committed; the event
	// log refuses further appends so that no sequence number can be issued
	// twice. The daemon must reopen the journal.
	ErrEventLogFailed = errors.New("event log failed")
)

// LockedError says which directory is locked and, when badger's pid file
// names it, by which process.
type LockedError struct {
	Dir string
	PID int // 0 when unknown
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("journal %s is in use by process %d", e.Dir, e.PID)
	}
	return fmt.Sprintf("journal %s is in use by another process", e.Dir)
}

func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// invalid builds an ErrInvalid naming the field and the reason.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid)
}

// Damage: what Check (or a read) found wrong with the journal's files.
var (
	// ErrCorrupt: a file of the journal is damaged, missing or not the
	// journal's; badger would crash, or silently lose records, on it. The
	// error is a *DamageError naming the file. Retrying does not help:
	// `engenho reinit journal` moves it aside.
	ErrCorrupt = errors.New("journal is damaged")
	// ErrUnwritable: the journal's directory or one of its files cannot be
	// written (a read-only mount, chattr +i, the wrong owner). The error is
	// a *DamageError naming it.
	ErrUnwritable = errors.New("journal is not writable")
)

// DamageKind says which of the two a DamageError is.
type DamageKind string

const (
	DamageCorrupt    DamageKind = "corrupt"
	DamageUnwritable DamageKind = "unwritable"
)

// DamageError names a damaged journal file and what is wrong with it.
type DamageError struct {
	Kind DamageKind `json:"kind"`
	// Dir is the journal directory.
	Dir string `json:"dir"`
	// File is the damaged file (absolute); empty when the damage is not in
	// one file (then Dir is the place to look).
	File   string `json:"file,omitempty"`
	Reason string `json:"reason"`
}

func (e *DamageError) Error() string {
	where := e.File
	if where == "" {
		where = e.Dir
	}
	if where == "" {
		return "journal: " + e.Reason
	}
	return "journal " + where + ": " + e.Reason
}

func (e *DamageError) Is(target error) bool {
	switch e.Kind {
	case DamageUnwritable:
		return target == ErrUnwritable
	default:
		return target == ErrCorrupt
	}
}

// damaged builds the DamageError of a corrupt file.
func damaged(dir, file, format string, args ...any) *DamageError {
	return &DamageError{Kind: DamageCorrupt, Dir: dir, File: file, Reason: fmt.Sprintf(format, args...)}
}

// decodeError is a record whose value does not decode: the bytes on disk
// are not what the journal wrote.
func decodeError(key []byte, err error) error {
	return &DamageError{Kind: DamageCorrupt, Reason: fmt.Sprintf("record %s does not decode: %v", key, err)}
}
