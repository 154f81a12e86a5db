package replica

import (
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
)

// newFastSim is a replica of a service with no port on a driver that can
// restart a run itself (drivers.RestartWatcher), as the daemon runs one.
func newFastSim(t *testing.T) *sim {
	m := newSim(t, false)
	m.cfg.Policy.FailClosed, m.cfg.Policy.NoRotation, m.cfg.Policy.DriverRestarts = true, true, true
	return m
}

// watch is the last step's StartWatch, ok false when there is none.
func (m *sim) watch() (StartWatch, bool) {
	for _, f := range m.fx {
		if w, ok := f.(StartWatch); ok {
			return w, true
		}
	}
	return StartWatch{}, false
}

func (m *sim) wantWatch(restart bool) *sim {
	m.t.Helper()
	if w, ok := m.watch(); !ok || w.Restart != restart {
		m.t.Fatalf("watch %+v (%v), want one with Restart %v; effects %+v", w, ok, restart, m.fx)
	}
	return m
}

// driverRestart is the exit of the current run that the driver restarted.
func (m *sim) driverRestart() *sim {
	m.t.Helper()
	m.now = m.now.Add(time.Second)
	return m.do(Exited{Exit: drivers.Exit{Signal: "killed", ExitCode: -1, At: m.now, Restarted: true}})
}

// PERF-1, SUP-10: a run gets a watch that authorizes the driver to
// restart it at once exactly while the ladder would restart its next
// failure at once: 3 at once, then the 1m wait is the replica's own. Each
// restart the driver makes is charged and counted as the replica's own
// (replica.failed, then replica.restarted with the count), and no start
// call is made for it.
func TestPERF1RestartAtOnceFollowsTheLadder(t *testing.T) {
	m := newFastSim(t)
	m.do(Begin{}).do(OpDone{Op: OpCreate}).do(OpDone{Op: OpStart}).wantWatch(false)
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantWatch(true)
	for i := 1; i <= 3; i++ {
		m.driverRestart().wantOp(OpInspect).wantEvent(messages.KindReplicaFailed).wantWatch(false)
		if count[DoOp](m.fx) != 1 || m.s.Restarts != i || m.s.Entry.Failures != i {
			t.Fatalf("restart %d: effects %+v, restarts %d, failures %d", i, m.fx, m.s.Restarts, m.s.Entry.Failures)
		}
		m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantEvent(messages.KindReplicaRestarted)
		if e := m.event(messages.KindReplicaRestarted); e.Level != messages.LevelInfo {
			t.Fatalf("restart %d announced as %+v", i, e)
		}
		if w, ok := m.watch(); !ok || w.Restart != (i < 3) {
			t.Fatalf("after restart %d (failures %d): watch %+v %v, want one authorizing a restart at once only while failures < 3", i, m.s.Entry.Failures, w, ok)
		}
	}
	// The 4th failure waits the ladder's 1m: the replica's own restart.
	m.now = m.now.Add(time.Second)
	m.do(Exited{Exit: drivers.Exit{Signal: "killed", ExitCode: -1, At: m.now}}).wantOp(OpNone).wantPhase(PhaseDown, false)
	if at := m.timer(TimerRestart); at.Sub(m.now) != time.Minute {
		t.Fatalf("next attempt in %s, want 1m", at.Sub(m.now))
	}
}

// PERF-1: no authorization where the replica would not restart at once
// itself: a service with a port (the restart waits for the withdrawal,
// SVC-30), a restart policy none or with max_attempts, a driver that
// cannot restart, a stopped intent.
func TestPERF1NoRestartAtOnceWhereThePolicySaysWait(t *testing.T) {
	for name, change := range map[string]func(*sim){
		"ports":        func(m *sim) { m.cfg.Policy.NoRotation = false },
		"none":         func(m *sim) { m.cfg.Policy.Condition = "none" },
		"max attempts": func(m *sim) { m.cfg.Policy.MaxAttempts = 5 },
		"driver":       func(m *sim) { m.cfg.Policy.DriverRestarts = false },
		"no immediate": func(m *sim) { m.cfg.Ladder.Immediate = 0 },
	} {
		m := newFastSim(t)
		change(m)
		m.do(Begin{}).do(OpDone{Op: OpCreate}).do(OpDone{Op: OpStart})
		m.do(OpDone{Op: OpInspect, Status: running(m.now)})
		if w, ok := m.watch(); ok && w.Restart {
			t.Errorf("%s: a restart at once was authorized", name)
		}
	}
	m := newFastSim(t).boot()
	m.do(Command{Intent: messages.IntentStop}).wantOp(OpStop)
	if w, ok := m.watch(); ok && w.Restart {
		t.Errorf("stop: a restart at once was authorized")
	}
}

// SVC-30: a service with no port has no rotation to withdraw a replica
// from, so a dead instance is restarted without asking the service.
func TestSVC30NoRotationNoWithdrawal(t *testing.T) {
	m := newFastSim(t)
	m.cfg.Policy.DriverRestarts = false
	m.boot()
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1, At: m.now}}).wantOp(OpStart)
	if m.s.Withdraw {
		t.Fatal("asked for a withdrawal with nothing to withdraw from")
	}
	m = newFastSim(t)
	m.cfg.Policy.DriverRestarts, m.cfg.Policy.NoRotation = false, false
	m.boot()
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1, At: m.now}}).wantOp(OpNone)
	if !m.s.Withdraw {
		t.Fatal("a replica of a service with ports restarted without its withdrawal")
	}
}

// PERF-1, SVC-9: while a restart at once is authorized, an inspection
// that finds a new run is the driver's restart whose exit is on its way:
// not taken for a restart outside engenho, and the exit then counts it
// once. An exit of a run before the current one, already seen stopped
// and restarted by the replica, counts nothing.
func TestPERF1RestartRacesWithInspection(t *testing.T) {
	m := newFastSim(t).boot()
	first := m.s.StartedAt
	m.now = m.now.Add(time.Minute)
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).noEvent(messages.KindReplicaRestarted)
	if !m.s.StartedAt.Equal(first) || m.s.Restarts != 0 {
		t.Fatalf("the new run was taken in: %+v", m.s)
	}
	m.driverRestart().wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantEvent(messages.KindReplicaRestarted)
	if m.s.Restarts != 1 || m.s.Entry.Failures != 1 {
		t.Fatalf("restarts %d failures %d, want 1 and 1", m.s.Restarts, m.s.Entry.Failures)
	}

	// An inspection found the run stopped first and the replica restarted
	// it (the driver's start came first; the replica's is a no-op).
	m = newFastSim(t).boot()
	exitAt := m.now.Add(time.Second)
	m.now = m.now.Add(2 * time.Second)
	m.do(Tick{Name: TimerSweep}).do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateStopped, ExitCode: -1}}).wantOp(OpStart)
	m.do(OpDone{Op: OpStart}).do(OpDone{Op: OpInspect, Status: running(m.now)}).wantEvent(messages.KindReplicaRestarted)
	m.do(Exited{Exit: drivers.Exit{Signal: "killed", ExitCode: -1, At: exitAt, Restarted: true}}).noEvent(messages.KindReplicaFailed)
	if count[DoOp](m.fx) != 0 || m.s.Restarts != 1 || m.s.Entry.Failures != 1 || !m.s.Running {
		t.Fatalf("a stale exit counted: effects %+v, restarts %d failures %d running %v", m.fx, m.s.Restarts, m.s.Entry.Failures, m.s.Running)
	}

	// The restart comes while an inspection asked before it is in flight:
	// its answer is not believed, the replica asks again.
	m = newFastSim(t).boot()
	m.now = m.now.Add(time.Minute)
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.driverRestart()
	if count[DoOp](m.fx) != 0 || m.s.Op != OpInspect {
		t.Fatalf("a second driver call while one is in flight: %+v", m.fx)
	}
	m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateStopped}}).wantOp(OpInspect).noEvent(messages.KindReplicaFailed)
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantEvent(messages.KindReplicaRestarted)
	if m.s.Restarts != 1 || m.s.Entry.Failures != 1 {
		t.Fatalf("restarts %d failures %d, want 1 and 1", m.s.Restarts, m.s.Entry.Failures)
	}
}

// PERF-1: a restart watch the driver refused authorizes nothing; a new
// run found by inspection is again a restart outside engenho (SVC-9).
func TestPERF1WatchLostAuthorizesNothing(t *testing.T) {
	m := newFastSim(t).boot()
	m.do(WatchLost{})
	m.now = m.now.Add(time.Minute)
	m.do(Tick{Name: TimerSweep}).do(OpDone{Op: OpInspect, Status: running(m.now)}).wantEvent(messages.KindReplicaRestarted)
	if e := m.event(messages.KindReplicaRestarted); e.Level != messages.LevelWarn {
		t.Fatalf("%+v, want the warning of a restart outside engenho", e)
	}
}

// PERF-1, SUP-11: a ledger reset by a stable window authorizes restarts
// at once again.
func TestPERF1StableWindowRearms(t *testing.T) {
	m := newFastSim(t)
	m.cfg.Ladder.Immediate = 1
	m.boot().wantWatch(true)
	m.driverRestart()
	m.do(OpDone{Op: OpInspect, Status: running(m.now)})
	if w, ok := m.watch(); ok && w.Restart {
		t.Fatalf("authorized past the ladder's immediate failures")
	}
	m.now = m.s.Entry.StableSince.Add(m.cfg.Ladder.Stable)
	m.do(Tick{Name: TimerStable}).wantWatch(true)
	if m.s.HasEntry {
		t.Fatal("the stable window did not drop the ledger")
	}
}
