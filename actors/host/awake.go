package host

import (
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
)

func (m *machine) timer(name string) {
	s := &m.s
	switch name {
	case TimerRenew:
		if s.Leased && !s.Renewing {
			s.Renewing = true
			m.side(SideRenew)
		}
	case TimerReadyCheck:
		if s.Phase == messages.HostWaking && s.Wait == waitReady && s.Op == OpNone {
			s.Op, s.Wait = OpReadyCheck, waitNone
			m.add(Do{Op: OpReadyCheck})
		}
	case TimerIdle:
		if s.Phase == messages.HostAwake && s.Op == OpNone && m.idles() {
			m.add(CheckIdle{})
		}
	case TimerCheckpoint:
		if s.Phase == messages.HostAwake && s.Leased && !s.LeaseLost && !s.Saving {
			s.Saving = true
			m.side(SideCheckpoint)
		}
	}
}

// idleCheck decides whether an awake host is idle (ACT-7): nothing in
// flight (requests, WebSockets, a platform tick) and the idle window passed
// since the last request ended. Then it asks the next due time.
func (m *machine) idleCheck(e IdleCheck) {
	s := &m.s
	if s.Phase != messages.HostAwake || s.Op != OpNone || s.Wait == waitClose || !m.idles() {
		return
	}
	if e.InFlight > 0 || s.Ticking {
		m.arm(TimerIdle, m.now.Add(m.cfg.Idle))
		return
	}
	if at := e.LastActivity.Add(m.cfg.Idle); m.now.Before(at) {
		m.arm(TimerIdle, at)
		return
	}
	m.do(OpNextDue)
}

// nextDueDone: the instance said when it is next due (ACT-10). A due time
// sooner than the idle window keeps the host awake; else the gate closes
// and the host sleeps, unless a request slipped in.
func (m *machine) nextDueDone(e OpDone) {
	s := &m.s
	if !s.Retiring {
		s.Due, s.DueKnown = e.Due, true
	}
	if s.Phase != messages.HostAwake {
		return
	}
	if s.Forced || s.Draining || s.Retiring || s.StoppedIntent || s.Outdated || s.StopReason != "" || !m.idles() {
		s.Forced = false
		why := s.StopReason
		switch {
		case why != "":
		case s.Draining:
			why = "shutdown"
		case s.Retiring:
			why = "removed"
		case s.StoppedIntent:
			why = "stopped"
		case !m.cfg.HasInstance:
			why = "work done"
		default:
			why = "new revision"
		}
		s.StopReason = ""
		m.beginStop(why)
		return
	}
	if !e.Due.IsZero() && e.Due.Sub(m.now) < m.cfg.Idle {
		next := e.Due.Add(time.Second)
		if floor := m.now.Add(m.cfg.DueRecheck); next.Before(floor) {
			next = floor
		}
		m.arm(TimerIdle, next)
		return
	}
	s.Wait = waitClose
	m.add(TryCloseGate{})
}

func (m *machine) gateClosed(ok bool) {
	s := &m.s
	if s.Wait != waitClose {
		return
	}
	s.Wait = waitNone
	if s.Phase != messages.HostAwake {
		return
	}
	if s.Forced || s.StopReason != "" {
		m.nextDueDone(OpDone{Op: OpNextDue, Due: s.Due})
		return
	}
	if !ok {
		// A request slipped in: still in use.
		m.arm(TimerIdle, m.now.Add(m.cfg.Idle))
		return
	}
	m.beginStop("idle")
}

func (m *machine) sideDone(e SideDone) {
	s := &m.s
	switch e.Op {
	case SideRenew:
		s.Renewing = false
		if e.Outcome != OK {
			if !s.Leased {
				return
			}
			m.loseLease("lease renew failed: " + e.Err)
			m.standDown("lease lost")
			return
		}
		if s.Leased {
			m.arm(TimerRenew, m.now.Add(m.cfg.RenewEvery))
		}
	case SideCheckpoint:
		s.Saving = false
		switch e.Outcome {
		case OK, Unchanged:
			s.SaveFailing = false
			m.armCheckpoint(false)
		case Lost:
			m.loseLease("checkpoint fenced: another node claimed the host")
			m.standDown("lease lost")
		default:
			if !s.SaveFailing {
				m.emit(messages.KindHostCheckpoint, messages.LevelWarn, "checkpoint failed, retried: "+e.Err)
			}
			s.SaveFailing = true
			retry := m.cfg.CheckpointRetry
			if m.cfg.Replication == stackfile.ReplicationStream {
				retry = m.cfg.StreamScan
			}
			if s.Phase == messages.HostAwake {
				m.arm(TimerCheckpoint, m.now.Add(retry))
			}
		}
		if s.Wait == waitSaving {
			s.Wait = waitNone
			m.advanceStop()
		}
	case SideTick:
		s.Ticking = false
		if s.Phase == messages.HostAwake && s.Op == OpNone {
			m.add(CheckIdle{})
		}
	}
}

// armCheckpoint arms the next periodic checkpoint by replication class
// (ACT-9): stream scans for a change every second, batched saves every
// 5m, daily at wake and every 24h.
func (m *machine) armCheckpoint(atWake bool) {
	if m.s.Phase != messages.HostAwake || !m.s.Leased {
		return
	}
	var next time.Duration
	switch m.cfg.Replication {
	case stackfile.ReplicationStream:
		next = m.cfg.StreamScan
	case stackfile.ReplicationDaily:
		next = m.cfg.DailyEvery
		if atWake {
			next = 0
		}
	default:
		next = m.cfg.BatchedEvery
	}
	m.arm(TimerCheckpoint, m.now.Add(next))
}
