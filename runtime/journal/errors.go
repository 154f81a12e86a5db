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
