package replica

import (
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

func failClosedSim(t *testing.T, hc bool) *sim {
	m := newSim(t, hc)
	m.cfg.Policy.FailClosed = true
	return m
}

func runningPid(at time.Time, pid int) drivers.Status {
	st := running(at)
	st.Pid = pid
	st.Labels = drivers.Labels{drivers.LabelRevision: "r1", drivers.LabelDeployment: "1"}
	return st
}

// bootFC takes a fail-closed replica to running, probed healthy and
// verified: in rotation.
func (m *sim) bootFC() *sim {
	m.t.Helper()
	m.do(Begin{}).wantOp(OpCreate)
	m.do(OpDone{Op: OpCreate}).wantOp(OpStart)
	m.do(OpDone{Op: OpStart}).wantOp(OpInspect)
	if !m.cfg.Probe.Enabled() {
		return m.do(OpDone{Op: OpInspect, Status: runningPid(m.now, 100)}).wantPhase(PhaseServing, true)
	}
	m.do(OpDone{Op: OpInspect, Status: runningPid(m.now, 100)}).wantOp(OpNone).wantPhase(PhaseProbing, false)
	m.do(result(probe.Healthy, m.now)).wantOp(OpInspect).wantPhase(PhaseProbing, false)
	return m.do(OpDone{Op: OpInspect, Status: runningPid(m.now, 100)}).wantPhase(PhaseServing, true)
}

// SVC-31: a ready probe publishes only after an inspection shows the same
// run; a changed start time, pid or generation aborts the publication.
func TestSVC31StaleEvidenceNeverPublishes(t *testing.T) {
	cases := []struct {
		name   string
		change func(st drivers.Status) drivers.Status
	}{
		{"start time", func(st drivers.Status) drivers.Status { st.StartedAt = st.StartedAt.Add(time.Second); return st }},
		{"pid", func(st drivers.Status) drivers.Status { st.Pid = 101; return st }},
		{"generation", func(st drivers.Status) drivers.Status {
			st.Labels = drivers.Labels{drivers.LabelRevision: "r2"}
			return st
		}},
		{"state", func(st drivers.Status) drivers.Status { st.State = drivers.StateStopped; return st }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := failClosedSim(t, true)
			m.do(Begin{}).do(OpDone{Op: OpCreate}).do(OpDone{Op: OpStart})
			m.do(OpDone{Op: OpInspect, Status: runningPid(m.now, 100)})
			m.do(result(probe.Healthy, m.now)).wantOp(OpInspect).wantPhase(PhaseProbing, false)
			m.do(OpDone{Op: OpInspect, Status: c.change(runningPid(m.now, 100))}).wantEvent(messages.KindRecoveryStale)
			if m.s.InRotation {
				t.Fatal("published on stale evidence")
			}
		})
	}
	// The same run is published.
	failClosedSim(t, true).bootFC().noEvent(messages.KindRecoveryStale)
}

// SVC-31: after a stale verification the new run is probed and verified
// again, then published.
func TestSVC31StaleRunVerifiedAgain(t *testing.T) {
	m := failClosedSim(t, true)
	m.do(Begin{}).do(OpDone{Op: OpCreate}).do(OpDone{Op: OpStart})
	m.do(OpDone{Op: OpInspect, Status: runningPid(m.now, 100)})
	m.do(result(probe.Healthy, m.now))
	m.now = m.now.Add(time.Second)
	m.do(OpDone{Op: OpInspect, Status: runningPid(m.now, 200)}).wantEvent(messages.KindRecoveryStale).wantPhase(PhaseProbing, false)
	m.do(result(probe.Healthy, m.now)).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: runningPid(m.now, 200)}).wantPhase(PhaseServing, true)
}

// SVC-30: a served instance that turned unhealthy is not stopped before
// the service has withdrawn it; a dead one is not restarted before.
func TestSVC30WithdrawBeforeTouch(t *testing.T) {
	m := failClosedSim(t, true).bootFC()
	m.now = m.now.Add(10 * time.Second)
	m.do(result(probe.Unhealthy, m.now))
	m.do(result(probe.Unhealthy, m.now)).wantOp(OpNone)
	if !m.s.Withdraw {
		t.Fatal("restart for health did not ask for a withdrawal")
	}
	m.do(Withdrawn{OK: true}).wantOp(OpStop)
	if m.s.Withdraw {
		t.Fatal("still asking after the answer")
	}

	d := failClosedSim(t, false)
	d.do(Begin{}).do(OpDone{Op: OpCreate}).do(OpDone{Op: OpStart})
	d.do(OpDone{Op: OpInspect, Status: runningPid(d.now, 100)}).wantPhase(PhaseServing, true)
	d.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantOp(OpNone)
	if !d.s.Withdraw {
		t.Fatal("restart of a dead instance did not ask for a withdrawal")
	}
	// A refused withdrawal (OK false) still lets the dead instance be
	// repaired; the service is publication-inhibited instead.
	d.do(Withdrawn{OK: false}).wantOp(OpStart)
}

// SVC-32: paused, unknown or no state: neither restarted, stopped nor
// deleted, with an error naming instance and state; starting and
// restarting are observed and inspected again.
func TestSVC32UnsafeStatesRefused(t *testing.T) {
	for _, st := range []drivers.State{drivers.StatePaused, drivers.StateUnknown, ""} {
		for _, intent := range []messages.Intent{messages.IntentRun, messages.IntentRetire, messages.IntentStop} {
			m := failClosedSim(t, false).bootFC()
			found := drivers.Status{Name: "s-web-1-abc", State: st}
			m.do(Command{Intent: intent})
			if m.s.Op == OpNone {
				m.do(Tick{Name: TimerSweep})
			}
			if m.s.Op != OpInspect {
				m.s.Op = OpInspect // the sweep's inspection is the one in flight
			}
			m.do(OpDone{Op: OpInspect, Status: found}).wantOp(OpNone).wantEvent(messages.KindRecoveryRefused)
			want := "instance s-web-1-abc is in state " + stateName(st) + ": recovery refuses to restart or delete it"
			if m.s.Refused != want || m.s.InRotation {
				t.Fatalf("%s/%s: refused %q rotation %v", st, intent, m.s.Refused, m.s.InRotation)
			}
			for _, e := range []Event{Exited{Exit: drivers.Exit{ExitCode: 1}}, Tick{Name: TimerRestart}, messages.ReplicaRetry{}} {
				m.do(e)
				if n := count[DoOp](m.fx); n != 0 {
					t.Fatalf("%s/%s: a driver call after %T: %+v", st, intent, e, m.fx)
				}
			}
			m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
			m.do(OpDone{Op: OpInspect, Status: found}).noEvent(messages.KindRecoveryRefused) // said once
		}
	}
	for _, st := range []drivers.State{drivers.StateStarting, drivers.StateRestarting} {
		m := failClosedSim(t, false).bootFC()
		m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
		m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: st}}).wantOp(OpNone).noEvent(messages.KindRecoveryRefused)
		if m.s.Refused != "" || m.timer(TimerSweep).IsZero() {
			t.Fatalf("%s: not observed and retried", st)
		}
	}
}

// SVC-33: a failed stop or delete of a retiring instance is reported.
func TestSVC33RetireErrorReported(t *testing.T) {
	m := failClosedSim(t, false).bootFC()
	m.do(Command{Intent: messages.IntentRetire}).wantOp(OpStop)
	m.do(OpDone{Op: OpStop, Err: drivers.Errorf("fake", "stop", "x", drivers.ErrInvalid, "boom")}).wantOp(OpNone)
	if m.s.RetireError == "" {
		t.Fatal("failed retirement not reported")
	}
}

// SVC-30..SVC-32, as properties: with fail-closed recovery an instance
// published since the last withdrawal is never stopped, started or
// deleted under a run intent; nothing but inspections happen while it is
// refused; and it enters rotation only on an inspection (the
// verification) when it has a healthcheck.
func TestSVC30to32FailClosedProperties(t *testing.T) {
	ops := []Op{OpCreate, OpStart, OpStop, OpDelete, OpInspect}
	states := []drivers.State{drivers.StateRunning, drivers.StateStopped, drivers.StateStarting, drivers.StatePaused, drivers.StateUnknown, ""}
	rapid.Check(t, func(t *rapid.T) {
		hc := rapid.Bool().Draw(t, "hc")
		cfg := testConfig(hc)
		cfg.Policy.FailClosed = true
		s := State{Intent: messages.IntentRun}
		now := t0
		s, _ = Step(cfg, s, Begin{}, now)
		published := false
		for i := 0; i < 100; i++ {
			now = now.Add(time.Duration(rapid.IntRange(0, 60).Draw(t, "wait")) * time.Second)
			var e Event
			switch rapid.IntRange(0, 7).Draw(t, "event") {
			case 0, 1:
				var err error
				if rapid.IntRange(0, 3).Draw(t, "fail") == 0 {
					err = drivers.Errorf("fake", "x", "x", rapid.SampledFrom([]error{drivers.ErrTransient, drivers.ErrNotFound, drivers.ErrInvalid}).Draw(t, "kind"), "")
				}
				st := drivers.Status{State: rapid.SampledFrom(states).Draw(t, "state"),
					StartedAt: t0.Add(time.Duration(rapid.IntRange(0, 2).Draw(t, "start")) * time.Second),
					Pid:       rapid.IntRange(1, 2).Draw(t, "pid")}
				e = OpDone{Op: rapid.SampledFrom(ops).Draw(t, "op"), Err: err, Status: st}
			case 2:
				e = Exited{Exit: drivers.Exit{ExitCode: 1}}
			case 3:
				e = result(rapid.SampledFrom([]probe.Outcome{probe.Healthy, probe.Unhealthy}).Draw(t, "outcome"), now)
			case 4, 5:
				e = Tick{Name: rapid.SampledFrom([]string{TimerRestart, TimerProbe, TimerSweep, TimerStable}).Draw(t, "timer")}
			case 6:
				e = Withdrawn{OK: rapid.Bool().Draw(t, "ok")}
			default:
				e = Command{Intent: rapid.SampledFrom([]messages.Intent{messages.IntentRun, messages.IntentStop}).Draw(t, "intent")}
			}
			prev := s
			var fx []step.Effect
			s, fx = Step(cfg, s, e, now)
			if _, ok := e.(Withdrawn); ok && prev.Withdraw {
				published = false
			}
			for _, f := range fx {
				op, ok := f.(DoOp)
				if !ok || op.Op == OpInspect {
					continue
				}
				if prev.Refused != "" && s.Refused != "" {
					t.Fatalf("%s while refused (%s) after %T", op.Op, s.Refused, e)
				}
				if published && s.Intent == messages.IntentRun && op.Op != OpCreate {
					t.Fatalf("%s of a published instance before its withdrawal (after %T)", op.Op, e)
				}
			}
			if s.InRotation && !prev.InRotation {
				if d, ok := e.(OpDone); hc && (!ok || d.Op != OpInspect) {
					t.Fatalf("published after %T, not after a verifying inspection", e)
				}
				published = true
			}
			if s.InRotation && (s.withdrawn || s.Withdraw) {
				t.Fatalf("in rotation yet counted as withdrawn (%v) or asking (%v) after %T", s.withdrawn, s.Withdraw, e)
			}
			if s.InRotation && s.Refused != "" {
				t.Fatalf("in rotation while refused")
			}
			if s.Done {
				return
			}
		}
	})
}

// SVC-33: a delete that fails while retiring is not retried blind. The
// instance is inspected first: one that runs again (a stop that raced an
// incusd restart) is stopped before the next delete, one
// that is gone ends the retirement. Seen in a chaos run: "delete: instance
// is running; stop it first", retried forever.
func TestSVC33FailedDeleteRereadsTheInstance(t *testing.T) {
	refusedDelete := drivers.Errorf("incus", "delete", "x", drivers.ErrInvalid, "instance is running; stop it first")
	m := failClosedSim(t, false).bootFC()
	m.do(Command{Intent: messages.IntentRetire}).wantOp(OpStop)
	m.do(OpDone{Op: OpStop}).wantOp(OpDelete)
	m.do(OpDone{Op: OpDelete, Err: refusedDelete}).wantOp(OpNone)
	m.now = m.now.Add(m.cfg.Policy.TransientRetry)
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: runningPid(m.now, 200)}).wantOp(OpStop)
	if m.s.InRotation {
		t.Fatal("a retiring instance found running was published")
	}
	m.do(OpDone{Op: OpStop}).wantOp(OpDelete)
	m.do(OpDone{Op: OpDelete}).wantOp(OpNone)
	if !m.s.Done {
		t.Fatalf("retirement did not end: phase %s", m.s.Phase)
	}

	gone := failClosedSim(t, false).bootFC()
	gone.do(Command{Intent: messages.IntentRetire}).do(OpDone{Op: OpStop}).wantOp(OpDelete)
	gone.do(OpDone{Op: OpDelete, Err: refusedDelete})
	gone.now = gone.now.Add(gone.cfg.Policy.TransientRetry)
	gone.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	gone.do(OpDone{Op: OpInspect, Err: drivers.Errorf("incus", "inspect", "x", drivers.ErrNotFound, "gone")}).wantOp(OpNone)
	if !gone.s.Done {
		t.Fatalf("an instance gone while its delete was retried: retirement did not end (phase %s)", gone.s.Phase)
	}
}
