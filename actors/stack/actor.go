package stack

import (
	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Env is what a stack actor uses of the node: nothing of its own; it hands
// the same environment to every service actor it starts. The root, its
// parent, knows only this name (a parent knows only its direct children).
type Env = service.Env

// Actor is the stack actor.
type Actor struct {
	h       *supervise.Handle
	env     Env
	kids    *supervise.Children
	desired messages.ApplyStack
	// known lists the services that have an actor, in start order.
	known     map[string]bool
	hosts     map[string]bool // services the activator runs
	summaries map[string]messages.ServiceSummary
	// dependents maps a service to the services that depend on it, from
	// desired (SVC-18): a summary is relayed without a look at every
	// service (PERF-3).
	dependents map[string][]string
	removing   bool
	// announced is the phase this actor last announced (SVC-26); the
	// node's quiet filter keeps a restarted actor from saying it twice.
	announced string
}

// Produce returns the producer of a stack actor. desired is read when the
// actor (re)starts, so a restarted stack actor gets the latest state, and
// one restarted while removing goes on removing.
func Produce(env Env, desired func() (d messages.ApplyStack, removing bool)) supervise.Producer {
	return func(h *supervise.Handle) actor.Receiver {
		d, removing := desired()
		return &Actor{h: h, env: env, desired: d, removing: removing, known: map[string]bool{}, hosts: map[string]bool{}, summaries: map[string]messages.ServiceSummary{}}
	}
}

func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.kids = a.h.Supervise(supervise.Options{})
		a.apply(a.desired)
		if a.removing {
			a.remove()
		}
	case messages.ApplyStack:
		if a.removing {
			a.h.Log().Warn().Msg("stack is being removed; apply ignored")
			return
		}
		a.apply(m)
	case messages.RemoveStack:
		a.remove()
	case messages.ToService:
		if in, ok := m.Msg.(messages.ServiceIntent); ok {
			// Kept for a restarted service actor (SVC-10, SUP-9).
			a.desired.Stopped = withStopped(a.desired.Stopped, m.Service, in.Stopped)
		}
		if pid := a.kids.PID(childName(m.Service)); pid != nil {
			c.Engine().SendWithSender(pid, m.Msg, c.Sender())
		}
	case messages.ServiceSummary:
		a.summary(m)
	}
}

func childName(service string) string { return "service:" + service }

// withStopped returns a copy of stopped with service's intent set: the
// map may be shared with the message it came in.
func withStopped(stopped map[string]bool, service string, on bool) map[string]bool {
	out := make(map[string]bool, len(stopped)+1)
	for k, v := range stopped {
		out[k] = v
	}
	if on {
		out[service] = true
	} else {
		delete(out, service)
	}
	return out
}

// WithStopped is withStopped for the root, which keeps each stack's
// desired state for a restarted stack actor.
func WithStopped(stopped map[string]bool, service string, on bool) map[string]bool {
	return withStopped(stopped, service, on)
}

// apply reconciles the service actors with desired: new services start,
// existing ones get their definition, dropped ones retire (SVC-5).
func (a *Actor) apply(d messages.ApplyStack) {
	a.desired = d
	def := d.Current.Definition
	a.dependents = map[string][]string{}
	for _, name := range def.Order {
		for _, dep := range def.Services[name].DependsOn {
			a.dependents[dep.Service] = append(a.dependents[dep.Service], name)
		}
	}
	for _, name := range def.Order {
		svc := def.Services[name]
		if svc.Hibernate != nil || svc.Standalone() {
			if a.known[name] {
				// A service that turned hibernating or standalone: its
				// service actor retires its replicas and ends; the
				// activator runs it from now on.
				a.send(name, messages.ServiceRemove{})
				delete(a.known, name)
			}
			a.hosts[name] = true
			a.toRoot(messages.HostDefinition{Stack: d.Stack, Service: name, Deployment: d.Current.ID,
				Revision: d.Current.Revision(name), Definition: svc, Stopped: d.Stopped[name]})
			continue
		}
		msg := a.definition(name)
		if a.known[name] {
			a.kids.SetLadder(childName(name), ladder.ForActors(svc.Engenho))
			a.send(name, msg)
			a.send(name, messages.ServiceIntent{Stopped: d.Stopped[name]})
			continue
		}
		a.known[name] = true
		spec := supervise.ChildSpec{Name: childName(name), Restart: supervise.Transient, Produce: a.produceService(name), Ladder: ladder.ForActors(svc.Engenho)}
		if err := a.kids.Start(spec); err != nil {
			a.h.Log().Error().Err(err).Str("service", name).Msg("starting service actor")
		}
	}
	// A service of the previous deployment that is not in this one goes,
	// also after a restart that interrupted its removal.
	if d.Previous != nil {
		for _, name := range d.Previous.Definition.Order {
			if _, ok := def.Services[name]; !ok && !a.known[name] {
				a.known[name] = true
				spec := supervise.ChildSpec{Name: childName(name), Restart: supervise.Transient, Produce: a.produceRemoved(name)}
				if err := a.kids.Start(spec); err != nil {
					a.h.Log().Error().Err(err).Str("service", name).Msg("starting service actor to remove it")
				}
			}
		}
	}
	for name := range a.known {
		if _, ok := def.Services[name]; !ok {
			a.send(name, messages.ServiceRemove{})
		}
	}
	for name := range a.hosts {
		if svc, ok := def.Services[name]; !ok || (svc.Hibernate == nil && !svc.Standalone()) {
			delete(a.hosts, name)
			a.toRoot(messages.HostRemove{Stack: d.Stack, Service: name})
		}
	}
	a.relayAll()
	a.publish()
}

// produceService reads the stack's latest desired state whenever the
// service actor (re)starts.
func (a *Actor) produceService(name string) supervise.Producer {
	return func(h *supervise.Handle) actor.Receiver {
		return service.Produce(a.env, a.definition(name), a.desired.Stopped[name])(h)
	}
}

// produceRemoved starts a service actor from its previous definition, to
// adopt its instances and retire them.
func (a *Actor) produceRemoved(name string) supervise.Producer {
	return func(h *supervise.Handle) actor.Receiver {
		prev := a.desired.Previous
		def := messages.ServiceDefinition{Stack: a.desired.Stack, Current: messages.ServiceRevision{
			Deployment: prev.ID, Revision: prev.Revision(name), Definition: prev.Definition.Services[name]}}
		return service.Produce(a.env, def, false)(h)
	}
}

func (a *Actor) definition(name string) messages.ServiceDefinition {
	d := a.desired
	msg := messages.ServiceDefinition{Stack: d.Stack, Current: messages.ServiceRevision{
		Deployment: d.Current.ID, Revision: d.Current.Revision(name), Definition: d.Current.Definition.Services[name]}}
	if d.Previous != nil {
		if svc, ok := d.Previous.Definition.Services[name]; ok {
			msg.Previous = &messages.ServiceRevision{Deployment: d.Previous.ID, Revision: d.Previous.Revision(name), Definition: svc}
		}
	}
	return msg
}

func (a *Actor) send(service string, msg any) {
	if pid := a.kids.PID(childName(service)); pid != nil {
		a.h.Engine().Send(pid, msg)
	}
}

func (a *Actor) remove() {
	a.removing = true
	for name := range a.known {
		a.send(name, messages.ServiceRemove{})
	}
	for name := range a.hosts {
		delete(a.hosts, name)
		a.toRoot(messages.HostRemove{Stack: a.desired.Stack, Service: name})
	}
	a.maybeGone()
}

// toRoot sends the activator's messages through the root.
func (a *Actor) toRoot(msg any) { a.h.Engine().Send(a.h.Parent(), msg) }

func (a *Actor) summary(m messages.ServiceSummary) {
	if m.Gone {
		delete(a.known, m.Service)
		delete(a.summaries, m.Service)
		a.maybeGone()
		a.publish()
		return
	}
	a.summaries[m.Service] = m
	a.relay(m)
	a.publish()
}

// relay tells every service that depends on m.Service how it is doing
// (SVC-18).
func (a *Actor) relay(m messages.ServiceSummary) {
	for _, name := range a.dependents[m.Service] {
		a.send(name, messages.DependencyStatus{Service: m.Service, Running: m.Running, Healthy: m.Healthy})
	}
}

func (a *Actor) relayAll() {
	for _, m := range a.summaries {
		a.relay(m)
	}
}

func (a *Actor) maybeGone() {
	if !a.removing || len(a.known) > 0 {
		return
	}
	a.env.Board.DeleteStack(a.desired.Stack)
	// Announced with no fingerprint: a stack deployed again under the
	// same name announces its phase afresh (SVC-26).
	sh := supervise.Shell{Events: a.env.Events, Event: messages.Event{Stack: a.desired.Stack}}
	supervise.Apply(a.h, sh, []step.Effect{step.Emit{Kind: messages.KindStackRemoved, Level: messages.LevelInfo, Message: "every service and instance removed"}})
	a.h.Engine().Send(a.h.Parent(), messages.StackGone{Stack: a.desired.Stack})
	a.h.Exit(messages.ExitNormal, nil)
}

func (a *Actor) publish() {
	if a.removing && len(a.known) == 0 {
		return
	}
	converged := true
	for _, name := range a.desired.Current.Definition.Order {
		if !a.hosts[name] && a.summaries[name].State != messages.ServiceConverged {
			converged = false
		}
	}
	a.env.Board.PutStack(messages.StackStatus{Stack: a.desired.Stack, Deployment: a.desired.Current.ID,
		Converged: converged, Services: a.desired.Current.Definition.Order, UpdatedAt: a.h.Clock().Now()})
	a.h.SetState(map[bool]string{true: "converged", false: "converging"}[converged], a.desired.Current.ID)
	a.announce()
}

// announce says once when the stack's phase changes (SVC-26): serving or
// failed; a stack on its way, or being removed, says nothing.
func (a *Actor) announce() {
	if a.removing {
		return
	}
	// The phase first, the message only when it is announced: the
	// message names every service, and a summary comes at every change
	// of any (PERF-3).
	if p := phaseOnly(a.desired.Current.Definition.Order, a.hosts, a.summaries); p == "" || p == a.announced {
		return
	}
	phase, msg := PhaseOf(a.desired.Current.Definition.Order, a.hosts, a.summaries)
	a.announced = phase
	kind, level := messages.KindStackServing, messages.LevelInfo
	if phase == PhaseFailed {
		kind, level = messages.KindStackFailed, messages.LevelError
	}
	sh := supervise.Shell{Events: a.env.Events, Event: messages.Event{Stack: a.desired.Stack}}
	supervise.Apply(a.h, sh, []step.Effect{step.Emit{Kind: kind, Level: level, Message: msg, Fingerprint: phase}})
}
