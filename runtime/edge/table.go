package edge

import (
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/host"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
)

// ServiceRoute routes the host of a non-hibernating service (x-engenho.host)
// to the service's in-rotation replicas on target port Port.
type ServiceRoute struct {
	Host    string
	Stack   string
	Service string
	Port    int
}

// routes is one immutable version of the table.
type routes struct {
	hosts    map[string]host.Route
	services map[string]ServiceRoute
	byStack  map[string][]string // stack -> its service route hosts
}

// Table is the edge's routing table: readers load the current version with
// one atomic read; writers (the host actors, the deployer) replace it
// copy-on-write (SUP-3).
type Table struct {
	mu  sync.Mutex // serialises writers only
	cur atomic.Pointer[routes]
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{}
	t.cur.Store(&routes{hosts: map[string]host.Route{}, services: map[string]ServiceRoute{}, byStack: map[string][]string{}})
	return t
}

func (t *Table) update(fn func(r *routes)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Load()
	next := &routes{hosts: maps.Clone(old.hosts), services: maps.Clone(old.services), byStack: maps.Clone(old.byStack)}
	fn(next)
	t.cur.Store(next)
}

// SetHost publishes (or replaces) a hibernating host's route.
func (t *Table) SetHost(r host.Route) {
	t.update(func(n *routes) { n.hosts[r.Host] = r })
}

// RemoveHost drops the route of host name if it is still the one pid published (a
// successor's route, or a stand-in for a restarting host, is kept); a nil
// pid drops whatever route name has.
func (t *Table) RemoveHost(name string, pid *actor.PID) {
	t.update(func(n *routes) {
		if r, ok := n.hosts[name]; ok && (pid == nil || (r.PID != nil && r.PID.Equals(pid))) {
			delete(n.hosts, name)
		}
	})
}

// SetServices replaces the service routes of stack (nil or empty removes
// them). The deployer calls it whenever a stack's definition changes.
func (t *Table) SetServices(stack string, rs []ServiceRoute) {
	t.update(func(n *routes) {
		for _, h := range n.byStack[stack] {
			if n.services[h].Stack == stack {
				delete(n.services, h)
			}
		}
		delete(n.byStack, stack)
		var hosts []string
		for _, r := range rs {
			r.Stack = stack
			n.services[r.Host] = r
			hosts = append(hosts, r.Host)
		}
		if len(hosts) > 0 {
			n.byStack[stack] = hosts
		}
	})
}

// SetStack publishes the service routes of a stack definition: every
// non-hibernating service with x-engenho.host, to its first target port.
func (t *Table) SetStack(st stackfile.Stack) { t.SetServices(st.Name, ServiceRoutes(st)) }

// RemoveStack drops the service routes of stack.
func (t *Table) RemoveStack(stack string) { t.SetServices(stack, nil) }

// ServiceRoutes lists the service routes of a stack definition.
func ServiceRoutes(st stackfile.Stack) []ServiceRoute {
	var out []ServiceRoute
	for _, name := range st.Order {
		svc := st.Services[name]
		if svc.Hibernate != nil || svc.Engenho.Host == "" || len(svc.Ports) == 0 {
			continue
		}
		out = append(out, ServiceRoute{Host: svc.Engenho.Host, Stack: st.Name, Service: name, Port: svc.Ports[0].Target})
	}
	return out
}

// lookup finds host's route: a hibernating host first, then a service.
func (t *Table) lookup(name string) (h host.Route, s ServiceRoute, kind int) {
	r := t.cur.Load()
	if hr, ok := r.hosts[name]; ok {
		return hr, ServiceRoute{}, routeHost
	}
	if sr, ok := r.services[name]; ok {
		return host.Route{}, sr, routeService
	}
	return host.Route{}, ServiceRoute{}, routeNone
}

const (
	routeNone = iota
	routeHost
	routeService
)

// Host returns the hibernating route of host name.
func (t *Table) Host(name string) (host.Route, bool) {
	r, ok := t.cur.Load().hosts[name]
	return r, ok
}

// Hosts returns the status of every hibernating host, sorted by host.
func (t *Table) Hosts() []messages.HostStatus {
	r := t.cur.Load()
	out := make([]messages.HostStatus, 0, len(r.hosts))
	for _, h := range r.hosts {
		out = append(out, h.Status)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// Services returns every service route, sorted by host.
func (t *Table) Services() []ServiceRoute {
	r := t.cur.Load()
	out := make([]ServiceRoute, 0, len(r.services))
	for _, s := range r.services {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// CanonicalHost reads a request's Host header as a route key: lower case,
// without a port or a trailing dot. ok is false for anything that is not a
// DNS name, so it can never match a route by accident.
func CanonicalHost(h string) (string, bool) {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if !stackfile.ValidHost(h) {
		return "", false
	}
	return h, true
}
