package drivers

import (
	"errors"
	"fmt"
)

// Kinds of driver error. Match them with errors.Is, never by string.
var (
	ErrNotFound    = errors.New("not found")
	ErrTransient   = errors.New("transient")
	ErrInvalid     = errors.New("invalid")
	ErrUnsupported = errors.New("unsupported")
)

// Error is a driver failure with its operation, instance and kind.
type Error struct {
	Driver   string
	Op       string
	Instance string
	Kind     error // one of the Err* kinds
	Err      error // the cause, may be nil
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s %s %s: %v", e.Driver, e.Op, e.Instance, e.Kind)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrNotFound) and the like work.
func (e *Error) Is(target error) bool { return target == e.Kind }

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error of the given kind.
func Errorf(driver, op, instance string, kind error, format string, args ...any) error {
	var cause error
	if format != "" {
		cause = fmt.Errorf(format, args...)
	}
	return &Error{Driver: driver, Op: op, Instance: instance, Kind: kind, Err: cause}
}

// Wrap builds an *Error of the given kind around cause.
func Wrap(driver, op, instance string, kind error, cause error) error {
	return &Error{Driver: driver, Op: op, Instance: instance, Kind: kind, Err: cause}
}
