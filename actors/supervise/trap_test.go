package supervise

import (
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/messages"
)

type finish struct{}

// trapper traps Shutdown: it records it and ends only when told to finish.
type trapper struct {
	h   *Handle
	rec *recorder
}

func (w *trapper) Receive(c *actor.Context) {
	switch c.Message().(type) {
	case actor.Started:
		w.h.TrapShutdown()
		w.rec.mu.Lock()
		w.rec.pids[w.h.Name()] = c.PID()
		w.rec.mu.Unlock()
		w.rec.add("start " + w.h.Name())
	case messages.Shutdown:
		w.rec.add("draining " + w.h.Name())
	case finish:
		w.h.Exit(messages.ExitShutdown, nil)
	case actor.Stopped:
		w.rec.add("stop " + w.h.Name())
	}
}

func trapperSpec(name string, budget time.Duration) func(*recorder) ChildSpec {
	return func(rec *recorder) ChildSpec {
		return ChildSpec{Name: name, Restart: Permanent, Shutdown: budget,
			Produce: func(h *Handle) actor.Receiver { return &trapper{h: h, rec: rec} }}
	}
}

// SUP-6, ACT-13: an actor that traps Shutdown finishes its work before it
// ends; its siblings wait for it (reverse order), and a trapped shutdown
// ends normally, so nothing restarts it.
func TestTrapShutdownFinishesFirst(t *testing.T) {
	h := newHarness(t, roomy(), w("a", Permanent), trapperSpec("t", time.Minute))
	h.waitFor("start a", "start t")
	h.engine.Send(h.root, messages.Shutdown{})
	h.waitFor("draining t")
	h.engine.Send(h.rec.pid("t"), finish{})
	h.waitFor("stop t", "stop a")
	select {
	case m := <-h.exits:
		h.root = nil
		if m.Reason != messages.ExitShutdown {
			t.Fatalf("root ended %s", m.Reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("root did not end")
	}
}

// SUP-6: a trapping actor that does not finish within its budget is killed.
func TestTrapShutdownBoundedByBudget(t *testing.T) {
	h := newHarness(t, roomy(), trapperSpec("t", 10*time.Second))
	h.waitFor("start t")
	h.engine.Send(h.root, messages.Shutdown{})
	h.waitFor("draining t")
	if !h.clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no budget timer armed")
	}
	h.clk.Advance(10 * time.Second)
	h.waitFor("stop t")
	select {
	case <-h.exits:
		h.root = nil
	case <-time.After(5 * time.Second):
		t.Fatal("root did not end after the budget")
	}
}
