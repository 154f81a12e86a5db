package balancer

import (
	"errors"
	"fmt"
	"syscall"
)

var (
	// ErrAddrInUse: the listen address is held by another socket (another
	// process, or another port of this balancer). Match with errors.Is.
	ErrAddrInUse = errors.New("address already in use")
	// ErrPortExists: a port of that name already listens.
	ErrPortExists = errors.New("port already listening")
	// ErrUnknownPort: no port of that name listens.
	ErrUnknownPort = errors.New("no such port")
	// ErrInvalid: bad arguments (empty name, duplicate backend id, ...).
	ErrInvalid = errors.New("invalid")
	// ErrClosed: the balancer has been closed.
	ErrClosed = errors.New("balancer closed")
)

// ListenError is a failure to listen on a port's address.
type ListenError struct {
	Name string // the port's name
	Addr string // the address asked for
	// Holder names this balancer's port that already holds Addr, if any.
	Holder string
	Err    error
}

func (e *ListenError) Error() string {
	msg := fmt.Sprintf("balancer port %s: listen on %s: ", e.Name, e.Addr)
	if e.Holder != "" {
		return msg + fmt.Sprintf("%v (held by port %s)", ErrAddrInUse, e.Holder)
	}
	if errors.Is(e.Err, syscall.EADDRINUSE) {
		return msg + ErrAddrInUse.Error()
	}
	return msg + e.Err.Error()
}

// Is makes errors.Is(err, ErrAddrInUse) true for a busy address.
func (e *ListenError) Is(target error) bool {
	return target == ErrAddrInUse && (e.Holder != "" || errors.Is(e.Err, syscall.EADDRINUSE))
}

func (e *ListenError) Unwrap() error { return e.Err }
