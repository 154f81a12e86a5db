package treetest

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/engenho/engenho/actors/service"
)

// Ports is an in-memory service.Ports: it records each published port's
// listen address and rotation and never binds a socket, so trees in tests
// can publish the same port side by side. Within one Ports, as on a node,
// a listen address taken by one name refuses another.
type Ports struct {
	mu        sync.Mutex
	listening map[string]string
	rotation  map[string][]service.Backend
	// fail, when set, is what SetBackends returns (SVC-30): the balancer
	// refusing a rotation change. onSet sees every SetBackends call.
	fail  error
	onSet func(name string, backends []service.Backend, err error)
}

// Fail makes every later SetBackends fail with err (nil: succeed again),
// as a balancer whose port was closed under the service (SVC-30).
func (p *Ports) Fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = err
}

// OnSet calls fn with every SetBackends call and its result, under the
// Ports' lock (fn must not call back into it).
func (p *Ports) OnSet(fn func(name string, backends []service.Backend, err error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onSet = fn
}

var _ service.Ports = (*Ports)(nil)

// NewPorts returns a Ports with nothing listening.
func NewPorts() *Ports {
	return &Ports{listening: map[string]string{}, rotation: map[string][]service.Backend{}}
}

// addr is a listen address as net.Addr.
type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

func (p *Ports) Listen(name, listen string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.listening[name]; ok {
		return fmt.Errorf("port %s: already listening", name)
	}
	for other, at := range p.listening {
		if at == listen {
			return fmt.Errorf("port %s: listen %s: address in use (by %s)", name, listen, other)
		}
	}
	p.listening[name] = listen
	return nil
}

func (p *Ports) Addr(name string) (net.Addr, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.listening[name]
	if !ok {
		return nil, false
	}
	return addr(a), true
}

func (p *Ports) SetBackends(name string, backends []service.Backend) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.fail
	if _, ok := p.listening[name]; !ok {
		err = fmt.Errorf("port %s: not listening", name)
	}
	if p.onSet != nil {
		p.onSet(name, append([]service.Backend(nil), backends...), err)
	}
	if err != nil {
		return err
	}
	p.rotation[name] = append([]service.Backend(nil), backends...)
	return nil
}

// Drain takes id out of name's rotation; nothing is connected, so it is
// drained at once.
func (p *Ports) Drain(name, id string, _ time.Duration) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	var kept []service.Backend
	for _, b := range p.rotation[name] {
		if b.ID != id {
			kept = append(kept, b)
		}
	}
	p.rotation[name] = kept
	done := make(chan struct{})
	close(done)
	return done
}

func (p *Ports) Close(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.listening[name]; !ok {
		return fmt.Errorf("port %s: not listening", name)
	}
	delete(p.listening, name)
	delete(p.rotation, name)
	return nil
}

// Holder names the listener on exactly addr (the in-memory Ports knows no
// overlap of wildcards).
func (p *Ports) Holder(addr string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, at := range p.listening {
		if at == addr {
			return name, true
		}
	}
	return "", false
}

// Names lists the listening names that start with prefix, sorted.
func (p *Ports) Names(prefix string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for name := range p.listening {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Rotation returns a copy of name's rotation and whether name listens.
func (p *Ports) Rotation(name string) ([]service.Backend, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.listening[name]
	return append([]service.Backend(nil), p.rotation[name]...), ok
}
