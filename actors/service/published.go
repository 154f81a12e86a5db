package service

import (
	"fmt"
	"net"
	"strings"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// openPorts makes the balancer listen on the published ports of the
// current definition, and on no other of this service's: a port the new
// definition no longer publishes, or publishes on another host address,
// is closed (its connections with it), so a redeploy that moves a port
// frees the old one (SVC-2, SVC-22). The balancer belongs to the node, so
// a restarted service actor finds its listeners still there.
func (a *Actor) openPorts() {
	if a.env.Ports == nil {
		return // a node without a balancer (some tests): nothing publishes
	}
	var next []portBinding
	for _, p := range a.current.Definition.Published() {
		next = append(next, portBinding{name: fmt.Sprintf("%s/%s/%d", a.stack, a.name, p.Published), listen: p.ListenAddr(), published: p.Published, target: p.Target})
	}
	for _, old := range a.ports {
		if b, ok := bindingOf(next, old.name); ok && b.listen == old.listen {
			continue
		}
		a.closePort(old.name)
	}
	// A listener an earlier incarnation of this actor left, for a port the
	// definition it now has no longer publishes, or publishes on another
	// host address.
	for _, name := range a.env.Ports.Names(fmt.Sprintf("%s/%s/", a.stack, a.name)) {
		b, ok := bindingOf(next, name)
		if addr, listening := a.env.Ports.Addr(name); !ok || listening && !sameAddr(addr.String(), b.listen) {
			a.closePort(name)
		}
	}
	a.ports = next
	a.listenPorts()
}

// listenPorts opens each port that does not listen yet. A failure is
// logged and told as an event once, until it changes or the port opens; the
// core's PortsDown makes the service failing while any lasts, and
// listenTimer tries again every portsRetry.
func (a *Actor) listenPorts() {
	if a.s.Removed {
		return // shutdown closed them; a pass after it must not reopen one
	}
	defer a.portsListening()
	for i := range a.ports {
		b := &a.ports[i]
		if _, ok := a.env.Ports.Addr(b.name); ok {
			b.listenErr = ""
			continue
		}
		err := a.env.Ports.Listen(b.name, b.listen)
		if err == nil {
			b.listenErr, b.heldBy = "", ""
			continue
		}
		b.heldBy = a.sibling(b.listen)
		if err.Error() != b.listenErr && b.heldBy == "" {
			a.h.Log().Error().Err(err).Str("listen", b.listen).Msg("cannot listen on a published port; tried again at every pass")
			supervise.Apply(a.h, a.shell, []step.Effect{step.Emit{Kind: messages.KindDeployFailed, Level: messages.LevelError, Message: err.Error()}})
		}
		b.listenErr = err.Error()
	}
}

// sibling names the service of this stack, other than this one, whose
// listener holds addr ("" when none does).
func (a *Actor) sibling(addr string) string {
	holder, ok := a.env.Ports.Holder(addr)
	if !ok || !strings.HasPrefix(holder, a.stack+"/") || strings.HasPrefix(holder, a.stack+"/"+a.name+"/") {
		return ""
	}
	parts := strings.SplitN(holder, "/", 3)
	return parts[0] + "/" + parts[1]
}

// portsListening tells the core which ports are down and arms the retry.
func (a *Actor) portsListening() {
	var down []string
	handOver := true
	for _, b := range a.ports {
		switch {
		case b.listenErr == "":
		case b.heldBy != "":
			down = append(down, fmt.Sprintf("published port %s: waiting for %s to let it go (tried again every %s)", b.listen, b.heldBy, portsRetry))
		default:
			handOver = false
			down = append(down, fmt.Sprintf("published port %s not listening (%s); free the address or publish another port (tried again every %s)", b.listen, b.listenErr, portsRetry))
		}
	}
	if len(down) > 0 && !a.timers.Armed(listenTimer) {
		a.timers.Arm(listenTimer, a.h.Clock().Now().Add(portsRetry))
	}
	d := strings.Join(down, "; ")
	if d != a.s.PortsDown {
		a.feed(PortsListening{Down: d, HandOver: d != "" && handOver})
	}
}

// targetOf is the port that published port p reaches on a replica of
// revision rev: while a rollout changes it, the old revision's replicas
// still serve on the old one.
func (a *Actor) targetOf(rev string, p portBinding) int {
	if rd, ok := a.defs[rev]; ok {
		for _, q := range rd.def.Ports { // not Published(): no slice per replica and pass
			if q.Published == p.published {
				return q.Target
			}
		}
	}
	return p.target
}

// sameAddr reports whether a listener bound at a is the one asked for as
// b: the same port and IP, any wildcard matching any other (Go reports a
// listener asked for on 0.0.0.0 as bound on [::]).
func sameAddr(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	ai, bi := net.ParseIP(ah), net.ParseIP(bh)
	return ap == bp && (ai.Equal(bi) || ai.IsUnspecified() && bi.IsUnspecified())
}

// closePort closes a listener this service no longer publishes.
func (a *Actor) closePort(name string) {
	if err := a.env.Ports.Close(name); err != nil {
		a.h.Log().Warn().Err(err).Str("port", name).Msg("closing a port no longer published")
	}
	delete(a.rotation, name)
	delete(a.applied, name)
}

func bindingOf(list []portBinding, name string) (portBinding, bool) {
	for _, b := range list {
		if b.name == name {
			return b, true
		}
	}
	return portBinding{}, false
}
