package daemon

import (
	"net"
	"strconv"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/runtime/balancer"
	"github.com/engenho/engenho/runtime/journal"
)

// node answers stack validation's questions about this node (SVC-2). It
// only reads.
type node struct {
	d       *Daemon
	drivers map[string]drivers.Driver
	journal *journal.Journal
	key     stackfile.NodeKey
}

func (n *node) Driver(name string) (drivers.Driver, bool) {
	drv, ok := n.drivers[name]
	return drv, ok
}

// deployed calls fn for every service of every recorded stack.
func (n *node) deployed(fn func(stack string, svc stackfile.Service) bool) {
	states, err := n.journal.Stacks()
	if err != nil {
		return
	}
	for _, st := range states {
		def, err := stackfile.Unmarshal(st.Current.Definition, n.key)
		if err != nil {
			continue
		}
		for _, name := range def.Order {
			if fn(st.Stack, def.Services[name]) {
				return
			}
		}
	}
}

func (n *node) PortClaimedBy(port int) (stack, service string, ok bool) {
	n.deployed(func(st string, svc stackfile.Service) bool {
		for _, p := range svc.Published() {
			if p.Published == port {
				stack, service, ok = st, svc.Name, true
			}
		}
		return ok
	})
	return stack, service, ok
}

func (n *node) PortFree(hostIP string, port int) bool {
	return balancer.PortFree(net.JoinHostPort(hostIP, strconv.Itoa(port)))
}

func (n *node) HostClaimedBy(host string) (stack, service string, ok bool) {
	n.deployed(func(st string, svc stackfile.Service) bool {
		if svc.EdgeHost() == host {
			stack, service, ok = st, svc.Name, true
		}
		return ok
	})
	return stack, service, ok
}

func (n *node) Bin() string { return n.d.opts.Bin }
