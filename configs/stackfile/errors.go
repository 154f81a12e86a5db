package stackfile

import (
	"errors"
	"fmt"
	"strings"
)

// Kinds of problem. Every Problem carries one in Err; match with
// errors.Is on the *ParseError or *ValidationError, never by string.
var (
	// ErrSyntax: the file is not YAML, or not one YAML document.
	ErrSyntax = errors.New("syntax")
	// ErrUnknownKey: a key this format does not have.
	ErrUnknownKey = errors.New("unknown key")
	// ErrType: the wrong kind of value (a list where a map belongs, ...).
	ErrType = errors.New("wrong type")
	// ErrValue: the right kind of value, but not an allowed one.
	ErrValue = errors.New("bad value")
	// ErrMissing: a required key is absent.
	ErrMissing = errors.New("missing")
	// ErrDependency: depends_on names no service, itself, or a cycle.
	ErrDependency = errors.New("dependency")
	// ErrWarning: not an error; a Stack's (or ParseError's) Warnings
	// carry it.
	ErrWarning = errors.New("warning")

	// ErrDriverMissing: the service's driver is not on this node.
	ErrDriverMissing = errors.New("driver missing")
	// ErrDriverRefused: the driver's Validate refused the instance spec;
	// the driver's own error (drivers.ErrInvalid, ...) is wrapped too.
	ErrDriverRefused = errors.New("driver refused")
	// ErrPortClaimed: another stack's service publishes the port.
	ErrPortClaimed = errors.New("port claimed")
	// ErrPortBusy: something else on the node listens on the port.
	ErrPortBusy = errors.New("port busy")
	// ErrHostClaimed: another stack's service has the edge host name.
	ErrHostClaimed = errors.New("host claimed")
)

// Problem is one thing wrong with a stack, and where.
type Problem struct {
	// File is the stack file; empty when the stack has no source.
	File string
	// Line and Column are 1-based; 0 when unknown (a stack read back
	// from the journal).
	Line, Column int
	// Key is the dotted path of the offending key:
	// services.api.deploy.replicas, services.api.ports[1].
	Key string
	// Msg says what is wrong. It never holds an env value.
	Msg string
	// Err is the kind (ErrValue, ErrPortClaimed, ...), possibly wrapping
	// a cause such as a driver error.
	Err error
}

// String is "FILE:LINE: KEY: MSG", leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// maxShown caps how many problems an error message lists.
const maxShown = 50

// ParseError is every problem Parse found, in file order.
type ParseError struct {
	Problems []Problem
	// Warnings are what the file would have loaded with.
	Warnings []Problem
	// partial holds the services of a refused file that had no problem,
	// for ValidateRest.
	partial *Stack
}

func (e *ParseError) Error() string { return joinProblems(e.Problems) }

// StackName is the stack a refused file names, as Parse settled it (its
// top-level name, else its file name's), or "" when that is no valid
// stack name.
func (e *ParseError) StackName() string {
	if e.partial == nil || !ValidName(e.partial.Name) {
		return ""
	}
	return e.partial.Name
}

// Unwrap exposes the kinds, so errors.Is(err, ErrUnknownKey) works.
func (e *ParseError) Unwrap() []error { return kinds(e.Problems) }

// ValidationError is every reason a stack cannot run on this node (SVC-2).
type ValidationError struct {
	Stack    string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("stack %s refused: %s", e.Stack, joinProblems(e.Problems))
}

// Unwrap exposes the kinds and causes, so errors.Is(err, ErrPortClaimed)
// and errors.Is(err, drivers.ErrInvalid) work.
func (e *ValidationError) Unwrap() []error { return kinds(e.Problems) }

func joinProblems(ps []Problem) string {
	lines := make([]string, 0, min(len(ps), maxShown)+1)
	for i, p := range ps {
		if i == maxShown {
			lines = append(lines, fmt.Sprintf("... and %d more", len(ps)-maxShown))
			break
		}
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}

func kinds(ps []Problem) []error {
	out := make([]error, 0, len(ps))
	for _, p := range ps {
		if p.Err != nil {
			out = append(out, p.Err)
		}
	}
	return out
}

// scrubbed is an error whose text had secret values replaced; it still
// unwraps to the original so errors.Is keeps working.
type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// scrub hides every secret in err's text (SEC-2): a driver's message is
// outside our control.
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, Redaction)
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

// kindError joins a kind and a cause for Problem.Err.
type kindError struct {
	kind  error
	cause error
}

func (k *kindError) Error() string   { return k.kind.Error() + ": " + k.cause.Error() }
func (k *kindError) Unwrap() []error { return []error{k.kind, k.cause} }
