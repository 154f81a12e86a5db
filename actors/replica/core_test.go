package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/probe"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig(hc bool) Config {
	c := Config{
		Ladder: ladder.Default(),
		Policy: Policy{Condition: "any", UnhealthyThreshold: 2, RestartsBeforeReplace: 3, StopGrace: time.Second, Sweep: 30 * time.Second, TransientRetry: 5 * time.Second},
	}
	if hc {
		c.Probe = probe.Config{Kind: probe.KindExec, Command: []string{"true"}, Interval: 10 * time.Second, Timeout: time.Second, Retries: 1, StartInterval: time.Second}.WithDefaults()
	}
	return c
}

// sim drives the pure core the way the actor shell does.
type sim struct {
	t   *testing.T
	cfg Config
	s   State
	now time.Time
	fx  []step.Effect
}

func newSim(t *testing.T, hc bool) *sim {
	return &sim{t: t, cfg: testConfig(hc), s: State{Intent: messages.IntentRun}, now: t0}
}

func (m *sim) do(e Event) *sim {
	m.t.Helper()
	m.s, m.fx = Step(m.cfg, m.s, e, m.now)
	return m
}

func (m *sim) wantOp(op Op) *sim {
	m.t.Helper()
	if m.s.Op != op {
		m.t.Fatalf("op %q, want %q (phase %s, effects %+v)", m.s.Op, op, m.s.Phase, m.fx)
	}
	return m
}

func (m *sim) wantPhase(p Phase, inRotation bool) *sim {
	m.t.Helper()
	if m.s.Phase != p || m.s.InRotation != inRotation {
		m.t.Fatalf("phase %s rotation %v, want %s %v", m.s.Phase, m.s.InRotation, p, inRotation)
	}
	return m
}

func (m *sim) wantEvent(kind string) *sim {
	m.t.Helper()
	for _, f := range m.fx {
		if e, ok := f.(step.Emit); ok && e.Kind == kind {
			return m
		}
	}
	m.t.Fatalf("no %s event in %+v", kind, m.fx)
	return m
}

func (m *sim) noEvent(kind string) *sim {
	m.t.Helper()
	for _, f := range m.fx {
		if e, ok := f.(step.Emit); ok && e.Kind == kind {
			m.t.Fatalf("a %s event in %+v", kind, m.fx)
		}
	}
	return m
}

// event is the one event of kind in the last step's effects.
func (m *sim) event(kind string) step.Emit {
	m.t.Helper()
	var got []step.Emit
	for _, f := range m.fx {
		if e, ok := f.(step.Emit); ok && e.Kind == kind {
			got = append(got, e)
		}
	}
	if len(got) != 1 {
		m.t.Fatalf("%d %s events in %+v, want one", len(got), kind, m.fx)
	}
	return got[0]
}

func (m *sim) timer(name string) time.Time {
	m.t.Helper()
	for _, f := range m.fx {
		if a, ok := f.(step.Arm); ok && a.Timer == name {
			return a.At
		}
	}
	m.t.Fatalf("no %s timer in %+v", name, m.fx)
	return time.Time{}
}

func running(at time.Time) drivers.Status {
	return drivers.Status{State: drivers.StateRunning, StartedAt: at, Addresses: map[int]string{80: "127.0.0.1:4000"}}
}

func result(o probe.Outcome, at time.Time) Probed {
	return Probed{Result: probe.Result{Outcome: o, At: at, Output: o.String()}}
}

// boot takes a fresh replica to running and probing.
func (m *sim) boot() *sim {
	m.do(Begin{}).wantOp(OpCreate)
	m.do(OpDone{Op: OpCreate}).wantOp(OpStart)
	m.do(OpDone{Op: OpStart}).wantOp(OpInspect)
	return m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantOp(OpNone)
}

// SVC-6: creating → starting → probing → serving, in rotation only once
// healthy.
func TestSVC6LifecycleToServing(t *testing.T) {
	m := newSim(t, true).boot().wantPhase(PhaseProbing, false)
	m.do(result(probe.Healthy, m.now)).wantPhase(PhaseServing, true)
}

// SVC-6: with no healthcheck a replica is in rotation while its process runs.
func TestSVC6NoHealthcheckServesWhileRunning(t *testing.T) {
	m := newSim(t, false).boot().wantPhase(PhaseServing, true)
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantPhase(PhaseStarting, false).wantOp(OpStart)
}

// SUP-14: 2 consecutive unhealthy observations before a restart; probe
// errors change nothing.
func TestSUP14UnhealthyThreshold(t *testing.T) {
	m := newSim(t, true).boot()
	m.do(result(probe.Healthy, m.now)).wantPhase(PhaseServing, true)
	m.now = m.now.Add(10 * time.Second)
	m.do(result(probe.Unhealthy, m.now)).wantPhase(PhaseUnhealthy, false).wantOp(OpNone)
	m.do(result(probe.Error, m.now)).wantPhase(PhaseUnhealthy, false).wantOp(OpNone)
	m.do(result(probe.Unhealthy, m.now)).wantOp(OpStop).wantEvent(messages.KindReplicaFailed)
	m.do(OpDone{Op: OpStop}).wantOp(OpStart)
	m.do(OpDone{Op: OpStart}).do(OpDone{Op: OpInspect, Status: running(m.now.Add(time.Second))}).wantEvent(messages.KindReplicaRestarted)
}

// SUP-14: results while starting (inside the start period) never count.
func TestSUP14StartingNeverCounts(t *testing.T) {
	m := newSim(t, true)
	m.cfg.Probe.StartPeriod = time.Minute
	m.boot()
	for i := 0; i < 10; i++ {
		m.now = m.now.Add(time.Second)
		m.do(result(probe.Unhealthy, m.now)).wantPhase(PhaseProbing, false).wantOp(OpNone)
	}
}

// SUP-15: restarted 3 times for being unhealthy without becoming healthy,
// the replica asks for a fresh instance.
func TestSUP15ReplaceAfterThreeHealthRestarts(t *testing.T) {
	m := newSim(t, true)
	m.cfg.Ladder.Immediate = 10
	m.boot()
	for i := 0; i < 3; i++ {
		m.now = m.now.Add(10 * time.Second) // one interval: failures count (SVC-7)
		m.do(result(probe.Unhealthy, m.now))
		m.do(result(probe.Unhealthy, m.now)).wantOp(OpStop)
		m.do(OpDone{Op: OpStop}).wantOp(OpStart)
		m.do(OpDone{Op: OpStart})
		m.now = m.now.Add(time.Second)
		m.do(OpDone{Op: OpInspect, Status: running(m.now)})
	}
	m.now = m.now.Add(10 * time.Second)
	m.do(result(probe.Unhealthy, m.now))
	m.do(result(probe.Unhealthy, m.now)).wantEvent(messages.KindReplicaReplaced).wantOp(OpStop)
	if !m.s.Replace {
		t.Fatal("not marked for replacement")
	}
	m.do(OpDone{Op: OpStop}).wantOp(OpDelete)
	m.do(OpDone{Op: OpDelete}).wantPhase(PhaseGone, false)
	if _, ok := m.fx[len(m.fx)-1].(step.End); !ok {
		t.Fatalf("no End effect: %+v", m.fx)
	}
}

// SUP-10, SUP-12: a workload that dies right after every successful start
// climbs the ladder: 3 at once, then 1m, 2m.
func TestSUP12DyingAfterEveryStartClimbsTheLadder(t *testing.T) {
	m := newSim(t, false).boot()
	var waits []time.Duration
	for i := 0; i < 5; i++ {
		m.do(Exited{Exit: drivers.Exit{ExitCode: 1}})
		if m.s.Op == OpStart {
			waits = append(waits, 0)
		} else {
			at := m.timer(TimerRestart)
			waits = append(waits, at.Sub(m.now))
			m.now = at
			m.do(Tick{Name: TimerRestart}).wantOp(OpStart)
		}
		m.do(OpDone{Op: OpStart})
		m.now = m.now.Add(time.Second)
		m.do(OpDone{Op: OpInspect, Status: running(m.now)})
	}
	want := fmt.Sprint([]time.Duration{0, 0, 0, time.Minute, 2 * time.Minute})
	if fmt.Sprint(waits) != want {
		t.Fatalf("waits %v, want %s", waits, want)
	}
	if m.s.Restarts != 5 {
		t.Fatalf("restarts %d", m.s.Restarts)
	}
}

// SUP-11: 5m continuously healthy and in rotation drops the ledger entry.
func TestSUP11StableWindowDropsEntry(t *testing.T) {
	m := newSim(t, true).boot()
	m.do(result(probe.Healthy, m.now))
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantOp(OpStart)
	m.do(OpDone{Op: OpStart})
	m.do(OpDone{Op: OpInspect, Status: running(m.now)})
	m.do(result(probe.Healthy, m.now))
	at := m.timer(TimerStable)
	if !m.s.HasEntry || at.Sub(m.now) != 5*time.Minute {
		t.Fatalf("entry %v stable timer at +%s", m.s.HasEntry, at.Sub(m.now))
	}
	m.now = at
	m.do(Tick{Name: TimerStable})
	if m.s.HasEntry {
		t.Fatal("entry kept after 5m stable")
	}
}

// SUP-16: restart policy none leaves a dead replica down; on-failure leaves
// a clean exit down; max_attempts within window is a limit.
func TestSUP16RestartPolicy(t *testing.T) {
	m := newSim(t, false)
	m.cfg.Policy.Condition = "none"
	m.boot().do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantPhase(PhaseFailed, false).wantOp(OpNone).wantEvent(messages.KindReplicaLimit)

	m = newSim(t, false)
	m.cfg.Policy.Condition = "on-failure"
	m.boot().do(Exited{Exit: drivers.Exit{ExitCode: 0}}).wantPhase(PhaseFailed, false).wantOp(OpNone)

	m = newSim(t, false)
	m.cfg.Policy.MaxAttempts, m.cfg.Policy.Window = 2, time.Minute
	m.boot()
	for i := 0; i < 2; i++ {
		m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantOp(OpStart)
		m.do(OpDone{Op: OpStart})
		m.do(OpDone{Op: OpInspect, Status: running(m.now.Add(time.Duration(i+1) * time.Second))})
	}
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantPhase(PhaseFailed, false).wantEvent(messages.KindReplicaLimit)
	// An operator's retry clears the backoff and the spent policy (SUP-17).
	m.do(messages.ReplicaRetry{}).wantOp(OpStart)
	if m.s.HasEntry {
		t.Fatal("retry kept the ledger")
	}
	m.do(OpDone{Op: OpStart}).do(OpDone{Op: OpInspect, Status: running(m.now.Add(time.Hour))})
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).do(OpDone{Op: OpStart}).do(OpDone{Op: OpInspect, Status: running(m.now.Add(2 * time.Hour))})
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).do(OpDone{Op: OpStart}).do(OpDone{Op: OpInspect, Status: running(m.now.Add(3 * time.Hour))})
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantPhase(PhaseFailed, false)
	// An operator's start lifts the limit.
	m.do(Command{Intent: messages.IntentStop}).do(Command{Intent: messages.IntentRun}).wantOp(OpStart)
}

// SVC-8: a transient inspect error changes nothing; after a failed start, an
// instance that runs anyway is charged nothing; a missing one is replaced.
func TestSVC8ConservativeRecovery(t *testing.T) {
	m := newSim(t, true).boot()
	m.do(result(probe.Healthy, m.now))
	before := m.s
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Err: drivers.Errorf("fake", "inspect", "x", drivers.ErrTransient, "")}).wantPhase(PhaseServing, true).wantOp(OpNone)
	if m.s.HasEntry != before.HasEntry || m.s.Restarts != before.Restarts {
		t.Fatal("transient error changed the ledger")
	}

	m = newSim(t, false)
	m.do(Begin{}).do(OpDone{Op: OpCreate})
	m.do(OpDone{Op: OpStart, Err: drivers.Errorf("fake", "start", "x", drivers.ErrInvalid, "boom")}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantPhase(PhaseServing, true)
	if m.s.HasEntry {
		t.Fatal("a failed start that something else fixed was charged")
	}

	m = newSim(t, true).boot()
	m.do(Tick{Name: TimerSweep})
	m.do(OpDone{Op: OpInspect, Err: drivers.Errorf("fake", "inspect", "x", drivers.ErrNotFound, "")}).wantEvent(messages.KindReplicaReplaced)
	if !m.s.Replace || m.s.InRotation || m.s.Op == OpCreate {
		t.Fatalf("missing instance: replace %v rotation %v op %s", m.s.Replace, m.s.InRotation, m.s.Op)
	}
}

// SVC-8: transitional states are observed, not acted on.
func TestSVC8TransitionalObserved(t *testing.T) {
	m := newSim(t, true)
	m.do(Begin{Adopt: &drivers.Status{State: drivers.StateRestarting}}).wantPhase(PhaseAdopting, false).wantOp(OpNone)
	m.now = m.timer(TimerSweep)
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantPhase(PhaseProbing, false)
}

// SVC-9: a start time that changed behind engenho's back takes the replica
// out of rotation until it is verified healthy again.
func TestSVC9StartTimeChanged(t *testing.T) {
	m := newSim(t, true).boot()
	m.do(result(probe.Healthy, m.now)).wantPhase(PhaseServing, true)
	m.now = m.now.Add(time.Minute)
	m.do(Tick{Name: TimerSweep})
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantPhase(PhaseProbing, false).wantEvent(messages.KindReplicaRestarted)
	m.do(result(probe.Healthy, m.now)).wantPhase(PhaseServing, true)
}

// SVC-10: a stopped intent stops the instance without deleting it, never
// restarts it, stops it when found running; start lifts it.
func TestSVC10StoppedIntent(t *testing.T) {
	m := newSim(t, false).boot()
	m.do(Command{Intent: messages.IntentStop}).wantOp(OpStop).wantPhase(PhaseStopping, false)
	m.do(OpDone{Op: OpStop}).wantPhase(PhaseStopped, false).wantOp(OpNone)
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: running(m.now.Add(time.Second))}).wantOp(OpStop)
	m.do(OpDone{Op: OpStop}).wantPhase(PhaseStopped, false)
	m.do(Command{Intent: messages.IntentRun}).wantOp(OpStart)
}

// SVC-16: retiring stops, then deletes, then ends.
func TestSVC16Retire(t *testing.T) {
	m := newSim(t, false).boot()
	m.do(Command{Intent: messages.IntentRetire}).wantOp(OpStop).wantPhase(PhaseRetiring, false)
	m.do(OpDone{Op: OpStop}).wantOp(OpDelete)
	m.do(OpDone{Op: OpDelete}).wantPhase(PhaseGone, false)
}

// SUP-9, DMN-9: an adopted running instance is probed, never started.
func TestSUP9AdoptionNeverRestarts(t *testing.T) {
	m := newSim(t, true)
	m.do(Begin{Adopt: &drivers.Status{State: drivers.StateRunning, StartedAt: t0.Add(-time.Hour)}}).wantPhase(PhaseProbing, false).wantOp(OpNone)
	m.do(result(probe.Healthy, m.now)).wantPhase(PhaseServing, true)
	for _, f := range m.fx {
		if _, ok := f.(DoOp); ok {
			t.Fatalf("adoption made a driver call: %+v", f)
		}
	}
}

// SUP-9, issue 18: a replica actor restarted over a running instance finds
// it by inspecting it (the shell's begin for an existing instance) and
// watches that run, so a later kill is seen by the watch at once, not by a
// sweep (the chaos campaign saw a killed worker called serving for 5s when
// that sweep's inspection failed). A run that changed behind engenho's
// back (SVC-9) is watched too.
func TestSUP9RestartedActorWatchesItsRun(t *testing.T) {
	watches := func(fx []step.Effect) bool {
		for _, f := range fx {
			if _, ok := f.(StartWatch); ok {
				return true
			}
		}
		return false
	}
	m := newSim(t, false)
	m.s.Created, m.s.Phase, m.s.Op = true, PhaseAdopting, OpInspect // begin() of an existing instance
	m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateRunning, StartedAt: t0.Add(-time.Hour), Pid: 7}}).
		wantPhase(PhaseServing, true)
	if !watches(m.fx) {
		t.Fatalf("the restarted actor does not watch the run it found: %+v", m.fx)
	}
	m.do(Exited{Exit: drivers.Exit{Signal: "killed"}}).wantOp(OpStart)
	m.do(OpDone{Op: OpStart}).do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateRunning, StartedAt: t0, Pid: 8}})
	m.now = t0.Add(time.Minute)
	m.s.Op = OpInspect // a sweep's inspection
	m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateRunning, StartedAt: t0.Add(30 * time.Second), Pid: 9}}).
		wantEvent(messages.KindReplicaRestarted)
	if !watches(m.fx) {
		t.Fatalf("a run restarted behind engenho's back is not watched: %+v", m.fx)
	}
}

// Issue 18 (found by the chaos fault clock.jump): a run whose start the
// driver wrote down before the wall clock was stepped back lies "in the
// future" of every probe for as long as the step. It is probed and served
// all the same: a probe is judged by when this replica learned of the run
// (its own clock), not by the driver's wall time; before, every probe
// result was taken for an earlier run's and the replica stayed probing.
func TestSVC7RunStartedAheadOfTheClockIsProbed(t *testing.T) {
	m := newSim(t, true)
	ahead := m.now.Add(10 * time.Minute)
	m.do(Begin{Adopt: &drivers.Status{State: drivers.StateRunning, StartedAt: ahead}}).wantPhase(PhaseProbing, false)
	m.do(result(probe.Healthy, m.now)).wantPhase(PhaseServing, true)
	if !m.s.StartedAt.Equal(ahead) {
		t.Fatalf("the run's identity changed: %v", m.s.StartedAt)
	}
	stale := result(probe.Healthy, m.now.Add(-time.Second)) // started before the run was seen
	m.s.InRotation, m.s.Phase = false, PhaseProbing
	m.do(stale).wantPhase(PhaseProbing, false)
}

// Properties over random event sequences: at most one driver call at a
// time, in rotation only while running, nothing started against a stop or
// retire intent, and a failed replica starts only after an operator's start.
func TestReplicaProperties(t *testing.T) {
	ops := []Op{OpCreate, OpStart, OpStop, OpDelete, OpInspect}
	rapid.Check(t, func(t *rapid.T) {
		cfg := testConfig(rapid.Bool().Draw(t, "hc"))
		cfg.Policy.Condition = rapid.SampledFrom([]string{"any", "on-failure", "none"}).Draw(t, "cond")
		cfg.Policy.DriverRestarts = rapid.Bool().Draw(t, "driverRestarts")
		s := State{Intent: messages.IntentRun}
		now := t0
		s, _ = Step(cfg, s, Begin{}, now)
		probeInFlight := false
		for i := 0; i < 80; i++ {
			now = now.Add(time.Duration(rapid.IntRange(0, 120).Draw(t, "wait")) * time.Second)
			var e Event
			switch rapid.IntRange(0, 6).Draw(t, "event") {
			case 0:
				var err error
				if rapid.Bool().Draw(t, "fail") {
					err = drivers.Errorf("fake", "x", "x", rapid.SampledFrom([]error{drivers.ErrTransient, drivers.ErrNotFound, drivers.ErrInvalid}).Draw(t, "kind"), "")
				}
				st := drivers.Status{State: rapid.SampledFrom([]drivers.State{drivers.StateRunning, drivers.StateStopped, drivers.StateStarting}).Draw(t, "state"), StartedAt: now}
				e = OpDone{Op: rapid.SampledFrom(ops).Draw(t, "op"), Err: err, Status: st}
			case 1:
				ex := drivers.Exit{ExitCode: rapid.IntRange(0, 2).Draw(t, "code"), At: now}
				// The driver restarts only a run whose watch authorized it,
				// a failed one under on-failure, and may fail to.
				ex.Restarted = s.restartArmed && (cfg.Policy.Condition != "on-failure" || ex.Failed()) && rapid.Bool().Draw(t, "restarted")
				e = Exited{Exit: ex}
			case 2:
				e = result(rapid.SampledFrom([]probe.Outcome{probe.Healthy, probe.Unhealthy, probe.Error}).Draw(t, "outcome"), now)
			case 3, 4:
				e = Tick{Name: rapid.SampledFrom([]string{TimerRestart, TimerProbe, TimerSweep, TimerStable}).Draw(t, "timer")}
			default:
				e = Command{Intent: rapid.SampledFrom([]messages.Intent{messages.IntentRun, messages.IntentStop, messages.IntentRetire}).Draw(t, "intent")}
			}
			prev := s
			var fx []step.Effect
			s, fx = Step(cfg, s, e, now)
			if _, ok := e.(Probed); ok {
				probeInFlight = false
			}
			if n := count[DoProbe](fx); n > 1 || (n == 1 && probeInFlight) {
				t.Fatalf("a second probe started while one runs (after %T)", e)
			} else if n == 1 {
				probeInFlight = true
			}
			calls := 0
			for _, f := range fx {
				f, ok := f.(DoOp)
				if !ok {
					continue
				}
				calls++
				if f.Op == OpStart && s.Intent != messages.IntentRun {
					t.Fatalf("start against intent %s", s.Intent)
				}
				if f.Op == OpStart && prev.Phase == PhaseFailed {
					if c, ok := e.(Command); !ok || c.Intent != messages.IntentRun {
						t.Fatalf("failed replica started by %T", e)
					}
				}
			}
			if calls > 1 || (calls == 1 && prev.Op != OpNone && prev.Op == s.Op && !isDone(e, prev.Op)) {
				t.Fatalf("%d driver calls, op in flight %q -> %q after %T", calls, prev.Op, s.Op, e)
			}
			if s.InRotation && !s.Running {
				t.Fatalf("in rotation while not running (phase %s)", s.Phase)
			}
			checkEventKinds(t, prev, s, e, fx)
			checkRestartAtOnce(t, cfg, prev, s, e, fx, now)
			if s.Done {
				return
			}
		}
	})
}

// checkEventKinds: the replica's event kinds say what happened (issue 14,
// SUP-18). replica.failed comes exactly with a failure charged to the
// ladder and names its reason, count and next attempt; replica.restarted
// only for an instance that runs again, with the restarts count when
// engenho made the restart.
func checkEventKinds(t *rapid.T, prev, s State, e Event, fx []step.Effect) {
	charged := s.HasEntry && (!prev.HasEntry || s.Entry.Failures > prev.Entry.Failures)
	var failed, restarted []step.Emit
	for _, f := range fx {
		if ev, ok := f.(step.Emit); ok && ev.Kind == messages.KindReplicaFailed {
			failed = append(failed, ev)
		} else if ok && ev.Kind == messages.KindReplicaRestarted {
			restarted = append(restarted, ev)
		}
	}
	if charged != (len(failed) == 1) || len(failed) > 1 {
		t.Fatalf("failure charged %v (after %T) with %d replica.failed events", charged, e, len(failed))
	}
	if charged {
		want := fmt.Sprintf("%s; failure %d, next attempt %s", s.LastError, s.Entry.Failures, s.NextAttempt.UTC().Format(time.RFC3339))
		if failed[0].Message != want {
			t.Fatalf("replica.failed says %q, want %q", failed[0].Message, want)
		}
	}
	if len(restarted) > 1 || (len(restarted) == 1 && !s.Running) {
		t.Fatalf("%d replica.restarted events, running %v (after %T)", len(restarted), s.Running, e)
	}
	if len(restarted) == 1 && restarted[0].Level == messages.LevelInfo &&
		restarted[0].Message != fmt.Sprintf("restarted by engenho; running again (restart %d)", s.Restarts) {
		t.Fatalf("replica.restarted says %q with %d restarts", restarted[0].Message, s.Restarts)
	}
}

// checkRestartAtOnce (PERF-1): a restart at once is authorized only
// while the replica's own policy and ladder would restart the next
// failure at once, and one the driver made is accounted exactly as the
// same failure would be without it (ledger, reason, next attempt), plus
// one restart, with no start call of the replica's own.
func checkRestartAtOnce(t *rapid.T, cfg Config, prev, s State, e Event, fx []step.Effect, now time.Time) {
	for _, f := range fx {
		w, ok := f.(StartWatch)
		if !ok || !w.Restart {
			continue
		}
		failures := 0
		if s.HasEntry {
			failures = s.Entry.Failures
		}
		p := cfg.Policy
		if !p.DriverRestarts || !s.Running || p.Condition == "none" || p.MaxAttempts > 0 ||
			s.Intent != messages.IntentRun || cfg.Ladder.Delay(failures+1) != 0 {
			t.Fatalf("restart at once authorized after %T: running %v, failures %d, intent %s, policy %+v", e, s.Running, failures, s.Intent, p)
		}
	}
	ex, ok := e.(Exited)
	if !ok || !ex.Exit.Restarted || !prev.Running || prev.Op == OpStop {
		return
	}
	plain := ex
	plain.Exit.Restarted = false
	without, _ := Step(cfg, prev, plain, now)
	if s.Entry.Failures != without.Entry.Failures || s.LastError != without.LastError || !s.NextAttempt.Equal(without.NextAttempt) {
		t.Fatalf("restart at once accounted as %+v / %q, the failure alone as %+v / %q", s.Entry, s.LastError, without.Entry, without.LastError)
	}
	if s.Restarts != prev.Restarts+1 || count[DoOp](fx) > 1 {
		t.Fatalf("restart at once: restarts %d -> %d, effects %+v", prev.Restarts, s.Restarts, fx)
	}
	for _, f := range fx {
		if d, ok := f.(DoOp); ok && d.Op == OpStart {
			t.Fatalf("a start call for a run the driver restarted: %+v", fx)
		}
	}
}

func isDone(e Event, op Op) bool {
	d, ok := e.(OpDone)
	return ok && d.Op == op
}

// SUP-14, SVC-8: a restart for being unhealthy whose stop fails is tried
// again after the retry wait, never at once and never forgotten.
func TestSUP14FailedStopOfHealthRestartRetried(t *testing.T) {
	m := newSim(t, true).boot()
	m.do(result(probe.Healthy, m.now))
	m.do(result(probe.Unhealthy, m.now))
	m.do(result(probe.Unhealthy, m.now)).wantOp(OpStop)
	m.do(OpDone{Op: OpStop, Err: drivers.Errorf("fake", "stop", "x", drivers.ErrTransient, "")}).wantOp(OpNone)
	at := m.timer(TimerSweep)
	m.now = at
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: running(t0)}).wantOp(OpStop)
	m.do(OpDone{Op: OpStop}).wantOp(OpStart)
}

// SVC-7: a probe that fell due while a driver call was in flight is armed
// again when the call ends, so probing never stops.
func TestSVC7ProbeKeptArmedAcrossDriverCalls(t *testing.T) {
	m := newSim(t, true).boot()
	m.do(result(probe.Healthy, m.now))
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(Tick{Name: TimerProbe}) // due during the inspection: skipped
	m.do(OpDone{Op: OpInspect, Status: running(t0)})
	m.timer(TimerProbe)
}

// SVC-7: one probe at a time. While a probe runs no probe timer is armed and
// a stray probe tick starts none; the next is armed when the result comes.
// (A shell that re-armed at "now" while the result was pending started
// probes in a tight loop and ran out of file descriptors.)
func TestSVC7OneProbeInFlight(t *testing.T) {
	m := newSim(t, true).boot()
	m.do(Tick{Name: TimerProbe})
	if count[DoProbe](m.fx) != 1 {
		t.Fatalf("first probe tick: effects %+v", m.fx)
	}
	if hasTimer(m.fx, TimerProbe) {
		t.Fatalf("a probe timer armed while the probe runs: %+v", m.fx)
	}
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: running(t0)})
	if hasTimer(m.fx, TimerProbe) {
		t.Fatalf("settle armed a probe while one runs: %+v", m.fx)
	}
	m.do(Tick{Name: TimerProbe})
	if count[DoProbe](m.fx) != 0 {
		t.Fatalf("second probe started while the first runs: %+v", m.fx)
	}
	m.now = m.now.Add(300 * time.Millisecond)
	m.do(result(probe.Healthy, m.now))
	if at := m.timer(TimerProbe); !at.Equal(m.now.Add(m.cfg.Probe.Interval)) {
		t.Fatalf("next probe at %v, want interval after the result (%v)", at, m.now.Add(m.cfg.Probe.Interval))
	}
}

// count is the number of effects of type T in fx.
func count[T step.Effect](fx []step.Effect) int {
	n := 0
	for _, f := range fx {
		if _, ok := f.(T); ok {
			n++
		}
	}
	return n
}

func hasTimer(fx []step.Effect, name string) bool {
	for _, f := range fx {
		if a, ok := f.(step.Arm); ok && a.Timer == name {
			return true
		}
	}
	return false
}

// SVC-19, SUP-18 (issue 13): every failure leaves its reason as the
// replica's last error, which status shows in LAST PROBE and last_error:
// the exit code, the signal, the probe output, the spent policy.
func TestSVC19LastErrorCarriesTheReason(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(m *sim)
		exit   drivers.Exit
		reason string
	}{
		{"exit code", nil, drivers.Exit{ExitCode: 1}, "exited with code 1"},
		{"signal", nil, drivers.Exit{ExitCode: -1, Signal: "killed"}, "killed by signal killed"},
		{"DRV-14 the driver's reason", nil, drivers.Exit{ExitCode: -1, Signal: "killed", Reason: "oom-killed (limit 64 MiB)"}, "oom-killed (limit 64 MiB)"},
		{"SUP-16 restart policy none", func(m *sim) { m.cfg.Policy.Condition = "none" }, drivers.Exit{ExitCode: 3},
			"restart policy none leaves it down: exited with code 3"},
		{"SUP-16 on-failure, clean exit", func(m *sim) { m.cfg.Policy.Condition = "on-failure" }, drivers.Exit{ExitCode: 0},
			"exited cleanly; restart policy on-failure leaves it down"},
		{"SUP-16 restart limit", func(m *sim) {
			m.cfg.Policy.MaxAttempts, m.cfg.Policy.Window = 1, time.Hour
			m.s.Attempts = []time.Time{t0}
		},
			drivers.Exit{ExitCode: 2}, "restart limit reached: exited with code 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newSim(t, false)
			if c.setup != nil {
				c.setup(m)
			}
			m.boot().do(Exited{Exit: c.exit})
			if m.s.LastError != c.reason {
				t.Fatalf("last error %q, want %q", m.s.LastError, c.reason)
			}
		})
	}
	// A health restart: the probe's output (SUP-14).
	m := newSim(t, true).boot()
	m.do(result(probe.Healthy, m.now))
	m.do(Probed{Result: probe.Result{Outcome: probe.Unhealthy, At: m.now, Output: "HTTP 503"}})
	m.do(Probed{Result: probe.Result{Outcome: probe.Unhealthy, At: m.now, Output: "HTTP 503"}})
	if m.s.LastError != "unhealthy: HTTP 503" {
		t.Fatalf("last error %q after a health restart", m.s.LastError)
	}
	// Found stopped by an inspection: with the exit code the driver knows.
	m = newSim(t, false).boot()
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateStopped, ExitCode: 4}})
	if m.s.LastError != "found stopped, exit code 4" {
		t.Fatalf("last error %q", m.s.LastError)
	}
}

// SUP-11: with no healthcheck a replica is stable while it runs in
// rotation, so 5m of it drops the ledger: a service that stopped crashing
// does not carry its failures forever.
func TestSUP11StableWindowWithoutHealthcheck(t *testing.T) {
	m := newSim(t, false).boot()
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantOp(OpStart)
	m.do(OpDone{Op: OpStart})
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantPhase(PhaseServing, true)
	at := m.timer(TimerStable)
	if !m.s.HasEntry || at.Sub(m.now) != 5*time.Minute {
		t.Fatalf("entry %v, stable timer at +%s", m.s.HasEntry, at.Sub(m.now))
	}
	m.now = at
	m.do(Tick{Name: TimerStable})
	if m.s.HasEntry {
		t.Fatal("entry kept after 5m running without a healthcheck")
	}
}

// SUP-18: the event of a restart decision, replica.failed, names the
// reason, the failure count and the next attempt (the shell stamps the
// actor's path and the instance). With the default ladder the fourth
// failure waits 1m.
func TestSUP18FailureEventNamesReasonCountAndNextAttempt(t *testing.T) {
	m := newSim(t, false).boot()
	for i := 1; i <= 4; i++ {
		m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).noEvent(messages.KindReplicaRestarted)
		ev := m.event(messages.KindReplicaFailed)
		next := m.now
		if i == 4 {
			next = m.now.Add(time.Minute)
		}
		want := fmt.Sprintf("exited with code 1; failure %d, next attempt %s", i, next.Format(time.RFC3339))
		if ev.Message != want || ev.Level != messages.LevelWarn {
			t.Fatalf("failure %d: %s %q, want warn %q", i, ev.Level, ev.Message, want)
		}
		if i < 4 {
			m.wantOp(OpStart).do(OpDone{Op: OpStart})
			m.now = m.now.Add(time.Second)
			m.do(OpDone{Op: OpInspect, Status: running(m.now)})
		}
	}
	if at := m.timer(TimerRestart); !at.Equal(m.now.Add(time.Minute)) {
		t.Fatalf("restart timer at %v", at)
	}
}

// Issue 14, "event kinds say what happened": a replica that fails emits
// replica.failed; replica.restarted is for an instance that runs again
// after a restart engenho made (counted in its restarts) or saw made
// outside engenho (SVC-9). A first start, an adoption and a restart whose
// start failed emit no replica.restarted.
func TestReplicaEventKindsSayWhatHappened(t *testing.T) {
	m := newSim(t, false)
	m.do(Begin{}).noEvent(messages.KindReplicaRestarted)
	m.do(OpDone{Op: OpCreate}).noEvent(messages.KindReplicaRestarted)
	m.do(OpDone{Op: OpStart}).noEvent(messages.KindReplicaRestarted)
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).noEvent(messages.KindReplicaRestarted).wantPhase(PhaseServing, true)

	// A kill: failed, then restarted once it runs again.
	m.do(Exited{Exit: drivers.Exit{ExitCode: -1, Signal: "killed"}}).wantEvent(messages.KindReplicaFailed).noEvent(messages.KindReplicaRestarted)
	m.wantOp(OpStart).do(OpDone{Op: OpStart}).noEvent(messages.KindReplicaRestarted)
	m.now = m.now.Add(time.Second)
	ev := m.do(OpDone{Op: OpInspect, Status: running(m.now)}).noEvent(messages.KindReplicaFailed).event(messages.KindReplicaRestarted)
	if ev.Level != messages.LevelInfo || ev.Message != "restarted by engenho; running again (restart 1)" || m.s.Restarts != 1 {
		t.Fatalf("restart event %s %q, restarts %d", ev.Level, ev.Message, m.s.Restarts)
	}

	// A restart whose start fails is a failure, not a restart; the next
	// start that runs is restart 3 (both attempts are counted).
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantEvent(messages.KindReplicaFailed)
	m.do(OpDone{Op: OpStart, Err: drivers.Errorf("fake", "start", "x", drivers.ErrInvalid, "boom")}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateStopped}}).wantEvent(messages.KindReplicaFailed).noEvent(messages.KindReplicaRestarted)
	m.wantOp(OpStart).do(OpDone{Op: OpStart})
	m.now = m.now.Add(time.Second)
	ev = m.do(OpDone{Op: OpInspect, Status: running(m.now)}).event(messages.KindReplicaRestarted)
	if ev.Message != "restarted by engenho; running again (restart 3)" {
		t.Fatalf("restart event %q", ev.Message)
	}

	// SVC-9: a restart made outside engenho is seen, and is no failure.
	m.now = m.now.Add(time.Minute)
	m.do(Tick{Name: TimerSweep})
	ev = m.do(OpDone{Op: OpInspect, Status: running(m.now)}).noEvent(messages.KindReplicaFailed).event(messages.KindReplicaRestarted)
	if ev.Level != messages.LevelWarn || ev.Message != "instance restarted outside engenho; verifying it before it serves again" {
		t.Fatalf("restart seen: %s %q", ev.Level, ev.Message)
	}

	// An operator's stop and start restarts it too (SVC-10).
	m.do(Command{Intent: messages.IntentStop}).do(OpDone{Op: OpStop}).wantPhase(PhaseStopped, false)
	m.do(Command{Intent: messages.IntentRun}).wantOp(OpStart).do(OpDone{Op: OpStart})
	m.do(OpDone{Op: OpInspect, Status: running(m.now.Add(time.Second))}).wantEvent(messages.KindReplicaRestarted).noEvent(messages.KindReplicaFailed)

	// An adopted instance (SUP-9) is no restart.
	m = newSim(t, true)
	m.do(Begin{Adopt: &drivers.Status{State: drivers.StateRunning, StartedAt: t0.Add(-time.Hour)}}).noEvent(messages.KindReplicaRestarted)
}

// SUP-16, restart_policy.delay: a floor under every restart wait. Where
// the ladder would restart at once, the replica waits the delay, and the
// watch does not authorize the driver to restart the run at once.
func TestSUP16RestartDelayIsAFloor(t *testing.T) {
	control := newSim(t, false)
	control.cfg.Policy.DriverRestarts = true
	control.boot().wantWatch(true) // without a delay the driver restarts at once

	m := newSim(t, false)
	m.cfg.Policy.DriverRestarts = true
	m.cfg.Policy.Delay = 3 * time.Second
	m.boot()
	if w, ok := m.watch(); !ok || w.Restart {
		t.Fatalf("watch %+v (found %v): with a restart delay the driver must not restart at once", w, ok)
	}
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantOp(OpNone).wantPhase(PhaseDown, false)
	if at := m.timer(TimerRestart); !at.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("restart timer at %v, want %v", at, t0.Add(3*time.Second))
	}
	if !m.s.Entry.NextAttempt.Equal(m.s.NextAttempt) {
		t.Fatalf("the ledger's next attempt %v differs from the replica's %v (why shows the ledger)", m.s.Entry.NextAttempt, m.s.NextAttempt)
	}
	m.now = m.now.Add(3 * time.Second)
	m.do(Tick{Name: TimerRestart}).wantOp(OpStart)

	// A ladder step longer than the delay wins.
	m = newSim(t, false)
	m.cfg.Policy.Delay = time.Second
	m.cfg.Ladder.Immediate = 0
	m.boot()
	m.do(Exited{Exit: drivers.Exit{ExitCode: 1}}).wantOp(OpNone)
	if want := t0.Add(m.cfg.Ladder.Delay(1)); !m.timer(TimerRestart).Equal(want) {
		t.Fatalf("restart timer at %v, want the ladder's %v", m.timer(TimerRestart), want)
	}
}

// SUP-9: a replica actor restarted after a panic adopts its instance by
// inspecting it. Found stopped (it died while no actor watched it), it is
// started again; found running, it is adopted. Before, a stopped instance
// left the replica "adopting" for good (soak 424242, fault 300: a box
// replica panicked twice around a kill, 0 running for minutes).
func TestSUP9RestartedActorAdoptsAStoppedInstance(t *testing.T) {
	restarted := func() *sim {
		m := newSim(t, false)
		m.s.Created, m.s.Phase, m.s.Op = true, PhaseAdopting, OpInspect
		return m
	}
	m := restarted()
	m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateStopped, ExitCode: 137}}).wantOp(OpStart).wantEvent(messages.KindReplicaFailed)
	m.do(OpDone{Op: OpStart}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantPhase(PhaseServing, true)

	m = restarted()
	m.do(OpDone{Op: OpInspect, Status: running(m.now)}).wantPhase(PhaseServing, true)

	// Still starting: looked at again, still adopting, not acted on.
	m = restarted()
	m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateStarting}}).wantOp(OpNone).wantPhase(PhaseAdopting, false)
	m.do(Tick{Name: TimerSweep}).wantOp(OpInspect)
	m.do(OpDone{Op: OpInspect, Status: drivers.Status{State: drivers.StateStopped}}).wantOp(OpStart)
}
