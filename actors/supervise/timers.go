package supervise

import (
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
)

// Timers are an actor's named timers on its system's clock. A timer fires
// by sending messages.Timer{Name, Seq} to the actor itself; Fresh tells
// the firing of a timer as armed now from a late one. Timers is used only
// from the actor's Receive, so it takes no lock.
type Timers struct {
	h     *Handle
	seq   uint64
	armed map[string]armedTimer
}

type armedTimer struct {
	seq   uint64
	timer clock.Timer
}

// NewTimers returns the timers of the actor behind h.
func NewTimers(h *Handle) *Timers {
	return &Timers{h: h, armed: map[string]armedTimer{}}
}

// Arm makes the named timer fire at at, replacing one armed before.
func (t *Timers) Arm(name string, at time.Time) {
	t.Cancel(name)
	t.seq++
	seq, self, eng, clk := t.seq, t.h.PID(), t.h.Engine(), t.h.Clock()
	timer := clk.AfterFunc(at.Sub(clk.Now()), func() { eng.Send(self, messages.Timer{Name: name, Seq: seq}) })
	t.armed[name] = armedTimer{seq: seq, timer: timer}
}

// Armed says whether the named timer is armed and has not fired.
func (t *Timers) Armed(name string) bool {
	_, ok := t.armed[name]
	return ok
}

// Cancel disarms the named timer.
func (t *Timers) Cancel(name string) {
	if a, ok := t.armed[name]; ok {
		a.timer.Stop()
		delete(t.armed, name)
	}
}

// Fresh reports whether m is the firing of its timer as armed now, and
// then forgets the timer: it has fired. A late firing of a timer re-armed
// or cancelled since is not fresh.
func (t *Timers) Fresh(m messages.Timer) bool {
	a, ok := t.armed[m.Name]
	if !ok || a.seq != m.Seq {
		return false
	}
	delete(t.armed, m.Name)
	return true
}

// Stop disarms every timer (an actor's Stopped).
func (t *Timers) Stop() {
	for name := range t.armed {
		t.Cancel(name)
	}
}
