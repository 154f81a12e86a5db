package host

import (
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testConfig() Config {
	return Config{
		Hibernating: true, HasInstance: true, HasSidecars: true, HasSeed: true,
		Idle: 15 * time.Minute, Replication: stackfile.ReplicationBatched,
		RenewEvery: 10 * time.Second, StreamScan: time.Second, BatchedEvery: 5 * time.Minute, DailyEvery: 24 * time.Hour,
		CheckpointRetry: time.Minute, ReadyTimeout: 2 * time.Minute, ProbeFirst: 5 * time.Millisecond, ProbeFastFor: time.Second, ProbeMax: time.Second,
		RetryAfter: 5 * time.Second, DueRecheck: 5 * time.Second,
	}
}

// run steps a sequence of events and collects every effect.
type run struct {
	t   *testing.T
	cfg Config
	s   State
	now time.Time
	fx  []step.Effect
}

func newRun(t *testing.T, cfg Config) *run {
	r := &run{t: t, cfg: cfg, now: t0}
	r.step(Begin{})
	r.step(OpDone{Op: OpCleanup, Outcome: OK})
	return r
}

func (r *run) step(e any) []step.Effect {
	r.t.Helper()
	var fx []step.Effect
	r.s, fx = Step(r.cfg, r.s, e, r.now)
	r.fx = append(r.fx, fx...)
	return fx
}

func (r *run) done(op Op, outcome string) []step.Effect {
	r.t.Helper()
	if r.s.Op != op {
		r.t.Fatalf("op in flight is %q, want %q (state %+v)", r.s.Op, op, r.s)
	}
	return r.step(OpDone{Op: op, Outcome: outcome})
}

func (r *run) advance(d time.Duration) { r.now = r.now.Add(d) }

// wake drives a wake to awake with every step succeeding.
func (r *run) wake(reason messages.WakeReason) {
	r.t.Helper()
	r.step(WakeAsked{Reason: reason})
	for _, op := range []Op{OpDefinition, OpAcquire, OpRestore, OpStart} {
		r.advance(100 * time.Millisecond)
		r.done(op, OK)
	}
	r.advance(30 * time.Millisecond)
	r.done(OpReadyCheck, OK)
	if r.s.Phase != messages.HostAwake {
		r.t.Fatalf("not awake: %+v", r.s)
	}
}

// find returns the first effect of type T.
func find[T step.Effect](fx []step.Effect) (T, bool) {
	for _, f := range fx {
		if t, ok := f.(T); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}

func doOps(fx []step.Effect) []Op {
	var out []Op
	for _, f := range fx {
		if d, ok := f.(Do); ok {
			out = append(out, d.Op)
		}
	}
	return out
}

func events(fx []step.Effect) []string {
	var out []string
	for _, f := range fx {
		if e, ok := f.(step.Emit); ok {
			out = append(out, e.Kind)
		}
	}
	return out
}

func emitted(fx []step.Effect, kind string) (step.Emit, bool) {
	for _, f := range fx {
		if e, ok := f.(step.Emit); ok && e.Kind == kind {
			return e, true
		}
	}
	return step.Emit{}, false
}

// ACT-2, ACT-4: a wake runs its steps in order, every transition is an
// event, and host.woke carries each step's duration.
func TestACT4WakeStepsInOrder(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	want := []Op{OpDefinition, OpAcquire, OpRestore, OpStart, OpReadyCheck}
	if got := doOps(r.fx); len(got) < len(want) {
		t.Fatalf("ops %v", got)
	} else {
		for i, op := range want {
			if got[i+1] != op { // [0] is the cleanup
				t.Fatalf("ops %v, want %v after cleanup", got, want)
			}
		}
	}
	woke, ok := find[RecordWake](r.fx)
	if !ok {
		t.Fatal("wake steps not recorded")
	}
	names := []string{}
	for _, st := range woke.Steps {
		names = append(names, st.Step)
	}
	wantSteps := "definition lease restore start ready sidecars"
	if got := join(names); got != wantSteps {
		t.Fatalf("woke steps %q, want %q", got, wantSteps)
	}
	if woke.Steps[1].Duration != 100*time.Millisecond || woke.Steps[4].Duration != 30*time.Millisecond {
		t.Fatalf("step durations %+v", woke.Steps)
	}
	ev, ok := emitted(r.fx, messages.KindHostWoke)
	if !ok || ev.Fields["step.lease"] != "100ms" || ev.Fields["step."+StepReady] != "30ms" || ev.Fields["reason"] != string(messages.WakeRequest) {
		t.Fatalf("host.woke event %+v", ev)
	}
	states := 0
	for _, e := range events(r.fx) {
		if e == messages.KindHostState {
			states++
		}
	}
	if states != 2 { // asleep -> waking -> awake
		t.Fatalf("state events %d", states)
	}
	if _, ok := find[StartSidecars](r.fx); !ok {
		t.Fatal("sidecars not started")
	}
	if f, ok := find[OpenGate](r.fx); !ok || !f.Stamp {
		t.Fatal("gate not opened with a request stamp")
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// ACT-4: a fresh first boot runs the seed before the instance starts; a
// failed seed fails the wake and nothing serves.
func TestACT4SeedOnFirstBoot(t *testing.T) {
	r := newRun(t, testConfig())
	r.step(WakeAsked{Reason: messages.WakeRequest})
	r.done(OpDefinition, OK)
	r.done(OpAcquire, OK)
	fx := r.done(OpRestore, FirstBoot)
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpSeed {
		t.Fatalf("after first boot: %v", ops)
	}
	fx = r.done(OpSeed, Failed)
	a, ok := find[Answer](fx)
	if !ok || a.OK || a.Status != 503 {
		t.Fatalf("failed seed answered %+v", a)
	}
	if _, ok := find[OpenGate](r.fx); ok {
		t.Fatal("the gate opened after a failed seed")
	}
	// Nothing started, so only the lease is released.
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpRelease {
		t.Fatalf("after a failed seed: %v", ops)
	}
	r.done(OpRelease, OK)
	if r.s.Phase != messages.HostAsleep {
		t.Fatalf("phase %s", r.s.Phase)
	}
}

// ACT-3: concurrent wake requests coalesce on one wake; a failed wake
// answers them all once, and the next request wakes afresh.
func TestACT3CoalesceAndFailOnce(t *testing.T) {
	r := newRun(t, testConfig())
	r.step(WakeAsked{Reason: messages.WakeRequest})
	for range 5 {
		if fx := r.step(WakeAsked{Reason: messages.WakeRequest}); len(fx) != 0 {
			t.Fatalf("a coalesced request acted: %v", fx)
		}
	}
	r.done(OpDefinition, OK)
	fx := r.step(OpDone{Op: OpAcquire, Outcome: Held, RetryAfter: 17 * time.Second, Err: "held by b"})
	a, ok := find[Answer](fx)
	if !ok || a.OK || a.RetryAfter != 17*time.Second {
		t.Fatalf("held lease answered %+v", a)
	}
	if r.s.Phase != messages.HostAsleep || r.s.Op != OpNone {
		t.Fatalf("after a failed wake: %+v", r.s)
	}
	if r.s.LastFailure != "lease: held by b" {
		t.Fatalf("last failure %q", r.s.LastFailure)
	}
	fx = r.step(WakeAsked{Reason: messages.WakeRequest})
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpDefinition {
		t.Fatalf("the next request did not wake afresh: %v", ops)
	}
}

// ACT-8: sleep stops sidecars first, then the instance, then the final
// checkpoint, the due time and the lease release.
func TestACT8SleepOrder(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	r.advance(16 * time.Minute)
	r.fx = nil
	r.step(TimerFired{Name: TimerIdle})
	r.step(IdleCheck{LastActivity: t0})
	r.done(OpNextDue, OK)
	r.step(GateClosed{OK: true})
	if _, ok := find[StopSidecars](r.fx); !ok || r.s.Op != OpNone {
		t.Fatalf("sidecars not stopped first: %+v", r.s)
	}
	r.step(SidecarsStopped{Proven: true})
	r.done(OpStopInstance, OK)
	r.done(OpCheckpoint, OK)
	r.done(OpSetDue, OK)
	r.done(OpRelease, OK)
	if r.s.Phase != messages.HostAsleep {
		t.Fatalf("phase %s", r.s.Phase)
	}
	want := []Op{OpNextDue, OpStopInstance, OpCheckpoint, OpSetDue, OpRelease}
	if got := doOps(r.fx); join(opsStr(got)) != join(opsStr(want)) {
		t.Fatalf("sleep ops %v, want %v", got, want)
	}
}

func opsStr(ops []Op) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}

// ACT-8: a stop not proven keeps the lease (renewals go on) and the sweep
// retries it; a failed release is owed and retried while asleep.
func TestACT8PendingStopAndOwedRelease(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	r.step(Drain{})
	r.done(OpNextDue, OK)
	r.step(SidecarsStopped{Proven: true})
	r.done(OpStopInstance, Unproven)
	if r.s.Phase != messages.HostStopping || !r.s.Leased || r.s.Op != OpNone {
		t.Fatalf("unproven stop: %+v", r.s)
	}
	fx := r.step(TimerFired{Name: TimerRenew})
	if f, ok := find[Side](fx); !ok || f.Op != SideRenew {
		t.Fatal("lease not renewed while the stop is pending")
	}
	r.step(SideDone{Op: SideRenew, Outcome: OK})
	fx = r.step(Sweep{})
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpStopInstance {
		t.Fatalf("sweep did not retry the stop: %v", ops)
	}
	r.done(OpStopInstance, OK)
	r.done(OpCheckpoint, OK)
	r.done(OpSetDue, OK)
	r.done(OpRelease, Failed)
	if !r.s.Owes || r.s.Phase != messages.HostAsleep || !r.s.Drained {
		t.Fatalf("after a failed release: %+v", r.s)
	}
}

// ACT-8 (owed): an owed release is retried by the sweep until it lands.
func TestACT8OwedReleaseRetried(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	r.s.Phase, r.s.Stage = messages.HostStopping, stageRelease
	r.s.Started, r.s.SidecarsUp, r.s.NeedFinal = false, false, false
	r.step(Sweep{})
	r.s.Op = OpRelease
	r.done(OpRelease, Failed)
	fx := r.step(Sweep{})
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpReleaseOwed {
		t.Fatalf("owed release not retried: %v", ops)
	}
	r.done(OpReleaseOwed, Failed)
	r.step(Sweep{})
	r.done(OpReleaseOwed, OK)
	if r.s.Owes {
		t.Fatal("still owes after the release landed")
	}
}

// ACT-6: a lost lease stands the host down: sidecars and instance stop,
// and no checkpoint is taken.
func TestACT6LostLeaseNeverCheckpoints(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	r.step(TimerFired{Name: TimerRenew})
	fx := r.step(SideDone{Op: SideRenew, Outcome: Failed, Err: "precondition failed"})
	ev := events(fx)
	if !contains(ev, messages.KindLeaseLost) || !contains(ev, messages.KindHostStoodDown) {
		t.Fatalf("events %v", ev)
	}
	if r.s.LastFailure != "lease lost" {
		t.Fatalf("last failure %q", r.s.LastFailure)
	}
	r.step(SidecarsStopped{Proven: true})
	r.done(OpStopInstance, OK)
	if r.s.Phase != messages.HostAsleep {
		t.Fatalf("after stand-down: %+v", r.s)
	}
	for _, f := range r.fx {
		switch f := f.(type) {
		case Do:
			if f.Op == OpCheckpoint || f.Op == OpRelease {
				t.Fatalf("%v after a lost lease", f.Op)
			}
		case Side:
			if f.Op == SideCheckpoint {
				t.Fatalf("%v after a lost lease", f.Op)
			}
		}
	}
}

// ACT-6: the instance dying while awake stands the host down; it still
// holds a valid lease, so its state is checkpointed and the lease released.
func TestACT6InstanceDiedStandsDown(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	fx := r.step(InstanceExited{Code: 137})
	if !contains(events(fx), messages.KindHostStoodDown) {
		t.Fatalf("events %v", events(fx))
	}
	r.step(SidecarsStopped{Proven: true})
	r.done(OpStopInstance, OK)
	r.done(OpCheckpoint, OK)
	r.done(OpRelease, OK) // the dead instance told no due time
	if r.s.Phase != messages.HostAsleep {
		t.Fatal("not asleep")
	}
	fx = r.step(WakeAsked{Reason: messages.WakeRequest})
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpDefinition {
		t.Fatalf("next request did not wake afresh: %v", ops)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// ACT-7: in-flight requests and a recent request keep the host awake.
func TestACT7IdleNeedsNothingInFlight(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	r.advance(20 * time.Minute)
	fx := r.step(IdleCheck{InFlight: 1, LastActivity: t0})
	if len(doOps(fx)) != 0 {
		t.Fatal("slept with a request in flight")
	}
	last := r.now.Add(-time.Minute)
	fx = r.step(IdleCheck{LastActivity: last})
	if f, ok := find[step.Arm](fx); !ok || f.Timer != TimerIdle || !f.At.Equal(last.Add(15*time.Minute)) || len(doOps(fx)) != 0 {
		t.Fatalf("recent activity: %+v", fx)
	}
	fx = r.step(IdleCheck{LastActivity: r.now.Add(-15 * time.Minute)})
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpNextDue {
		t.Fatalf("idle host did not ask its next due time: %v", ops)
	}
	// A request slips in between: the gate does not close, the host stays.
	r.step(OpDone{Op: OpNextDue, Outcome: OK})
	r.step(GateClosed{OK: false})
	if r.s.Phase != messages.HostAwake {
		t.Fatalf("phase %s", r.s.Phase)
	}
}

// ACT-10: a next due time sooner than the idle window keeps the host
// awake; a later one is persisted at sleep.
func TestACT10DueSoonKeepsAwake(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	r.advance(16 * time.Minute)
	r.step(IdleCheck{LastActivity: t0})
	fx := r.step(OpDone{Op: OpNextDue, Outcome: OK, Due: r.now.Add(5 * time.Minute)})
	if _, ok := find[TryCloseGate](fx); ok || r.s.Phase != messages.HostAwake {
		t.Fatal("slept with a due time inside the idle window")
	}
	r.advance(6 * time.Minute)
	r.step(IdleCheck{LastActivity: t0})
	due := r.now.Add(2 * time.Hour)
	r.step(OpDone{Op: OpNextDue, Outcome: OK, Due: due})
	r.step(GateClosed{OK: true})
	r.step(SidecarsStopped{Proven: true})
	r.done(OpStopInstance, OK)
	r.done(OpCheckpoint, OK)
	if r.s.Op != OpSetDue || !r.s.Due.Equal(due) {
		t.Fatalf("due time not persisted: %+v", r.s)
	}
}

// ACT-10, ACT-7: a due wake sends the platform tick, which holds the host
// awake but does not stamp activity: once it ends the host checks idleness.
func TestACT10DueWakeTicks(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeDue)
	if f, ok := find[Side](r.fx); !ok || f.Op != SideTick {
		var sides []Op
		for _, f := range r.fx {
			if f, ok := f.(Side); ok {
				sides = append(sides, f.Op)
			}
		}
		t.Fatalf("no tick: %v", sides)
	}
	if f, _ := find[OpenGate](r.fx); f.Stamp {
		t.Fatal("a due wake stamped activity")
	}
	fx := r.step(IdleCheck{LastActivity: time.Time{}})
	if len(doOps(fx)) != 0 {
		t.Fatal("slept during the tick")
	}
	fx = r.step(SideDone{Op: SideTick, Outcome: OK})
	if _, ok := find[CheckIdle](fx); !ok {
		t.Fatal("no idle check after the tick")
	}
}

// ACT-9: periodic checkpoint cadence by class.
func TestACT9Cadence(t *testing.T) {
	for class, want := range map[string]time.Duration{
		stackfile.ReplicationStream: time.Second, stackfile.ReplicationBatched: 5 * time.Minute, stackfile.ReplicationDaily: 0,
	} {
		cfg := testConfig()
		cfg.Replication = class
		r := newRun(t, cfg)
		r.wake(messages.WakeRequest)
		var at time.Time
		for _, f := range r.fx {
			if f, ok := f.(step.Arm); ok && f.Timer == TimerCheckpoint {
				at = f.At
			}
		}
		if at.Sub(r.now) != want {
			t.Errorf("%s: first checkpoint in %s, want %s", class, at.Sub(r.now), want)
		}
		r.step(TimerFired{Name: TimerCheckpoint})
		fx := r.step(SideDone{Op: SideCheckpoint, Outcome: OK})
		f, _ := find[step.Arm](fx)
		next := map[string]time.Duration{stackfile.ReplicationStream: time.Second, stackfile.ReplicationBatched: 5 * time.Minute, stackfile.ReplicationDaily: 24 * time.Hour}[class]
		if f.At.Sub(r.now) != next {
			t.Errorf("%s: next checkpoint in %s, want %s", class, f.At.Sub(r.now), next)
		}
	}
}

// ACT-13: once draining nothing wakes, and an awake host sleeps with its
// final checkpoint and lease release, then ends with ExitShutdown, once.
func TestACT13DrainSleepsAndRefusesWakes(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	r.step(Drain{})
	r.done(OpNextDue, OK)
	r.step(SidecarsStopped{Proven: true})
	r.done(OpStopInstance, OK)
	r.done(OpCheckpoint, OK)
	r.done(OpSetDue, OK)
	if _, ok := find[step.End](r.fx); ok {
		t.Fatal("ended before the lease was released")
	}
	fx := r.done(OpRelease, OK)
	if !r.s.Drained {
		t.Fatalf("not drained: %+v", r.s)
	}
	if e, ok := find[step.End](fx); !ok || e.Reason != messages.ExitShutdown {
		t.Fatalf("drained host did not end with shutdown: %v", fx)
	}
	fx = r.step(WakeAsked{Reason: messages.WakeRequest})
	if a, ok := find[Answer](fx); !ok || a.OK || len(doOps(fx)) != 0 {
		t.Fatalf("woke while draining: %v", fx)
	}
	if _, ok := find[step.End](append(fx, r.step(Sweep{})...)); ok {
		t.Fatal("ended twice")
	}
}

// ACT-13: an asleep host with nothing in flight ends at the drain.
func TestACT13AsleepEndsAtDrain(t *testing.T) {
	r := newRun(t, testConfig())
	fx := r.step(Drain{})
	if e, ok := find[step.End](fx); !ok || e.Reason != messages.ExitShutdown || !r.s.Drained {
		t.Fatalf("an asleep host did not end at the drain: %v", fx)
	}
}

// A retired host clears its due time, then ends normally; nothing happens
// after the end.
func TestRetireClearsDueAndEnds(t *testing.T) {
	r := newRun(t, testConfig())
	r.s.Due, r.s.DueKnown = t0.Add(time.Hour), true
	fx := r.step(Retire{})
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpSetDue || !r.s.Due.IsZero() {
		t.Fatalf("retire: ops %v, due %v", ops, r.s.Due)
	}
	if a, ok := find[Answer](fx); !ok || a.OK || a.Status != 503 {
		t.Fatalf("waiters of a retired host answered %+v", a)
	}
	fx = r.done(OpSetDue, OK)
	if e, ok := find[step.End](fx); !ok || e.Reason != "" || !r.s.Ended {
		t.Fatalf("retired host did not end: %v %+v", fx, r.s)
	}
	if fx := r.step(WakeAsked{Reason: messages.WakeRequest}); len(fx) != 0 {
		t.Fatalf("effects after the end: %v", fx)
	}
}

// ACT-13: a drain during a wake aborts it at the end of its current step.
func TestACT13DrainAbortsWake(t *testing.T) {
	r := newRun(t, testConfig())
	r.step(WakeAsked{Reason: messages.WakeRequest})
	r.done(OpDefinition, OK)
	r.step(Drain{})
	fx := r.done(OpAcquire, OK)
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpRelease {
		t.Fatalf("after an aborted wake: %v", ops)
	}
	r.done(OpRelease, OK)
	if !r.s.Drained {
		t.Fatal("not drained")
	}
}

// A new revision while awake: sleep, then wake on the new definition.
func TestNewRevisionRewakes(t *testing.T) {
	r := newRun(t, testConfig())
	r.wake(messages.WakeRequest)
	r.step(Definition{Changed: true})
	r.done(OpNextDue, OK)
	r.step(SidecarsStopped{Proven: true})
	r.done(OpStopInstance, OK)
	r.done(OpCheckpoint, OK)
	r.done(OpSetDue, OK)
	fx := r.done(OpRelease, OK)
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpDefinition {
		t.Fatalf("no rewake: %v", ops)
	}
}

// ACT-12: a hibernating standalone worker sleeps once its work is done.
func TestACT12WorkerSleepsWhenDone(t *testing.T) {
	cfg := testConfig()
	cfg.HasInstance = false
	r := newRun(t, cfg)
	r.step(WakeAsked{Reason: messages.WakeDue})
	r.done(OpDefinition, OK)
	r.done(OpAcquire, OK)
	r.done(OpRestore, OK)
	if r.s.Phase != messages.HostAwake {
		t.Fatalf("worker not awake: %+v", r.s)
	}
	r.step(WorkerDone{})
	r.done(OpNextDue, OK)
	r.step(SidecarsStopped{Proven: true})
	r.done(OpCheckpoint, OK)
	r.done(OpSetDue, OK)
	r.done(OpRelease, OK)
	if r.s.Phase != messages.HostAsleep {
		t.Fatal("worker did not sleep")
	}
}

// A plain (non-hibernating) standalone worker starts with its actor and
// holds no lease.
func TestPlainWorkerStartsAtOnce(t *testing.T) {
	cfg := testConfig()
	cfg.Hibernating, cfg.HasInstance = false, false
	var s State
	s, _ = Step(cfg, s, Begin{}, t0)
	s, fx := Step(cfg, s, OpDone{Op: OpCleanup, Outcome: OK}, t0)
	if ops := doOps(fx); len(ops) != 1 || ops[0] != OpDefinition {
		t.Fatalf("ops %v", ops)
	}
	s, fx = Step(cfg, s, OpDone{Op: OpDefinition, Outcome: OK}, t0)
	if s.Phase != messages.HostAwake || s.Leased {
		t.Fatalf("plain worker: %+v", s)
	}
	if _, ok := find[StartSidecars](fx); !ok {
		t.Fatal("no sidecars")
	}
}

// Properties under random event sequences: one main operation at a time;
// no checkpoint without a valid lease (ACT-6); the gate opens only under a
// lease; the instance is never started twice; nothing wakes after a drain
// (ACT-13); nothing happens after the end.
func TestCoreProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := testConfig()
		cfg.Replication = rapid.SampledFrom([]string{"stream", "batched", "daily"}).Draw(rt, "class")
		cfg.HasSidecars = rapid.Bool().Draw(rt, "sidecars")
		now := t0
		s, _ := Step(cfg, State{}, Begin{}, now)
		outcomes := []string{OK, OK, OK, Failed, Held, Lost, FirstBoot, Corrupt, Unproven, NotReady, Unchanged}
		sides := []Op{SideRenew, SideCheckpoint, SideTick}
		timers := []string{TimerRenew, TimerIdle, TimerCheckpoint, TimerReadyCheck}
		for i := range rapid.IntRange(1, 120).Draw(rt, "n") {
			now = now.Add(time.Duration(rapid.IntRange(0, 600).Draw(rt, "dt")) * time.Second)
			var e any
			switch rapid.IntRange(0, 12).Draw(rt, "ev") {
			case 0, 1, 2, 3:
				e = OpDone{Op: s.Op, Outcome: rapid.SampledFrom(outcomes).Draw(rt, "out"), Due: now.Add(time.Duration(rapid.IntRange(0, 3600).Draw(rt, "due")) * time.Second)}
			case 4:
				e = WakeAsked{Reason: rapid.SampledFrom([]messages.WakeReason{messages.WakeRequest, messages.WakeDue}).Draw(rt, "why")}
			case 5:
				e = SideDone{Op: rapid.SampledFrom(sides).Draw(rt, "side"), Outcome: rapid.SampledFrom(outcomes).Draw(rt, "sout")}
			case 6:
				e = TimerFired{Name: rapid.SampledFrom(timers).Draw(rt, "timer")}
			case 7:
				e = IdleCheck{InFlight: rapid.IntRange(0, 1).Draw(rt, "inflight"), LastActivity: now.Add(-time.Duration(rapid.IntRange(0, 3600).Draw(rt, "ago")) * time.Second)}
			case 8:
				e = GateClosed{OK: rapid.Bool().Draw(rt, "closed")}
			case 9:
				e = SidecarsStopped{Proven: rapid.Bool().Draw(rt, "proven")}
			case 10:
				e = rapid.SampledFrom([]any{InstanceExited{Code: 1}, Sweep{}, Definition{Changed: true}, WorkerDone{}}).Draw(rt, "misc")
			case 11:
				e = Drain{}
			default:
				e = Sweep{}
			}
			before := s
			var fx []step.Effect
			s, fx = Step(cfg, s, e, now)
			if before.Ended && len(fx) > 0 {
				rt.Fatalf("step %d: effects after the end", i)
			}
			for _, f := range fx {
				switch f := f.(type) {
				case step.Arm:
					if !contains(timers, f.Timer) {
						rt.Fatalf("step %d: armed unknown timer %q", i, f.Timer)
					}
				case step.Cancel:
					if !contains(timers, f.Timer) {
						rt.Fatalf("step %d: cancelled unknown timer %q", i, f.Timer)
					}
				case step.End:
					if !s.Ended && !(s.Drained && !before.Drained) {
						rt.Fatalf("step %d: ended neither retired nor newly drained: %+v", i, s)
					}
				case Do:
					if d, ok := e.(OpDone); before.Op != OpNone && !(ok && d.Op == before.Op) {
						rt.Fatalf("step %d: %s started while %s in flight (event %T)", i, f.Op, before.Op, e)
					}
					if f.Op == OpCheckpoint && (!s.Leased || s.LeaseLost) {
						rt.Fatalf("step %d: final checkpoint without a valid lease", i)
					}
					if f.Op == OpStart && before.Started {
						rt.Fatalf("step %d: instance started twice", i)
					}
					if f.Op == OpDefinition && before.Draining {
						rt.Fatalf("step %d: woke while draining", i)
					}
					if f.Op == OpRelease && (s.Started || s.SidecarsUp) {
						rt.Fatalf("step %d: release before the workload stopped", i)
					}
				case Side:
					if f.Op == SideCheckpoint && (!s.Leased || s.LeaseLost) {
						rt.Fatalf("step %d: periodic checkpoint without a valid lease", i)
					}
				case OpenGate:
					if !s.Leased {
						rt.Fatalf("step %d: gate opened without a lease", i)
					}
				}
			}
			if s.Phase == messages.HostAwake && !s.Leased && !s.LeaseLost {
				rt.Fatalf("step %d: awake without a lease: %+v", i, s)
			}
		}
	})
}

// ACT-9 after an actor restart: a cleanup that finds the lease still held
// by this node wakes the host again (reason resume), so what the dead
// incarnation served is checkpointed at the next sleep; a stopped service,
// a drain or a plain cleanup does not wake it.
func TestCleanupResumeWakes(t *testing.T) {
	for _, c := range []struct {
		name    string
		outcome string
		before  any
		wakes   bool
	}{
		{"lease held by this run", Resume, nil, true},
		{"nothing held", OK, nil, false},
		{"stopped intent", Resume, Definition{Stopped: true}, false},
		{"draining", Resume, Drain{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &run{t: t, cfg: testConfig(), now: t0}
			r.step(Begin{})
			if c.before != nil {
				r.step(c.before)
			}
			r.step(OpDone{Op: OpCleanup, Outcome: c.outcome})
			woke := r.s.Phase == messages.HostWaking
			if woke != c.wakes {
				t.Fatalf("waking %v, want %v (state %+v)", woke, c.wakes, r.s)
			}
			if woke && (r.s.Wake.Reason != messages.WakeResume || r.s.Op != OpDefinition) {
				t.Fatalf("wake %+v, op %q", r.s.Wake, r.s.Op)
			}
		})
	}
}
