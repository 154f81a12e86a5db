package host

import (
	"fmt"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// wakeAsked handles a request to be awake (ACT-3): one wake at a time,
// every waiter coalesced on it.
func (m *machine) wakeAsked(reason messages.WakeReason) {
	s := &m.s
	switch {
	case s.Draining:
		m.refuse("the node is shutting down")
		return
	case s.Retiring:
		m.refuse("the service is being removed")
		return
	}
	switch s.Phase {
	case messages.HostAwake:
		m.answer(true, 0, 0, "")
	case messages.HostWaking:
		// Coalesced: the waiter is answered when this wake ends.
	case messages.HostStopping:
		if reason != messages.WakeDue || s.WakePending {
			m.pend(reason)
		}
	case messages.HostAsleep:
		if s.Op != OpNone {
			m.pend(reason)
			return
		}
		m.beginWake(reason)
	}
}

func (m *machine) pend(reason messages.WakeReason) {
	if !m.s.WakePending || reason == messages.WakeRequest {
		m.s.WakePendingReason = reason
	}
	m.s.WakePending = true
}

// beginWake starts the wake steps (ACT-4) from asleep with nothing in
// flight.
func (m *machine) beginWake(reason messages.WakeReason) {
	s := &m.s
	s.WakePending = false
	if s.StoppedIntent {
		m.refuse("the service is stopped")
		return
	}
	s.Wake = Wake{Reason: reason, Began: m.now}
	s.LeaseLost, s.SkipCheckpoint, s.Outdated, s.StopReason, s.LastErr = false, false, false, "", ""
	m.phase(messages.HostWaking, " ("+string(reason)+")")
	m.do(OpDefinition)
}

// stepDone records how long the wake step that just ended took.
func (m *machine) stepDone(name string) {
	m.s.Wake.Steps = append(m.s.Wake.Steps, messages.WakeStep{Step: name, Duration: m.now.Sub(m.s.StepBegan)})
	m.s.StepBegan = m.now
}

// wakeOpDone moves a wake on after one of its steps. What the step holds
// now (a lease, an instance) is recorded first, so an aborted wake stops
// it.
func (m *machine) wakeOpDone(e OpDone) {
	s := &m.s
	if e.Op == OpReadyCheck {
		if e.Outcome == OK || !m.now.Before(s.ReadyBy) {
			s.Wake.Steps = append(s.Wake.Steps, messages.WakeStep{Step: StepReady, Duration: m.now.Sub(s.ReadyBegan)})
			s.StepBegan = m.now
		}
	} else {
		m.stepDone(string(e.Op))
	}
	switch {
	case e.Op == OpAcquire && e.Outcome == OK:
		s.Leased, s.Owes = true, false
		m.arm(TimerRenew, m.now.Add(m.cfg.RenewEvery))
	case e.Op == OpStart && e.Outcome == OK:
		s.Started, s.NeedFinal = true, true
	}
	switch {
	case s.Draining || s.Retiring:
		m.failWake(503, m.cfg.RetryAfter, "the node is shutting down")
		return
	case s.LeaseLost:
		m.failWake(503, m.cfg.RetryAfter, "lease lost while waking")
		return
	case s.StopReason != "":
		m.failWake(503, m.cfg.RetryAfter, s.StopReason)
		return
	}
	switch e.Op {
	case OpDefinition:
		switch e.Outcome {
		case OK:
			if m.cfg.Hibernating {
				m.do(OpAcquire)
			} else {
				m.afterRestore()
			}
		case Stopped:
			s.StoppedIntent = true
			m.failWake(503, m.cfg.RetryAfter, "the service is stopped")
		default:
			m.failWake(503, m.cfg.RetryAfter, "definition: "+e.Err)
		}
	case OpAcquire:
		switch e.Outcome {
		case OK:
			m.do(OpRestore)
		case Held:
			retry := e.RetryAfter
			if retry <= 0 {
				retry = m.cfg.RetryAfter
			}
			m.failWake(503, retry, "lease: "+e.Err)
		default:
			m.failWake(503, m.cfg.RetryAfter, "lease: "+e.Err)
		}
	case OpRestore:
		switch e.Outcome {
		case OK:
			m.afterRestore()
		case FirstBoot:
			if m.cfg.HasSeed {
				m.do(OpSeed)
			} else {
				m.afterRestore()
			}
		case Lost:
			m.loseLease("restore: another node claimed the host")
			m.failWake(503, m.cfg.RetryAfter, "restore: another node claimed the host: "+e.Err)
		case Corrupt:
			m.failWake(503, m.cfg.RetryAfter, "restore: checkpoint corrupt, not served: "+e.Err)
		default:
			m.failWake(503, m.cfg.RetryAfter, "restore: "+e.Err)
		}
	case OpSeed:
		if e.Outcome != OK {
			m.failWake(503, m.cfg.RetryAfter, "seed: "+e.Err)
			return
		}
		m.afterRestore()
	case OpStart:
		if e.Outcome != OK {
			m.failWake(503, m.cfg.RetryAfter, "start: "+e.Err)
			return
		}
		s.ProbeDelay, s.ReadyBy, s.ReadyBegan = m.cfg.ProbeFirst, m.now.Add(m.cfg.ReadyTimeout), m.now
		m.do(OpReadyCheck)
	case OpReadyCheck:
		if e.Outcome == OK {
			m.serve()
			return
		}
		if !m.now.Before(s.ReadyBy) {
			m.failWake(503, m.cfg.RetryAfter, fmt.Sprintf("not ready within %s: %s", m.cfg.ReadyTimeout, e.Err))
			return
		}
		s.Wait = waitReady
		m.arm(TimerReadyCheck, m.now.Add(s.ProbeDelay))
		if m.now.Sub(s.ReadyBegan) >= m.cfg.ProbeFastFor {
			s.ProbeDelay = min(2*s.ProbeDelay, m.cfg.ProbeMax)
		}
	}
}

// abortWake ends a wake from outside its steps (a lost lease, a dead
// instance): at once while it waits between readiness checks, else when the step in
// flight ends.
func (m *machine) abortWake(msg string) {
	if m.s.StopReason == "" {
		m.s.StopReason = msg
	}
	if m.s.Op == OpNone {
		m.failWake(503, m.cfg.RetryAfter, m.s.StopReason)
	}
}

// afterRestore: the data directory is in place; start the instance, or,
// for a standalone worker, its sidecars.
func (m *machine) afterRestore() {
	if m.cfg.HasInstance {
		m.do(OpStart)
		return
	}
	m.s.NeedFinal = true
	m.serve()
}

// serve ends a successful wake: sidecars start after the instance turned
// healthy (ACT-11), then the gate opens and every waiter is answered.
func (m *machine) serve() {
	s := &m.s
	s.Op, s.Wait = OpNone, waitNone
	if m.cfg.HasSidecars {
		s.StepBegan = m.now
		m.add(StartSidecars{})
		s.SidecarsUp = true
		m.stepDone(StepSidecars)
	}
	if m.cfg.HasInstance {
		m.add(OpenGate{Stamp: s.Wake.Reason == messages.WakeRequest})
	}
	s.Wakes++
	m.phase(messages.HostAwake, "")
	steps := append([]messages.WakeStep(nil), s.Wake.Steps...)
	m.add(step.Emit{Kind: messages.KindHostWoke, Level: messages.LevelInfo,
		Message: fmt.Sprintf("woke (%s) in %s", s.Wake.Reason, m.now.Sub(s.Wake.Began)), Fields: wokeFields(s.Wake.Reason, steps)})
	m.add(RecordWake{Steps: steps})
	m.answer(true, 0, 0, "")
	if m.idles() {
		m.arm(TimerIdle, m.now.Add(m.cfg.Idle))
	}
	if m.cfg.Hibernating {
		m.armCheckpoint(true)
	}
	if s.Wake.Reason == messages.WakeDue && m.cfg.HasInstance {
		s.Ticking = true
		m.side(SideTick)
	}
	if s.Outdated || s.StoppedIntent {
		m.sleepNow()
	}
}

// failWake answers every waiter with the failure (ACT-3), then stops
// whatever the wake started; the next request wakes afresh.
func (m *machine) failWake(status int, retry time.Duration, msg string) {
	s := &m.s
	s.Op, s.Wait, s.LastErr = OpNone, waitNone, msg
	m.cancel(TimerReadyCheck)
	m.emit(messages.KindHostWakeFailed, messages.LevelWarn, msg)
	m.answer(false, status, retry, msg)
	if s.Started || s.SidecarsUp || s.Leased {
		m.beginStop("wake failed")
		return
	}
	m.phase(messages.HostAsleep, "")
	m.settle()
}

// wokeFields are the host.woke event's fields: each step's duration
// (step.NAME) and the wake's reason.
func wokeFields(reason messages.WakeReason, steps []messages.WakeStep) map[string]string {
	if len(steps) == 0 {
		return nil
	}
	fields := map[string]string{"reason": string(reason)}
	for _, st := range steps {
		fields["step."+st.Step] = st.Duration.String()
	}
	return fields
}
