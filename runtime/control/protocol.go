package control

import (
	"encoding/json"
	"fmt"

	"github.com/engenho/engenho/messages"
)

// Defaults of the server's limits (DMN-11, SEC-4).
const (
	// DefaultMaxRequest bounds one request line, newline excluded: 1 MiB.
	DefaultMaxRequest = 1 << 20
	// DefaultMaxResponse bounds one response line the client accepts. A
	// status of 10,000 replicas is a few MiB.
	DefaultMaxResponse = 256 << 20
	// DefaultMaxConns bounds concurrent connections.
	DefaultMaxConns = 64
	// DefaultMaxInFlight bounds requests in flight on one connection.
	DefaultMaxInFlight = 16
	// statusBatch is how many services one status line carries: status is
	// sent in batches so each line stays small and the client decodes one
	// batch while the server encodes the next (PERF-7).
	statusBatch = 50
	// maxBadLines is how many malformed lines in a row a connection may
	// send before it is closed: a connection that never sends a valid
	// request is garbage, not a client (CHS-2).
	maxBadLines = 64
)

// Op names a request.
type Op string

// The ops (DMN-12). OpCancel is the protocol's own: it ends a request in
// flight on the same connection (a follow stream, a wait).
const (
	OpStatus       Op = "status"
	OpTree         Op = "tree"
	OpWhy          Op = "why"
	OpEvents       Op = "events"
	OpStart        Op = "start"
	OpStop         Op = "stop"
	OpRestart      Op = "restart"
	OpRetry        Op = "retry"
	OpExit         Op = "exit"
	OpReconfigure  Op = "reconfigure"
	OpRestartChild Op = "restart-child"
	OpEpoch        Op = "epoch"
	OpReinit       Op = "reinit"
	OpApply        Op = "apply"
	OpRemove       Op = "remove"
	OpScale        Op = "scale"
	OpRollback     Op = "rollback"
	OpRedeploy     Op = "redeploy"
	OpServiceStop  Op = "service-stop"
	OpServiceStart Op = "service-start"
	OpServiceRetry Op = "service-retry"
	OpLogs         Op = "logs"
	OpChaos        Op = "chaos"
	OpHistory      Op = "history"
	OpCancel       Op = "cancel"
)

// Request is one line from a client: {"id": 7, "op": "status", "args": {...}}.
// ID is chosen by the client (a positive integer) and echoed in every line
// of the answer; several requests may be in flight on one connection.
type Request struct {
	ID   uint64          `json:"id"`
	Op   Op              `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Response is one line from the server. A request's answer is zero or more
// lines with More set (stream items: Event, Progress, Log, or a batch of
// Services for status), then exactly one final line carrying Result or
// Error. A line with ID 0 is about the
// connection itself (refused, busy, too_large, idle timeout, a line whose id
// could not be read).
type Response struct {
	ID       uint64                   `json:"id"`
	More     bool                     `json:"more,omitempty"`
	Event    *messages.Event          `json:"event,omitempty"`
	Progress *ApplyProgress           `json:"progress,omitempty"`
	Log      *LogChunk                `json:"log,omitempty"`
	Services []messages.ServiceStatus `json:"services,omitempty"`
	Result   json.RawMessage          `json:"result,omitempty"`
	Error    *Error                   `json:"error,omitempty"`
}

// outLine is what the server encodes: Response with Result as a value, so
// a result is encoded once, straight into the line.
type outLine struct {
	ID       uint64                   `json:"id"`
	More     bool                     `json:"more,omitempty"`
	Event    *messages.Event          `json:"event,omitempty"`
	Progress *ApplyProgress           `json:"progress,omitempty"`
	Log      *LogChunk                `json:"log,omitempty"`
	Services []messages.ServiceStatus `json:"services,omitempty"`
	Result   any                      `json:"result,omitempty"`
	Error    *Error                   `json:"error,omitempty"`
}

// Code is an error's type on the wire. Clients match codes, never messages.
type Code string

const (
	// CodeBadRequest: the line is not a valid request (bad JSON, missing id
	// or op, unknown or mistyped field, invalid name). The connection
	// keeps working.
	CodeBadRequest Code = "bad_request"
	// CodeTooLarge: the request line exceeds the limit; the connection is
	// closed after this line (the rest of the line cannot be skipped
	// reliably).
	CodeTooLarge Code = "too_large"
	// CodeUnknownOp: the op is not one the server knows.
	CodeUnknownOp Code = "unknown_op"
	// CodeNotFound: the stack, service, slot or actor path does not exist.
	CodeNotFound Code = "not_found"
	// CodeRefused: the daemon will not do this: peer not allowed, a
	// lifecycle transition refused in the current state, chaos disabled.
	CodeRefused Code = "refused"
	// CodeConflict: the request raced with a change (the stop epoch moved,
	// a duplicate request id in flight).
	CodeConflict Code = "conflict"
	// CodeInvalid: the request is well formed but its content is rejected
	// (a stack file that does not parse or validate).
	CodeInvalid Code = "invalid"
	// CodeBusy: too many connections, or too many requests in flight on
	// this connection.
	CodeBusy Code = "busy"
	// CodeTimeout: the connection was idle too long and is closed.
	CodeTimeout Code = "timeout"
	// CodeCancelled: the request was cancelled by the client.
	CodeCancelled Code = "cancelled"
	// CodeUnavailable: the daemon is shutting down, the runtime is not in a
	// state that can answer (no tree while stopped), or its journal's disk
	// is short of the reserve (nothing was recorded; retry once there is
	// room).
	CodeUnavailable Code = "unavailable"
	// CodeInternal: the handler failed unexpectedly.
	CodeInternal Code = "internal"
)

// Error is a typed error on the wire: {"code": "...", "message": "..."}.
// Details carries structured context (for a refused lifecycle transition:
// state, event, reason). It is also a Go error: handlers return one to
// choose the code, and the client returns the one it received.
type Error struct {
	Code    Code              `json:"code"`
	Message string            `json:"message"`
	Details map[string]string `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is matches another *Error with the same code, so the code sentinels below
// work with errors.Is.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is: errors.Is(err, control.ErrNotFound).
var (
	ErrBadRequest  = &Error{Code: CodeBadRequest}
	ErrTooLarge    = &Error{Code: CodeTooLarge}
	ErrUnknownOp   = &Error{Code: CodeUnknownOp}
	ErrNotFound    = &Error{Code: CodeNotFound}
	ErrRefused     = &Error{Code: CodeRefused}
	ErrConflict    = &Error{Code: CodeConflict}
	ErrInvalid     = &Error{Code: CodeInvalid}
	ErrBusy        = &Error{Code: CodeBusy}
	ErrTimeout     = &Error{Code: CodeTimeout}
	ErrCancelled   = &Error{Code: CodeCancelled}
	ErrUnavailable = &Error{Code: CodeUnavailable}
	ErrInternal    = &Error{Code: CodeInternal}
)
