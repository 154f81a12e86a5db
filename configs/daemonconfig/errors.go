package daemonconfig

import (
	"errors"
	"strconv"
	"strings"
)

// Kinds of config errors; match with errors.Is. Every error Load returns is
// a config error: the daemon holds a failed boot on it (DMN-7).
var (
	// ErrRead: the file could not be read.
	ErrRead = errors.New("cannot read the config file")
	// ErrEmpty: the file holds no settings (an empty or whitespace-only
	// file, or only comments). Write `{}` for all defaults.
	ErrEmpty = errors.New("empty config file")
	// ErrSyntax: the file is not valid YAML (a truncated file usually
	// ends up here).
	ErrSyntax = errors.New("config syntax error")
	// ErrUnknownKey: a key that is not part of the schema.
	ErrUnknownKey = errors.New("unknown config key")
	// ErrInvalid: a value of the wrong type or out of range.
	ErrInvalid = errors.New("invalid config value")
)

// Error is one problem with a config file. It names the file, and the key
// and line when there is one. A value is quoted only when it is not a
// secret (SEC-2).
type Error struct {
	File string
	Line int    // 1-based; 0 when unknown (a default or an env value)
	Key  string // dotted key, e.g. "edge.listen"; "" for the whole file
	Env  string // the variable the value came from, when it did
	Kind error  // one of the Err* kinds
	Msg  string
	Err  error // the underlying cause, e.g. from os.ReadFile
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config ")
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		if e.Env != "" {
			b.WriteString(" (from ")
			b.WriteString(e.Env)
			b.WriteString(")")
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap gives the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// Errors is every problem found in one file, in file order; Load reports
// them all at once so an operator fixes them in one pass.
type Errors []*Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap makes errors.Is(err, ErrInvalid) and errors.As(err, **Error)
// look at every problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
