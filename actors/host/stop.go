package host

import (
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// opDone routes the end of a main operation.
func (m *machine) opDone(e OpDone) {
	s := &m.s
	if e.Op != s.Op || s.Op == OpNone {
		return // stale
	}
	s.Op = OpNone
	switch e.Op {
	case OpCleanup:
		if e.Outcome != OK {
			s.LastErr = "cleanup: " + e.Err
		}
		switch {
		case s.StoppedIntent || s.Draining || s.Retiring:
		case !m.cfg.Hibernating:
			m.pend(messages.WakeBoot)
		case e.Outcome == Resume:
			// What the dead incarnation served may be only in the local
			// copy: wake on it, so the next sleep checkpoints it and
			// releases the lease, instead of the lease lapsing with the
			// writes unsaved (ACT-9).
			m.pend(messages.WakeResume)
		}
		m.settle()
	case OpDefinition, OpAcquire, OpRestore, OpSeed, OpStart, OpReadyCheck:
		m.wakeOpDone(e)
	case OpNextDue:
		m.nextDueDone(e)
	case OpStopInstance, OpCheckpoint, OpSetDue, OpRelease:
		m.stopOpDone(e)
	case OpReleaseOwed:
		if e.Outcome == OK {
			s.Owes = false
			m.emit(messages.KindLeaseReleaseSettled, messages.LevelInfo, "owed lease release settled")
		}
		m.settle()
	}
}

// settle runs when an asleep host has nothing in flight: it ends, reports
// drained, or starts the wake that waited.
func (m *machine) settle() {
	s := &m.s
	if s.Phase != messages.HostAsleep || s.Op != OpNone {
		return
	}
	switch {
	case s.Retiring:
		if m.cfg.Hibernating && s.DueKnown {
			s.DueKnown = false
			m.do(OpSetDue)
			return
		}
		s.Ended = true
		m.add(step.End{})
	case s.Draining:
		if !s.Drained {
			m.add(step.End{Reason: messages.ExitShutdown})
		}
		s.Drained, s.WakePending = true, false
	case s.WakePending:
		m.beginWake(s.WakePendingReason)
	}
}

// sleepNow puts an awake host to sleep whatever its idleness: a drain, a
// new revision or a stopped intent. It asks the next due time first, so a
// due wake survives (ACT-10).
func (m *machine) sleepNow() {
	s := &m.s
	if s.Phase != messages.HostAwake {
		if s.Phase == messages.HostWaking {
			s.Outdated = true
		}
		return
	}
	s.Forced = true
	m.cancel(TimerIdle)
	m.add(SealGate{})
	if s.Op == OpNone && s.Wait != waitClose {
		if m.cfg.Hibernating {
			m.do(OpNextDue)
			return
		}
		m.beginStop("stopping")
	}
}

// beginStop starts the sleep sequence (ACT-8): sidecars, instance, final
// checkpoint, due time, lease.
func (m *machine) beginStop(why string) {
	s := &m.s
	if s.StopReason == "" || why != "wake failed" {
		s.StopReason = why
	}
	s.Stage, s.Blocked, s.Wait, s.Forced = stageSidecars, "", waitNone, false
	m.cancel(TimerIdle, TimerCheckpoint, TimerReadyCheck)
	m.add(SealGate{})
	m.phase(messages.HostStopping, " ("+why+")")
	m.advanceStop()
}

// advanceStop runs the next stop stage whose work is left. It never starts
// a main operation while one runs.
func (m *machine) advanceStop() {
	s := &m.s
	if s.Phase != messages.HostStopping || s.Op != OpNone || s.Blocked != "" || s.Wait == waitSidecars {
		return
	}
	for {
		switch s.Stage {
		case stageSidecars:
			if s.SidecarsUp {
				s.Wait = waitSidecars
				m.add(StopSidecars{})
				return
			}
			s.Stage = stageInstance
		case stageInstance:
			if s.Started {
				m.do(OpStopInstance)
				return
			}
			s.Stage = stageCheckpoint
		case stageCheckpoint:
			if m.cfg.Hibernating && s.NeedFinal && s.Leased && !s.LeaseLost && !s.SkipCheckpoint {
				if s.Saving {
					s.Wait = waitSaving
					return
				}
				m.do(OpCheckpoint)
				return
			}
			s.Stage = stageDue
		case stageDue:
			if m.cfg.Hibernating && s.DueKnown && !s.LeaseLost {
				s.DueKnown = false
				m.do(OpSetDue)
				return
			}
			s.Stage = stageRelease
		case stageRelease:
			m.cancel(TimerRenew)
			if s.Leased {
				m.do(OpRelease)
				return
			}
			m.asleep()
			return
		}
	}
}

// asleep ends the sleep sequence.
func (m *machine) asleep() {
	s := &m.s
	s.Stage, s.Wait = stageNone, waitNone
	why := s.StopReason
	s.StopReason = ""
	m.phase(messages.HostAsleep, " ("+why+")")
	m.emit(messages.KindHostSlept, messages.LevelInfo, "slept ("+why+")")
	m.settle()
}

// stopOpDone moves the sleep sequence on after one of its operations.
func (m *machine) stopOpDone(e OpDone) {
	s := &m.s
	switch e.Op {
	case OpStopInstance:
		if e.Outcome != OK {
			// Not proven exited: the stop stays pending with the lease
			// held; the sweep retries it (ACT-8).
			s.Blocked, s.LastErr = stageInstance, "stop: "+e.Err
			m.emit(messages.KindHostStopPending, messages.LevelWarn, "instance stop not proven, lease kept, retried by the sweep: "+e.Err)
			return
		}
		s.Started = false
		s.Stage = stageCheckpoint
	case OpCheckpoint:
		switch e.Outcome {
		case OK, Unchanged:
			s.NeedFinal = false
			s.Stage = stageDue
		case Lost:
			m.loseLease("final checkpoint fenced: another node claimed the host")
			s.Stage = stageDue
		default:
			// The lease stays held (and renewed) until the checkpoint lands.
			s.Blocked, s.LastErr = stageCheckpoint, "final checkpoint: "+e.Err
			m.emit(messages.KindHostCheckpoint, messages.LevelWarn, "final checkpoint failed, lease kept, retried by the sweep: "+e.Err)
			return
		}
	case OpSetDue:
		if e.Outcome != OK {
			m.emit(messages.KindHostCheckpoint, messages.LevelWarn, "due time not recorded: "+e.Err)
		}
		if s.Phase == messages.HostAsleep {
			m.settle() // retiring
			return
		}
		s.Stage = stageRelease
	case OpRelease:
		s.Leased = false
		switch e.Outcome {
		case OK, Lost:
		default:
			s.Owes = true
			m.emit(messages.KindLeaseReleaseOwed, messages.LevelWarn, "lease release failed, owed and retried: "+e.Err)
		}
		m.asleep()
		return
	}
	m.advanceStop()
}

// sidecarsStopped: the host's sidecars answered SidecarStop.
func (m *machine) sidecarsStopped(proven bool) {
	s := &m.s
	if s.Wait != waitSidecars {
		return
	}
	s.Wait = waitNone
	if !proven {
		s.Blocked = stageSidecars
		m.emit(messages.KindHostStopPending, messages.LevelWarn, "a sidecar stop is not proven; lease kept, retried by the sweep")
		return
	}
	s.SidecarsUp = false
	s.Stage = stageInstance
	m.advanceStop()
}

// loseLease records a lost lease: never checkpoint again (ACT-6).
func (m *machine) loseLease(why string) {
	s := &m.s
	if s.LeaseLost {
		return
	}
	s.Leased, s.LeaseLost, s.SkipCheckpoint = false, true, true
	m.cancel(TimerRenew, TimerCheckpoint)
	m.emit(messages.KindLeaseLost, messages.LevelError, why)
}

// standDown stops an awake or waking host after its lease was lost or its
// instance died (ACT-6).
func (m *machine) standDown(why string) {
	s := &m.s
	switch s.Phase {
	case messages.HostAwake:
		m.emit(messages.KindHostStoodDown, messages.LevelError, why)
		if s.Op != OpNone {
			// The next-due query in flight ends the stand-down.
			s.StopReason, s.Forced = why, true
			m.add(SealGate{})
			return
		}
		m.beginStop(why)
	case messages.HostWaking:
		m.abortWake(why)
	}
}

func (m *machine) instanceExited(code int) {
	s := &m.s
	if !s.Started || s.Phase == messages.HostStopping || s.Phase == messages.HostAsleep {
		return
	}
	m.standDown("instance exited (" + itoa(code) + ")")
}

// workerDone: a standalone worker finished its work (ACT-12): a hibernating
// one parks until its due time, a plain one stays stopped until its next
// deployment.
func (m *machine) workerDone() {
	s := &m.s
	if s.Phase != messages.HostAwake || m.cfg.HasInstance {
		return
	}
	if m.cfg.Hibernating {
		s.Forced = true
		if s.Op == OpNone {
			m.do(OpNextDue)
		}
		return
	}
	m.beginStop("work done")
}

// sweep retries what waits on it (ACT-8): a blocked stop stage, an owed
// release.
func (m *machine) sweep() {
	s := &m.s
	if s.Op != OpNone {
		return
	}
	switch {
	case s.Phase == messages.HostStopping && s.Blocked != "":
		b := s.Blocked
		s.Blocked = ""
		if b == stageCheckpoint && (s.LeaseLost || !s.Leased) {
			s.Stage = stageDue
		}
		m.advanceStop()
	case s.Phase == messages.HostAsleep && s.Owes && !s.Retiring:
		m.do(OpReleaseOwed)
	}
}

// drain: the node shuts down; nothing wakes from now on (ACT-13).
func (m *machine) drain() {
	s := &m.s
	if s.Draining {
		return
	}
	s.Draining = true
	m.refuse("the node is shutting down")
	switch s.Phase {
	case messages.HostAwake:
		m.sleepNow()
	case messages.HostWaking:
		m.abortWake("the node is shutting down")
	case messages.HostAsleep:
		m.settle()
	}
}

// retire: the service is gone; sleep, clear the due time, end.
func (m *machine) retire() {
	s := &m.s
	if s.Retiring {
		return
	}
	s.Retiring, s.Due, s.DueKnown = true, time.Time{}, true
	m.refuse("the service is being removed")
	switch s.Phase {
	case messages.HostAwake:
		m.sleepNow()
	case messages.HostWaking:
		m.abortWake("the service is being removed")
	case messages.HostAsleep:
		m.settle()
	}
}

// definition: a new definition arrived. A running host on an old revision
// sleeps and wakes on the new one; a stopped intent puts it to sleep; a
// standalone worker runs again for a new deployment.
func (m *machine) definition(e Definition) {
	s := &m.s
	lifted := s.StoppedIntent && !e.Stopped
	s.StoppedIntent = e.Stopped
	switch s.Phase {
	case messages.HostAwake:
		if e.Stopped {
			m.sleepNow()
			return
		}
		if e.Changed {
			m.pend(messages.WakeRedeploy)
			m.sleepNow()
		}
	case messages.HostWaking:
		if e.Changed || e.Stopped {
			s.Outdated = true
		}
	case messages.HostStopping:
		if e.Changed && !e.Stopped && !m.cfg.HasInstance {
			m.pend(messages.WakeDeploy)
		}
	case messages.HostAsleep:
		if e.Stopped || s.Draining || s.Retiring {
			return
		}
		if !m.cfg.Hibernating && (e.Changed || lifted) {
			m.wakeAsked(messages.WakeBoot)
			return
		}
		if e.Changed && !m.cfg.HasInstance {
			m.wakeAsked(messages.WakeDeploy)
		}
	}
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
