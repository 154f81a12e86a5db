package daemon

import (
	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/runtime/balancer"
)

// balancerPorts is the node's balancer as the service actors' Ports: the
// composition root connects the port the actors declare to the concrete
// balancer.
type balancerPorts struct{ *balancer.Balancer }

var _ service.Ports = balancerPorts{}

// SetBackends hands the rotation to the balancer in its own type.
func (p balancerPorts) SetBackends(name string, backends []service.Backend) error {
	var bs []balancer.Backend
	for _, b := range backends {
		bs = append(bs, balancer.Backend{ID: b.ID, Addr: b.Addr})
	}
	return p.Balancer.SetBackends(name, bs)
}
