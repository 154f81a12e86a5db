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
	h   *Handle
	seq uint64
	// armed holds the few timers of one actor (one to three): a slice
	// costs a replica less than a map (PERF-3).
	armed []armedTimer
}

type armedTimer struct {
	name  string
	seq   uint64
	timer clock.Timer
}

// NewTimers returns the timers of the actor behind h.
func NewTimers(h *Handle) *Timers {
	return &Timers{h: h}
}

func (t *Timers) find(name string) int {
	for i := range t.armed {
		if t.armed[i].name == name {
			return i
		}
	}
	return -1
}

func (t *Timers) forget(i int) {
	last := len(t.armed) - 1
	t.armed[i] = t.armed[last]
	t.armed[last] = armedTimer{}
	t.armed = t.armed[:last]
}

// Arm makes the named timer fire at at, replacing one armed before.
func (t *Timers) Arm(name string, at time.Time) {
	t.Cancel(name)
	t.seq++
	seq, self, eng, clk := t.seq, t.h.PID(), t.h.Engine(), t.h.Clock()
	timer := clk.AfterFunc(at.Sub(clk.Now()), func() { eng.Send(self, messages.Timer{Name: name, Seq: seq}) })
	t.armed = append(t.armed, armedTimer{name: name, seq: seq, timer: timer})
}

// Armed says whether the named timer is armed and has not fired.
func (t *Timers) Armed(name string) bool {
	return t.find(name) >= 0
}

// Cancel disarms the named timer.
func (t *Timers) Cancel(name string) {
	if i := t.find(name); i >= 0 {
		t.armed[i].timer.Stop()
		t.forget(i)
	}
}

// Fresh reports whether m is the firing of its timer as armed now, and
// then forgets the timer: it has fired. A late firing of a timer re-armed
// or cancelled since is not fresh.
func (t *Timers) Fresh(m messages.Timer) bool {
	i := t.find(m.Name)
	if i < 0 || t.armed[i].seq != m.Seq {
		return false
	}
	t.forget(i)
	return true
}

// Stop disarms every timer (an actor's Stopped).
func (t *Timers) Stop() {
	for _, a := range t.armed {
		a.timer.Stop()
	}
	t.armed = nil
}
