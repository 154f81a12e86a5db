package ports

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
)

// ErrExhausted is the kind of a Take that found no free port in the range.
var ErrExhausted = errors.New("no free port left in the range")

// Probe checks that a port can be bound now; an error that is
// syscall.EADDRINUSE means someone else holds it.
type Probe func(port int) error

// ListenProbe binds 127.0.0.1:PORT and closes it again at once (the
// workload binds it next; in between someone else can in principle take
// it, as with the kernel's pick).
func ListenProbe(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// Allocator is the shell around the core: one per node, shared by every
// service and the process driver. Safe for concurrent use.
type Allocator struct {
	mu    sync.Mutex
	s     State
	probe Probe
}

// New is an allocator over r that probes with probe (ListenProbe when nil).
func New(r Range, probe Probe) *Allocator {
	if probe == nil {
		probe = ListenProbe
	}
	return &Allocator{s: NewState(r), probe: probe}
}

// Range is the allocator's range.
func (a *Allocator) Range() Range { return a.s.Range }

// Take hands out the next free port: the first candidate (Candidates) that
// the probe can bind. A candidate in use by someone else is skipped; any
// other probe error ends the walk. With none left it fails with
// ErrExhausted ("no free port left in the range LOW-HIGH").
func (a *Allocator) Take() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range Candidates(a.s) {
		err := a.probe(p)
		if err == nil {
			a.s = Take(a.s, p)
			return p, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return 0, fmt.Errorf("probing port %d: %w", p, err)
		}
	}
	return 0, fmt.Errorf("%w %s", ErrExhausted, a.s.Range)
}

// Adopt records ports held by instances that already exist as in use
// (their addresses come from the driver's status after a daemon restart).
func (a *Allocator) Adopt(ports ...int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range ports {
		a.s = Adopt(a.s, p)
	}
}

// Release frees ports that were handed out or adopted; a port not in use
// is ignored.
func (a *Allocator) Release(ports ...int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range ports {
		a.s = Release(a.s, p)
	}
}

// InUse says whether p is recorded as in use.
func (a *Allocator) InUse(p int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.s.InUse[p]
}

// Kernel hands out the kernel's pick of a free loopback port (listen on
// 127.0.0.1:0, then close) and keeps no state. It is what a caller without
// a configured range gets (tests that build a service actor or a process
// driver by hand); the daemon always uses an Allocator.
type Kernel struct{}

// Take asks the kernel for a free loopback port.
func (Kernel) Take() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("allocating a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Adopt does nothing: the kernel knows which ports are bound.
func (Kernel) Adopt(...int) {}

// Release does nothing.
func (Kernel) Release(...int) {}
