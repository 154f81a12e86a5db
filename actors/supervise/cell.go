package supervise

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/rs/zerolog"
)

// cell wraps one incarnation of an actor. It owns the actor's place in the
// tree and its children, recovers its panics and reports its end.
type cell struct {
	sys      *System
	path     string
	name     string
	gen      uint64
	parent   *actor.PID
	produce  Producer
	restarts int

	pid    *actor.PID
	inner  actor.Receiver
	handle *Handle
	kids   *Children

	// dead is set by a panic: the actor's own Receive gets nothing more
	// but actor.Stopped, so it still releases what it holds.
	dead bool
	// exiting is set once the end has begun.
	exiting bool
	// trap: the actor handles messages.Shutdown itself (TrapShutdown).
	trap bool
	exit messages.ChildExited
	// shown is what SetState published last, while it is the node in the
	// tree: the same state set again is not published again, so the
	// node's Since stays when the state began.
	shown                   bool
	shownState, shownDetail string
}

// Receive is the path of every message an actor sends another: an
// ordinary message takes one type switch and a deferred recover, in this
// one frame (PERF-2: hollywood starts a goroutine for a burst of messages
// on a small stack, and a frame more on the way to the actor was enough
// to make a small actor's every burst grow it by copying).
func (cl *cell) Receive(c *actor.Context) {
	switch c.Message().(type) {
	case actor.Initialized:
		cl.init(c)
	case actor.Stopped:
		cl.stopped(c)
	case messages.ChildExited, messages.RestartDue, messages.StopTimedOut:
		cl.supervise(c, c.Message())
	case actor.Started, messages.Shutdown, messages.ExitSelf, messages.RestartChild, messages.Deliver, messages.InjectPanic:
		if !cl.dead {
			cl.deliver(c)
		}
	default:
		if !cl.dead {
			defer cl.recoverPanic(c)
			cl.inner.Receive(c)
		}
	}
}

// deliver hands the layer's own messages to the layer, and those the actor
// sees too to the actor, recovering its panics.
func (cl *cell) deliver(c *actor.Context) {
	defer cl.recoverPanic(c)
	switch m := c.Message().(type) {
	case actor.Started:
		cl.shown = false
		cl.sys.Tree.publish(cl.node("running", ""))
	case messages.Shutdown:
		if cl.trap && !cl.exiting {
			break // the actor finishes its work, then calls Exit
		}
		cl.begin(c, messages.ChildExited{Reason: messages.ExitShutdown})
		return
	case messages.ExitSelf:
		cl.begin(c, messages.ChildExited{Reason: m.Reason, Err: m.Err, Chain: m.Chain})
		return
	case messages.RestartChild:
		if cl.kids != nil {
			cl.kids.routeRestart(c, m)
		} else {
			c.Respond(messages.RestartChildResult{Path: m.Path, Err: "no such actor"})
		}
		return
	case messages.Deliver:
		cl.deliverTo(c, m)
		return
	case messages.InjectPanic:
		if !cl.sys.AllowInjectPanic {
			cl.handle.log().Warn().Str("reason", m.Reason).Msg("injected panic ignored: this system does not allow fault injection")
			return
		}
		panic("injected: " + m.Reason)
	}
	cl.inner.Receive(c)
}

// deliverTo hands m.Msg to this actor or routes it to the child on its path.
func (cl *cell) deliverTo(c *actor.Context, m messages.Deliver) {
	if m.Path == cl.path {
		c.Engine().SendWithSender(c.PID(), m.Msg, c.Sender())
		return
	}
	if cl.kids != nil {
		if pid := cl.kids.route(m.Path); pid != nil {
			c.Engine().SendWithSender(pid, m, c.Sender())
			return
		}
	}
	if c.Sender() != nil {
		c.Respond(messages.DeliverFailed{Path: m.Path, Err: "no actor at " + m.Path})
	}
}

func (cl *cell) init(c *actor.Context) {
	cl.pid = c.PID()
	cl.handle = &Handle{cell: cl}
	cl.inner = cl.produce(cl.handle)
	cl.sys.Tree.publish(cl.node("starting", ""))
	defer cl.recoverPanic(c)
	cl.inner.Receive(c)
}

// supervise hands the layer's own messages to the children, then lets the
// actor see a child's end too (a service learns its replica actor ended).
func (cl *cell) supervise(c *actor.Context, m any) {
	if cl.kids == nil {
		return
	}
	defer cl.recoverPanic(c)
	forward := cl.kids.handle(c, m)
	if forward && !cl.dead && !cl.exiting {
		cl.inner.Receive(c)
	}
}

func (cl *cell) recoverPanic(c *actor.Context) {
	v := recover()
	if v == nil {
		return
	}
	cl.handle.log().Error().Str("panic", fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("actor panicked")
	cl.dead = true
	if cl.exiting {
		// A panic while already ending (in Stopped, say) must still end it.
		return
	}
	cl.begin(c, messages.ChildExited{Reason: messages.ExitPanic, Err: fmt.Sprint(v)})
}

// begin ends the actor: children first, in reverse start order, then the
// actor itself. The parent hears about it from stopped.
func (cl *cell) begin(c *actor.Context, why messages.ChildExited) {
	if cl.exiting {
		return
	}
	cl.exiting = true
	cl.exit = why
	cl.shown = false
	cl.sys.Tree.publish(cl.node("stopping", string(why.Reason)))
	if cl.kids != nil {
		cl.kids.stopAll(c, func() { c.Engine().Stop(c.PID()) })
		return
	}
	c.Engine().Stop(c.PID())
}

// stopped runs when hollywood has taken the actor out of its registry.
func (cl *cell) stopped(c *actor.Context) {
	if cl.kids != nil {
		cl.kids.cancelTimers()
	}
	// A dead incarnation gets Stopped too: its timers, goroutines, watches
	// and published routes must end with it, or they outlive it beside the
	// next incarnation (a host's edge route kept proxying to an instance no
	// actor managed). Stopped handlers only release; they do not act.
	if cl.inner != nil {
		func() {
			defer func() {
				if v := recover(); v != nil {
					cl.handle.log().Error().Str("panic", fmt.Sprint(v)).Msg("actor panicked while stopping")
				}
			}()
			cl.inner.Receive(c)
		}()
	}
	cl.sys.Tree.remove(cl.path, cl.gen)
	why := cl.exit
	if why.Reason == "" {
		why.Reason = messages.ExitKilled
	}
	why.Path, why.Name, why.Gen = cl.path, cl.name, cl.gen
	if cl.parent != nil {
		c.Engine().Send(cl.parent, why)
	} else if cl.sys.OnRootExit != nil {
		cl.sys.OnRootExit(why)
	}
}

func (cl *cell) node(state, detail string) Node {
	return Node{Path: cl.path, Gen: cl.gen, State: state, Detail: detail, Restarts: cl.restarts, Since: cl.sys.Clock.Now()}
}

// Handle is an actor's link to the tree, given to its Producer.
type Handle struct {
	cell *cell
	// lg is made at the first log line: most actors never write one, and
	// a logger with the path costs some 450 bytes (PERF-3). Atomic: a
	// driver call's goroutine may log for its actor.
	lg atomic.Pointer[zerolog.Logger]
}

// Path is the actor's place in the tree, e.g. "root/stack:web/service:api".
func (h *Handle) Path() string { return h.cell.path }

// Name is the last segment of Path.
func (h *Handle) Name() string { return h.cell.name }

// PID is the hollywood PID of this incarnation.
func (h *Handle) PID() *actor.PID { return h.cell.pid }

// Parent is the supervisor's PID; nil for the root.
func (h *Handle) Parent() *actor.PID { return h.cell.parent }

// Engine is the hollywood engine.
func (h *Handle) Engine() *actor.Engine { return h.cell.sys.Engine }

// Clock is the tree's clock (SUP-19).
func (h *Handle) Clock() clock.Clock { return h.cell.sys.Clock }

// System is the tree the actor lives in.
func (h *Handle) System() *System { return h.cell.sys }

// Log is the actor's logger; every line carries its path.
func (h *Handle) Log() *zerolog.Logger { return h.log() }

func (h *Handle) log() *zerolog.Logger {
	if lg := h.lg.Load(); lg != nil {
		return lg
	}
	l := h.cell.sys.Log.With().Str("actor", h.cell.path).Logger()
	h.lg.CompareAndSwap(nil, &l)
	return h.lg.Load()
}

// SetState publishes the actor's state for `engenho tree`; the state it
// published last, set again, changes nothing.
func (h *Handle) SetState(state, detail string) {
	cl := h.cell
	if cl.shown && cl.shownState == state && cl.shownDetail == detail {
		return
	}
	cl.sys.Tree.publish(cl.node(state, detail))
	cl.shown, cl.shownState, cl.shownDetail = true, state, detail
}

// Supervise makes the actor a supervisor with opts and returns its
// children. Call it once, when the actor starts.
func (h *Handle) Supervise(opts Options) *Children {
	if h.cell.kids == nil {
		h.cell.kids = newChildren(h.cell, opts)
	}
	return h.cell.kids
}

// TrapShutdown makes the actor receive messages.Shutdown itself instead of
// being ended at once, so it can finish what must not be cut short (a
// hibernating host checkpoints and releases its lease, ACT-13), then end
// with Exit(messages.ExitShutdown, nil). Its supervisor's shutdown budget
// still bounds it: past the budget it is killed. Call it when the actor
// starts; it holds for this incarnation only.
func (h *Handle) TrapShutdown() { h.cell.trap = true }

// Exit ends the actor with reason and err: its children are stopped first
// and its parent is told (SUP-8).
func (h *Handle) Exit(reason messages.ExitReason, err error, chain ...string) {
	m := messages.ExitSelf{Reason: reason, Chain: chain}
	if err != nil {
		m.Err = err.Error()
	}
	h.cell.sys.Engine.Send(h.cell.pid, m)
}
