package root

import (
	"sort"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/stack"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/messages"
)

// Name is the root's path in the tree.
const Name = "root"

// ActivatorName is the name of the root's activator child.
const ActivatorName = "activator"

// Options shape the root.
type Options struct {
	Supervise supervise.Options
	// Extra children started after the stacks (the activator).
	Extra []supervise.ChildSpec
	// Removing names stacks whose removal a restart interrupted.
	Removing []string
	// OnStackGone is told, in its own goroutine, that a removed stack's
	// actors have retired everything.
	OnStackGone func(stack string)
}

// Actor is the root supervisor.
type Actor struct {
	h        *supervise.Handle
	env      stack.Env
	opts     Options
	kids     *supervise.Children
	stacks   map[string]messages.ApplyStack
	removing map[string]bool
}

// Produce returns the root's producer; initial is the desired state read
// from the journal at boot.
func Produce(env stack.Env, opts Options, initial []messages.ApplyStack) supervise.Producer {
	return func(h *supervise.Handle) actor.Receiver {
		a := &Actor{h: h, env: env, opts: opts, stacks: map[string]messages.ApplyStack{}, removing: map[string]bool{}}
		for _, d := range initial {
			a.stacks[d.Stack] = d
		}
		for _, name := range opts.Removing {
			a.removing[name] = true
		}
		return a
	}
}

func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.start()
	case messages.ApplyStack:
		a.apply(m)
	case messages.RemoveStack:
		a.remove(m)
	case messages.ToService:
		if in, ok := m.Msg.(messages.ServiceIntent); ok {
			if d, known := a.stacks[m.Stack]; known {
				d.Stopped = stack.WithStopped(d.Stopped, m.Service, in.Stopped)
				a.stacks[m.Stack] = d
			}
		}
		if pid := a.kids.PID(childName(m.Stack)); pid != nil {
			c.Engine().SendWithSender(pid, m, c.Sender())
		}
	case messages.HostDefinition, messages.HostRemove:
		// The activator runs hibernating services and standalone workers.
		if pid := a.kids.PID(ActivatorName); pid != nil {
			c.Engine().Send(pid, m)
		} else {
			a.h.Log().Warn().Msg("a stack declares a hibernating service or a standalone worker, but this node runs no activator")
		}
	case messages.StackGone:
		delete(a.stacks, m.Stack)
		delete(a.removing, m.Stack)
		if f := a.opts.OnStackGone; f != nil {
			go f(m.Stack)
		}
	}
}

func childName(stack string) string { return "stack:" + stack }

func (a *Actor) start() {
	a.kids = a.h.Supervise(a.opts.Supervise)
	names := make([]string, 0, len(a.stacks))
	for n := range a.stacks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a.startStack(n)
	}
	for _, spec := range a.opts.Extra {
		if err := a.kids.Start(spec); err != nil {
			a.h.Log().Error().Err(err).Msg("starting child")
		}
	}
}

func (a *Actor) startStack(name string) {
	desired := func() (messages.ApplyStack, bool) { return a.stacks[name], a.removing[name] }
	spec := supervise.ChildSpec{Name: childName(name), Restart: supervise.Transient, Produce: stack.Produce(a.env, desired)}
	if err := a.kids.Start(spec); err != nil {
		a.h.Log().Error().Err(err).Str("stack", name).Msg("starting stack actor")
	}
}

func (a *Actor) apply(m messages.ApplyStack) {
	a.stacks[m.Stack] = m
	delete(a.removing, m.Stack)
	if pid := a.kids.PID(childName(m.Stack)); pid != nil {
		a.h.Engine().Send(pid, m)
		return
	}
	if !a.kids.Has(childName(m.Stack)) {
		a.startStack(m.Stack)
	}
}

func (a *Actor) remove(m messages.RemoveStack) {
	if _, ok := a.stacks[m.Stack]; !ok {
		return
	}
	a.removing[m.Stack] = true
	if pid := a.kids.PID(childName(m.Stack)); pid != nil {
		a.h.Engine().Send(pid, m)
	}
}
