package balancer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers/clock"
)

// Defaults for Options.
const (
	DefaultDrainTimeout = 10 * time.Second // spec SVC-16
	DefaultDialTimeout  = 2 * time.Second
	DefaultSuspectFor   = 5 * time.Second
)

// Options configure a Balancer. Zero fields take the defaults.
type Options struct {
	Clock  clock.Clock    // default clock.New()
	Logger zerolog.Logger // default: disabled
	// DrainTimeout is how long a backend leaving the rotation through
	// SetBackends keeps its connections (Drain takes its own timeout).
	DrainTimeout time.Duration
	// DialTimeout bounds one dial to a backend.
	DialTimeout time.Duration
	// SuspectFor is how long a backend that refused a dial is tried only
	// when no unsuspected backend is left.
	SuspectFor time.Duration
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.SuspectFor <= 0 {
		o.SuspectFor = DefaultSuspectFor
	}
	return o
}

// Backend is one in-rotation replica: its instance id and the host address
// that reaches the published target port.
type Backend struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// Balancer serves published ports. It is safe for concurrent use.
type Balancer struct {
	opts Options

	mu     sync.Mutex
	ports  map[string]*port
	closed bool
}

// New returns a Balancer with no ports.
func New(opts Options) *Balancer {
	return &Balancer{opts: opts.withDefaults(), ports: map[string]*port{}}
}

// Listen starts serving port name on addr ("127.0.0.1:8080", "0.0.0.0:8080",
// ":8080"). Until SetBackends gives it backends, connections are closed at
// once. A busy address returns a *ListenError matching ErrAddrInUse.
func (b *Balancer) Listen(name, addr string) error {
	if name == "" {
		return fmt.Errorf("balancer: listen on %s: %w: empty port name", addr, ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("balancer port %s: %w", name, ErrClosed)
	}
	if _, ok := b.ports[name]; ok {
		return fmt.Errorf("balancer port %s: %w", name, ErrPortExists)
	}
	if holder, ok := b.holderLocked(addr); ok {
		return &ListenError{Name: name, Addr: addr, Holder: holder, Err: ErrAddrInUse}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &ListenError{Name: name, Addr: addr, Err: err}
	}
	p := newPort(name, addr, ln, b.opts)
	b.ports[name] = p
	p.start()
	b.opts.Logger.Info().Str("port", name).Str("addr", ln.Addr().String()).Msg("balancer listening")
	return nil
}

// Addr returns the address port name actually listens on (useful with
// port 0).
func (b *Balancer) Addr(name string) (net.Addr, bool) {
	p, err := b.port(name)
	if err != nil {
		return nil, false
	}
	return p.ln.Addr(), true
}

// SetBackends makes backends the rotation of port name. Backends are
// matched by ID and Addr: one kept keeps its connections and counts; one
// no longer listed (or listed with a new Addr) leaves the rotation and is
// drained for Options.DrainTimeout. IDs must be unique and Addrs non-empty;
// a bad list changes nothing.
func (b *Balancer) SetBackends(name string, backends []Backend) error {
	seen := make(map[string]bool, len(backends))
	for _, be := range backends {
		if be.ID == "" || be.Addr == "" {
			return fmt.Errorf("balancer port %s: %w: backend %q has an empty id or address", name, ErrInvalid, be.ID)
		}
		if seen[be.ID] {
			return fmt.Errorf("balancer port %s: %w: backend %q listed twice", name, ErrInvalid, be.ID)
		}
		seen[be.ID] = true
	}
	p, err := b.port(name)
	if err != nil {
		return err
	}
	p.setBackends(backends)
	return nil
}

// Drain takes backend id of port name out of rotation at once. Its open
// connections get up to timeout (<= 0: DefaultDrainTimeout) to finish and
// are then closed. The channel closes when no connection to it remains.
// Draining an id that is not in rotation returns its running drain's
// channel, or a closed channel when there is nothing to drain. A later
// SetBackends that lists the id puts it back in rotation.
func (b *Balancer) Drain(name, id string, timeout time.Duration) <-chan struct{} {
	if timeout <= 0 {
		timeout = DefaultDrainTimeout
	}
	p, err := b.port(name)
	if err != nil {
		return closedChan()
	}
	return p.drain(id, timeout)
}

// Close stops port name: the listener closes, every connection is closed,
// running drains complete, and Close returns once its goroutines are gone.
func (b *Balancer) Close(name string) error {
	b.mu.Lock()
	p, ok := b.ports[name]
	delete(b.ports, name)
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("balancer port %s: %w", name, ErrUnknownPort)
	}
	p.close()
	b.opts.Logger.Info().Str("port", name).Msg("balancer port closed")
	return nil
}

// Shutdown closes every port and refuses new ones.
func (b *Balancer) Shutdown() {
	b.mu.Lock()
	b.closed = true
	ports := b.ports
	b.ports = map[string]*port{}
	b.mu.Unlock()
	for _, p := range ports {
		p.close()
	}
}

// Stats returns port name's counters.
func (b *Balancer) Stats(name string) (PortStats, bool) {
	p, err := b.port(name)
	if err != nil {
		return PortStats{}, false
	}
	return p.stats(), true
}

// Names lists the ports whose names start with prefix, sorted.
func (b *Balancer) Names(prefix string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for name := range b.ports {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// AllStats returns every port's counters, by name.
func (b *Balancer) AllStats() []PortStats {
	b.mu.Lock()
	ports := make([]*port, 0, len(b.ports))
	for _, p := range b.ports {
		ports = append(ports, p)
	}
	b.mu.Unlock()
	out := make([]PortStats, 0, len(ports))
	for _, p := range ports {
		out = append(out, p.stats())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Holder reports which port of this balancer holds an address that
// overlaps addr (same port number, and the same host or a wildcard on
// either side), for validation (SVC-2): a service may re-claim its own port.
func (b *Balancer) Holder(addr string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.holderLocked(addr)
}

func (b *Balancer) holderLocked(addr string) (string, bool) {
	for name, p := range b.ports {
		if overlaps(p.addr, addr) {
			return name, true
		}
	}
	return "", false
}

func (b *Balancer) port(name string) (*port, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.ports[name]
	if !ok {
		return nil, fmt.Errorf("balancer port %s: %w", name, ErrUnknownPort)
	}
	return p, nil
}

// PortFree reports whether addr can be listened on now. It binds and
// releases the address, so it is a snapshot: validation (SVC-2) uses it,
// and Listen still reports a lost race as ErrAddrInUse.
func PortFree(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// overlaps reports whether two listen addresses would collide.
func overlaps(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	return ha == hb || isWildcard(ha) || isWildcard(hb)
}

func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// errorsIsClosed reports a listener or connection closed under us.
func errorsIsClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled)
}
