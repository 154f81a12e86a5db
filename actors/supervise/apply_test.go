package supervise

import (
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// stepper is a leaf actor whose "core" is the list of effects it is sent:
// it performs them with Apply and records what reached it.
type stepper struct {
	h      *Handle
	timers *Timers
	rec    *recorder
	events *eventLog
}

type effects []step.Effect

type own struct {
	step.Is
	what string
}

func (s *stepper) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		s.timers = NewTimers(s.h)
		s.rec.mu.Lock()
		s.rec.pids[s.h.Name()] = c.PID()
		s.rec.mu.Unlock()
		s.rec.add("start")
	case actor.Stopped:
		s.timers.Stop()
	case effects:
		Apply(s.h, Shell{Timers: s.timers, Events: s.events, Event: messages.Event{Stack: "st"},
			Own: func(f step.Effect) { s.rec.add("own " + f.(own).what) }}, m)
		s.rec.add("applied")
	case messages.Timer:
		if s.timers.Fresh(m) {
			s.rec.add("fired " + m.Name)
		} else {
			s.rec.add("stale " + m.Name)
		}
	}
}

type eventLog struct {
	mu  sync.Mutex
	evs []messages.Event
}

func (l *eventLog) Emit(ev messages.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

func (l *eventLog) all() []messages.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]messages.Event(nil), l.evs...)
}

func stepperHarness(t *testing.T) (*harness, *eventLog) {
	t.Helper()
	log := &eventLog{}
	h := newHarness(t, roomy(), func(rec *recorder) ChildSpec {
		return ChildSpec{Name: "s", Restart: Permanent, Produce: func(h *Handle) actor.Receiver {
			return &stepper{h: h, rec: rec, events: log}
		}}
	})
	h.waitFor("start")
	return h, log
}

// SUP-19: a timer armed through Apply fires on the fake clock as
// messages.Timer; re-arming replaces it, Keep leaves it, Cancel disarms it,
// and a replaced timer's late firing is not fresh.
func TestApplyTimers(t *testing.T) {
	h, _ := stepperHarness(t)
	pid := h.rec.pid("s")
	now := h.clk.Now()
	h.engine.Send(pid, effects{step.Arm{Timer: "a", At: now.Add(time.Second)}})
	h.waitFor("applied")
	h.clk.Advance(time.Second)
	h.waitFor("fired a")

	h.engine.Send(pid, effects{step.Arm{Timer: "b", At: now.Add(3 * time.Second)}, step.Arm{Timer: "b", At: now.Add(10 * time.Second), Keep: true}})
	h.waitFor("applied")
	h.clk.Advance(2 * time.Second) // now+3s: Keep left the first arming
	h.waitFor("fired b")

	h.engine.Send(pid, effects{step.Arm{Timer: "c", At: now.Add(5 * time.Second)}, step.Arm{Timer: "c", At: now.Add(20 * time.Second)}})
	h.waitFor("applied")
	h.clk.Advance(2 * time.Second) // now+5s: the replaced arming does not fire
	h.clk.Advance(15 * time.Second)
	h.waitFor("fired c")

	h.engine.Send(pid, effects{step.Arm{Timer: "d", At: h.clk.Now().Add(time.Second)}, step.Cancel{Timer: "d"}})
	h.waitFor("applied")
	h.clk.Advance(time.Hour)
	h.engine.Send(pid, messages.Timer{Name: "d", Seq: 1})
	h.waitFor("stale d")
}

// SUP-19, PERF-3: an actor's timers are a short slice, not a map; with
// several armed at once, cancelling or firing one leaves the others armed
// under their own names, and a cancelled one's late firing is not fresh.
func TestApplySeveralTimers(t *testing.T) {
	h, _ := stepperHarness(t)
	pid := h.rec.pid("s")
	now := h.clk.Now()
	h.engine.Send(pid, effects{step.Arm{Timer: "a", At: now.Add(time.Second)}, step.Arm{Timer: "b", At: now.Add(2 * time.Second)},
		step.Arm{Timer: "c", At: now.Add(3 * time.Second)}, step.Arm{Timer: "d", At: now.Add(4 * time.Second)}, step.Cancel{Timer: "b"}})
	h.waitFor("applied")
	h.clk.Advance(time.Second)
	h.waitFor("fired a")
	h.clk.Advance(time.Second) // b was cancelled: nothing
	h.clk.Advance(time.Second)
	h.waitFor("fired c")
	h.engine.Send(pid, effects{step.Arm{Timer: "d", At: h.clk.Now().Add(5 * time.Second)}})
	h.waitFor("applied")
	h.clk.Advance(time.Second) // d's first arming was replaced
	h.engine.Send(pid, messages.Timer{Name: "b", Seq: 2})
	h.waitFor("stale b")
	h.clk.Advance(4 * time.Second)
	h.waitFor("fired d")
}

// Apply runs the shared effects the same way for every actor and hands the
// core's own effects to Own, in order; Emit is stamped with the actor's
// context, path and the clock's time.
func TestApplyOwnEffectsAndEvents(t *testing.T) {
	h, log := stepperHarness(t)
	pid := h.rec.pid("s")
	h.engine.Send(pid, effects{own{what: "first"}, step.Emit{Kind: "x.happened", Level: messages.LevelWarn, Message: "m",
		Fields: map[string]string{"k": "v"}}, step.Refuse{Reason: "no"}, own{what: "second"},
		step.Emit{Kind: "y.happened", Level: messages.LevelInfo, Message: "about a host", Host: "notes.localhost"}})
	h.waitFor("own first", "own second", "applied")
	evs := log.all()
	if len(evs) != 2 {
		t.Fatalf("events %+v, want two", evs)
	}
	ev := evs[0]
	if ev.Kind != "x.happened" || ev.Level != messages.LevelWarn || ev.Message != "m" || ev.Stack != "st" ||
		ev.Fields["k"] != "v" || ev.UnixMs != h.clk.Now().UnixMilli() || ev.Actor == "" || ev.Host != "" {
		t.Fatalf("event %+v", ev)
	}
	// Emit.Host names the host an event is about, beside the shell's context.
	if ev := evs[1]; ev.Kind != "y.happened" || ev.Host != "notes.localhost" || ev.Stack != "st" || ev.Actor == "" {
		t.Fatalf("event about a host %+v", ev)
	}
}

// step.End ends the actor with its reason; a permanent child is restarted
// by its supervisor.
func TestApplyEnd(t *testing.T) {
	h, _ := stepperHarness(t)
	h.engine.Send(h.rec.pid("s"), effects{step.End{}})
	h.waitFor("applied", "start")
}
