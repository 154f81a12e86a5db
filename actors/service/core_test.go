package service

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func target(dep, rev string, n int, order string) Target {
	return Target{Deployment: dep, Revision: rev, Replicas: n, Deadline: 2 * time.Minute, Immediate: 3,
		Update: Update{Parallelism: 1, Delay: 10 * time.Second, Order: order, FailureAction: "pause", Monitor: 5 * time.Second}}
}

// world simulates the replica actors the core commands, and the actor
// shell: it reports every Spawn back as Spawned and fires the wake timer
// when it is due.
type world struct {
	t    *testing.T
	cfg  Config
	s    State
	now  time.Time
	acts []step.Effect
	n    int
}

func newWorld(t *testing.T, tg Target) *world {
	return &world{t: t, now: t0, cfg: Config{UnhealthyAfter: 20 * time.Second},
		s: State{Target: tg, Replicas: map[string]Replica{}, Failed: map[string]bool{}, Adopted: true, DepsMet: true}}
}

// step gives the core e and performs its Spawns and intents.
func (w *world) step(e Event) *world {
	w.t.Helper()
	w.s, w.acts = Step(w.cfg, w.s, e, w.now)
	for _, f := range w.acts {
		switch f := f.(type) {
		case Spawn:
			w.n++
			id := fmt.Sprintf("%s-%d", f.Target.Revision, w.n)
			w.s, _ = Step(w.cfg, w.s, Spawned{Replica: Replica{ID: id, Slot: f.Slot, Revision: f.Target.Revision,
				Deployment: f.Target.Deployment, Phase: "creating", SpawnedAt: w.now, Intent: messages.IntentRun}}, w.now)
		case SetIntent:
			r := w.s.Replicas[f.ID]
			r.Intent = f.Intent
			w.s.Replicas[f.ID] = r
		}
	}
	return w
}

// plan is one planning pass: the wake timer's firing when it is due (the
// shell would have fired it by now), else a Tick.
func (w *world) plan() *world {
	w.t.Helper()
	if !w.s.WakeAt.IsZero() && !w.now.Before(w.s.WakeAt) {
		return w.step(Fired{Timer: WakeTimer})
	}
	return w.step(Tick{})
}

// set takes t as the target (the SetTarget primitive).
func (w *world) set(t Target, prev *Target) *world {
	w.t.Helper()
	return w.step(SetTarget{Target: t, Previous: prev})
}

// define takes t as the stack's definition (Define, as the actor does).
func (w *world) define(t Target, prev *Target) *world {
	w.t.Helper()
	return w.step(Define{Target: t, Previous: prev})
}

// serve puts every non-retiring replica of rev into rotation.
func (w *world) serve(rev string) *world {
	for id, r := range w.s.Replicas {
		if r.Revision == rev && !r.Retiring {
			r.Phase, r.InRotation = "serving", true
			w.s.Replicas[id] = r
		}
	}
	return w
}

// gone ends every retiring replica actor.
func (w *world) gone() *world {
	for id, r := range w.s.Replicas {
		if r.Retiring {
			delete(w.s.Replicas, id)
		}
	}
	return w
}

func (w *world) advance(d time.Duration) *world { w.now = w.now.Add(d); return w }

func (w *world) layout() string {
	var parts []string
	for _, r := range sorted(w.s.Replicas) {
		mark := ""
		if r.Retiring {
			mark = "x"
		} else if r.InRotation {
			mark = "+"
		}
		parts = append(parts, fmt.Sprintf("%d:%s%s", r.Slot, r.Revision, mark))
	}
	return strings.Join(parts, " ")
}

func (w *world) want(layout string) *world {
	w.t.Helper()
	if got := w.layout(); got != layout {
		w.t.Fatalf("layout %q, want %q", got, layout)
	}
	return w
}

// has says whether fx holds an effect of type T.
func has[T step.Effect](fx []step.Effect) bool {
	for _, f := range fx {
		if _, ok := f.(T); ok {
			return true
		}
	}
	return false
}

// emitted says whether the last step emitted an event of kind.
func (w *world) emitted(kind string) bool {
	for _, f := range w.acts {
		if e, ok := f.(step.Emit); ok && e.Kind == kind {
			return true
		}
	}
	return false
}

func (w *world) wantEvent(event string) *world {
	w.t.Helper()
	if !w.emitted(event) {
		w.t.Fatalf("no %s in %+v", event, w.acts)
	}
	return w
}

// converge runs a rollout of every slot to rev with healthy instances.
func (w *world) settleTo(rev string, rounds int) *world {
	for i := 0; i < rounds; i++ {
		w.plan().gone().plan().serve(rev).plan().advance(10 * time.Second)
	}
	return w.plan()
}

func TestFillsEverySlot(t *testing.T) {
	w := newWorld(t, target("d1", "a", 3, "stop-first")).plan().want("1:a 2:a 3:a")
	w.plan().want("1:a 2:a 3:a") // nothing twice
}

// No planning before the driver's instances were listed and adopted.
func TestNothingBeforeAdoption(t *testing.T) {
	w := newWorld(t, target("d1", "a", 3, "stop-first"))
	w.s.Adopted = false
	w.plan().want("")
	if len(w.acts) != 1 || w.acts[0] != (Publish{}) {
		t.Fatalf("effects before adoption: %+v, want only the snapshot", w.acts)
	}
}

// SVC-12, SVC-13: stop-first with parallelism 1 retires one old instance,
// fills its slot, waits for it to serve through monitor, then the delay.
func TestSVC12StopFirstBatches(t *testing.T) {
	w := newWorld(t, target("d1", "a", 3, "stop-first")).plan().serve("a").plan()
	prev := w.s.Target
	w.set(target("d2", "b", 3, "stop-first"), &prev)
	w.plan().want("1:ax 2:a+ 3:a+").wantEvent(messages.KindRolloutStarted)
	w.plan().want("1:ax 2:a+ 3:a+") // stop-first: nothing new while the old retires
	w.gone().plan().want("1:b 2:a+ 3:a+")
	w.serve("b").plan().want("1:b+ 2:a+ 3:a+")
	w.advance(5 * time.Second).plan()
	if !has[SaveProgress](w.acts) {
		t.Fatalf("no progress saved after monitor: %+v", w.acts)
	}
	w.plan().want("1:b+ 2:a+ 3:a+")
	if !w.s.WakeAt.Equal(w.now.Add(10 * time.Second)) {
		t.Fatalf("wake armed for %s, want the batch delay", w.s.WakeAt)
	}
	w.advance(10 * time.Second).plan().want("1:b+ 2:ax 3:a+")
	w.gone().plan().serve("b").plan().advance(5 * time.Second).plan().advance(10 * time.Second).plan().gone().plan().serve("b").plan().advance(5 * time.Second).plan()
	w.want("1:b+ 2:b+ 3:b+").wantEvent(messages.KindDeploySucceeded)
	if w.s.Rollout != nil {
		t.Fatal("rollout still open")
	}
}

// SVC-12: start-first creates the new instance beside the old, which keeps
// serving until the new one serves (capacity kept).
func TestSVC12StartFirstKeepsCapacity(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "start-first")).plan().serve("a").plan()
	prev := w.s.Target
	w.set(target("d2", "b", 2, "start-first"), &prev)
	w.plan().want("1:a+ 1:b 2:a+")
	w.serve("b").plan().want("1:ax 1:b+ 2:a+")
}

// SVC-12: parallelism 0 means every slot at once.
func TestSVC12ParallelismZeroIsAll(t *testing.T) {
	tg := target("d1", "a", 3, "stop-first")
	w := newWorld(t, tg).plan().serve("a").plan()
	next := target("d2", "b", 3, "stop-first")
	next.Update.Parallelism = 0
	prev := w.s.Target
	w.set(next, &prev)
	w.plan().want("1:ax 2:ax 3:ax")
}

// SVC-13: a new instance that does not serve within its deadline pauses
// the rollout; the revision is marked failed; start-first retires the
// failed new instance so the old keeps serving.
func TestSVC13DeadlinePauses(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "start-first")).plan().serve("a").plan()
	prev := w.s.Target
	w.set(target("d2", "b", 2, "start-first"), &prev)
	w.plan().want("1:a+ 1:b 2:a+")
	w.advance(2 * time.Minute).plan().wantEvent(messages.KindRolloutPaused).want("1:a+ 1:bx 2:a+")
	if !has[MarkFailed](w.acts) || !w.s.Rollout.Paused {
		t.Fatal("not marked failed and paused")
	}
	w.gone().plan().want("1:a+ 2:a+")
	if got := Summarize(w.s, "", w.now).State; got != messages.ServicePaused {
		t.Fatalf("state %s", got)
	}
}

// SVC-13: with rollback the previous deployment becomes the target again
// and the failed instances are replaced.
func TestSVC13Rollback(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "stop-first")).plan().serve("a").plan()
	next := target("d2", "b", 2, "stop-first")
	next.Update.FailureAction = "rollback"
	prev := w.s.Target
	w.set(next, &prev)
	w.plan().gone().plan().want("1:b 2:a+")
	w.advance(2 * time.Minute).plan().wantEvent(messages.KindRolloutRolledBack)
	if w.s.Target.Revision != "a" {
		t.Fatalf("target %s after rollback", w.s.Target.Revision)
	}
	w.settleTo("a", 3).want("1:a+ 2:a+")
	// The failed (deployment, revision) is not retried (SVC-14).
	prev = w.s.Target
	w.set(next, &prev)
	w.plan().want("1:a+ 2:a+")
	if w.s.Target.Revision != "a" {
		t.Fatalf("failed revision retried: target %s", w.s.Target.Revision)
	}
}

// SVC-13: an instance that leaves rotation during monitor fails the batch.
func TestSVC13MonitorFailure(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "stop-first")).plan().serve("a").plan()
	prev := w.s.Target
	w.set(target("d2", "b", 2, "stop-first"), &prev)
	w.plan().gone().plan().serve("b").plan()
	for id, r := range w.s.Replicas {
		if r.Revision == "b" {
			r.InRotation, r.Phase = false, "unhealthy"
			w.s.Replicas[id] = r
		}
	}
	w.advance(time.Second).plan().wantEvent(messages.KindRolloutPaused)
}

// SVC-13: continue carries on with the next batch.
func TestSVC13Continue(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "stop-first")).plan().serve("a").plan()
	next := target("d2", "b", 2, "stop-first")
	next.Update.FailureAction = "continue"
	prev := w.s.Target
	w.set(next, &prev)
	w.plan().gone().plan()
	w.advance(2 * time.Minute).plan().wantEvent(messages.KindDeployFailed)
	w.advance(10 * time.Second).plan().want("1:b 2:ax")
}

// SVC-14: a deployment that arrives mid-batch supersedes at the boundary.
func TestSVC14SupersedeAtBatchBoundary(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "stop-first")).plan().serve("a").plan()
	prev := w.s.Target
	w.set(target("d2", "b", 2, "stop-first"), &prev)
	w.plan().gone().plan().want("1:b 2:a+")
	prev = w.s.Target
	w.set(target("d3", "c", 2, "stop-first"), &prev)
	if w.s.Target.Revision != "b" || w.s.Pending == nil {
		t.Fatal("superseded mid-batch")
	}
	w.serve("b").plan().advance(5 * time.Second).plan().wantEvent(messages.KindRolloutSuperseded)
	if w.s.Target.Revision != "c" {
		t.Fatalf("target %s after the boundary", w.s.Target.Revision)
	}
}

// SVC-14: a paused rollout is at a batch boundary: a deployment that
// arrives after the pause supersedes it at once, and one that was waiting
// for the batch when the rollout paused supersedes it at the next pass (it
// was held back for good before; found by TestPlannerConvergesProperty).
func TestSVC14DeploymentSupersedesPausedRollout(t *testing.T) {
	paused := func(t *testing.T) *world {
		w := newWorld(t, target("d1", "a", 2, "start-first")).plan().serve("a").plan()
		prev := w.s.Target
		w.set(target("d2", "b", 2, "start-first"), &prev)
		w.plan().want("1:a+ 1:b 2:a+")
		return w
	}
	t.Run("after the pause", func(t *testing.T) {
		w := paused(t)
		w.advance(2 * time.Minute).plan().wantEvent(messages.KindRolloutPaused)
		w.gone().plan()
		prev := w.s.Target
		w.set(target("d3", "c", 2, "start-first"), &prev)
		if w.s.Pending != nil || w.s.Target.Revision != "c" {
			t.Fatalf("target %s, pending %+v: held back by the paused rollout", w.s.Target.Revision, w.s.Pending)
		}
		w.plan().want("1:a+ 1:c 2:a+").wantEvent(messages.KindRolloutStarted)
		w.serve("c").plan().advance(5 * time.Second).plan().advance(10 * time.Second).plan().gone().plan().serve("c").plan().advance(5 * time.Second).plan().gone()
		w.want("1:c+ 2:c+")
	})
	t.Run("waiting when it paused", func(t *testing.T) {
		w := paused(t)
		prev := w.s.Target
		w.set(target("d3", "c", 2, "start-first"), &prev)
		if w.s.Pending == nil {
			t.Fatal("mid-batch deployment did not wait for the boundary")
		}
		w.advance(2 * time.Minute).plan().wantEvent(messages.KindRolloutPaused)
		w.plan().wantEvent(messages.KindRolloutSuperseded)
		if w.s.Target.Revision != "c" || w.s.Pending != nil {
			t.Fatalf("target %s pending %+v after the pause", w.s.Target.Revision, w.s.Pending)
		}
	})
}

// SVC-15: after an interrupted rollout an old instance beside a serving
// current one goes, one of two current instances is kept, and slots above
// the replica count go, highest first.
func TestSVC15CleanupAfterInterruption(t *testing.T) {
	w := newWorld(t, target("d2", "b", 2, "start-first"))
	for _, r := range []Replica{
		{ID: "o1", Slot: 1, Revision: "a", InRotation: true, Phase: "serving"},
		{ID: "n1", Slot: 1, Revision: "b", InRotation: true, Phase: "serving"},
		{ID: "n2", Slot: 2, Revision: "b", InRotation: true, Phase: "serving", SpawnedAt: t0},
		{ID: "n2b", Slot: 2, Revision: "b", Phase: "probing", SpawnedAt: t0.Add(time.Second)},
		{ID: "x3", Slot: 3, Revision: "b", InRotation: true, Phase: "serving"},
		{ID: "x4", Slot: 4, Revision: "a", InRotation: true, Phase: "serving"},
	} {
		r.Intent = messages.IntentRun
		w.s.Replicas[r.ID] = r
	}
	w.plan().want("1:b+ 1:ax 2:b+ 2:bx 3:bx 4:ax")
	if r, ok := w.acts[0].(Retire); !ok || r.ID != "x4" {
		t.Fatalf("first retire %+v, want the highest slot", w.acts[0])
	}
}

// SVC-17: scale down removes the highest slots first; scale up fills.
func TestSVC17Scale(t *testing.T) {
	w := newWorld(t, target("d1", "a", 3, "stop-first")).plan().serve("a")
	w.s.Target.Replicas = 1
	w.plan().want("1:a+ 2:ax 3:ax")
	w.gone()
	w.s.Target.Replicas = 2
	w.plan().want("1:a+ 2:a")
}

// SVC-10: a stopped intent stops every instance and creates nothing.
func TestSVC10StoppedIntent(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "stop-first")).plan().serve("a")
	w.s.Stopped = true
	w.plan()
	for _, r := range w.s.Replicas {
		if r.Intent != messages.IntentStop {
			t.Fatalf("replica %s intent %s", r.ID, r.Intent)
		}
	}
	w.s.Target.Replicas = 3
	w.plan().want("1:a+ 2:a+")
	w.s.Stopped = false
	w.plan().want("1:a+ 2:a+ 3:a")
}

// SVC-18: a service waits for its dependencies before creating anything;
// once they were met it is never gated again.
func TestSVC18WaitsForDependencies(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "stop-first"))
	w.cfg.DependsOn = []stackfile.Dependency{{Service: "db", Condition: stackfile.ConditionStarted}}
	w.s.DepsMet = false
	w.plan().want("")
	if got := Summarize(w.s, "db", w.now).State; got != messages.ServiceWaiting {
		t.Fatalf("state %s", got)
	}
	w.step(Dependency{Status: messages.DependencyStatus{Service: "db", Running: 1}})
	if len(w.acts) != 1 || w.acts[0] != (Replan{}) {
		t.Fatalf("a dependency's status gives %+v, want a replan", w.acts)
	}
	w.plan().want("1:a 2:a")
	w.step(Dependency{Status: messages.DependencyStatus{Service: "db"}})
	w.s.Target.Replicas = 3
	w.plan().want("1:a 2:a 3:a")
}

// SVC-8: a slot whose instance is gone (leaving) is filled afresh.
func TestSVC8FillsSlotOfMissingInstance(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "stop-first")).plan().serve("a")
	for id, r := range w.s.Replicas {
		if r.Slot == 2 {
			r.Leaving, r.InRotation = true, false
			w.s.Replicas[id] = r
		}
	}
	w.plan()
	if sp, ok := w.acts[0].(Spawn); !ok || sp.Slot != 2 {
		t.Fatalf("slot 2 not refilled: %+v", w.acts)
	}
}

// SVC-19: converged only when every slot serves the current revision.
func TestSVC19Summary(t *testing.T) {
	w := newWorld(t, target("d1", "a", 2, "stop-first")).plan()
	if got := Summarize(w.s, "", w.now); got.State != messages.ServiceStarting {
		t.Fatalf("state %s", got.State)
	}
	w.serve("a")
	if got := Summarize(w.s, "", w.now); got.State != messages.ServiceConverged || got.Healthy != 2 {
		t.Fatalf("summary %+v", got)
	}
	for id, r := range w.s.Replicas {
		r.Phase, r.InRotation, r.Failures, r.LastError = "failed", false, 9, "restart limit reached: exited with code 1"
		w.s.Replicas[id] = r
		break
	}
	if got := Summarize(w.s, "", w.now); got.State != messages.ServiceFailing || !strings.Contains(got.Message, "restart limit") {
		t.Fatalf("summary %+v", got)
	}
}

// SVC-20: health.unhealthy after 20s with no healthy replica (not while
// rolling out), once; health.recovered when one is back.
func TestSVC20HealthAlarm(t *testing.T) {
	var a Alarm
	var acts []step.Effect
	emits := func(fx []step.Effect, kind string) bool {
		e, ok := fx[0].(step.Emit)
		return len(fx) == 1 && ok && e.Kind == kind
	}
	a, _ = a.watch(2, false, t0, 20*time.Second)
	a, acts = a.watch(0, false, t0.Add(time.Second), 20*time.Second)
	if wk, ok := acts[0].(wake); len(acts) != 1 || !ok || !wk.At.Equal(t0.Add(21*time.Second)) {
		t.Fatalf("acts %+v", acts)
	}
	a, acts = a.watch(0, false, t0.Add(21*time.Second), 20*time.Second)
	if !emits(acts, messages.KindHealthUnhealthy) {
		t.Fatalf("acts %+v", acts)
	}
	a, acts = a.watch(0, false, t0.Add(60*time.Second), 20*time.Second)
	if len(acts) != 0 {
		t.Fatalf("raised twice: %+v", acts)
	}
	_, acts = a.watch(1, false, t0.Add(61*time.Second), 20*time.Second)
	if !emits(acts, messages.KindHealthRecovered) {
		t.Fatalf("acts %+v", acts)
	}
	var b Alarm
	b, _ = b.watch(1, false, t0, 20*time.Second)
	_, acts = b.watch(0, true, t0.Add(time.Hour), 20*time.Second)
	if len(acts) != 0 {
		t.Fatalf("raised during a rollout: %+v", acts)
	}
	var never Alarm
	if _, acts = never.watch(0, false, t0.Add(time.Hour), 20*time.Second); len(acts) != 0 {
		t.Fatal("raised for a service that was never healthy")
	}
}

// Properties over random histories: after the world settles (retires done,
// new instances serve), every slot 1..N holds exactly one serving instance
// of the target and nothing else remains (CHS-3's "no slot serves two").
func TestPlannerConvergesProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		order := rapid.SampledFrom([]string{"stop-first", "start-first"}).Draw(rt, "order")
		n := rapid.IntRange(0, 6).Draw(rt, "replicas")
		w := newWorld(t, target("d1", "r0", n, order))
		w.s.Target.Update.Parallelism = rapid.IntRange(0, 3).Draw(rt, "par")
		rev := "r0"
		for step := 0; step < 40; step++ {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0:
				rev = fmt.Sprintf("r%d", step+1)
				tg := w.s.Target
				tg.Deployment, tg.Revision = fmt.Sprintf("d%d", step+1), rev
				prev := w.s.Target
				w.set(tg, &prev)
			case 1:
				w.s.Target.Replicas = rapid.IntRange(0, 6).Draw(rt, "scale")
			case 2:
				w.gone()
			case 3:
				w.serve(w.s.Target.Revision)
			case 4:
				w.advance(time.Duration(rapid.IntRange(0, 30).Draw(rt, "wait")) * time.Second)
			}
			w.plan()
		}
		for i := 0; i < 30; i++ {
			w.gone().plan().serve(w.s.Target.Revision).plan().advance(15 * time.Second)
		}
		w.plan()
		// A rollout that paused (SVC-13) keeps the old revision in the
		// slots it had not reached: that is the rule, not a leftover.
		kept := ""
		if ro := w.s.Rollout; ro != nil && ro.Paused {
			kept = ro.From
		}
		perSlot := map[int]int{}
		for _, r := range w.s.Replicas {
			current := r.Revision == w.s.Target.Revision || (kept != "" && r.Revision == kept)
			if r.Retiring || !current || !r.InRotation || r.Slot > w.s.Target.Replicas {
				rt.Fatalf("left over: %+v (target %s x%d)", r, w.s.Target.Revision, w.s.Target.Replicas)
			}
			perSlot[r.Slot]++
		}
		for s := 1; s <= w.s.Target.Replicas; s++ {
			if perSlot[s] != 1 {
				rt.Fatalf("slot %d holds %d instances: %s", s, perSlot[s], w.layout())
			}
		}
	})
}

// markNew sets every replica of rev that is not retiring.
func (w *world) markNew(rev string, f func(r *Replica)) *world {
	for id, r := range w.s.Replicas {
		if r.Revision == rev && !r.Retiring {
			f(&r)
			w.s.Replicas[id] = r
		}
	}
	return w
}

// SVC-13: a new instance whose healthcheck has failed `retries` times
// after start_period (the replica reports health unhealthy) fails its
// batch at once, long before the deadline, and failure_action applies at
// once: pause retires the new instance beside the old (start-first),
// rollback goes back to the previous revision.
func TestSVC13UnhealthyNewInstanceFailsAtOnce(t *testing.T) {
	for _, action := range []string{"pause", "rollback"} {
		t.Run(action, func(t *testing.T) {
			w := newWorld(t, target("d1", "a", 2, "start-first")).plan().serve("a").plan()
			next := target("d2", "b", 2, "start-first")
			next.Update.FailureAction = action
			prev := w.s.Target
			w.define(next, &prev)
			w.plan().want("1:a+ 1:b 2:a+")
			w.advance(2*time.Second).markNew("b", func(r *Replica) { r.Phase, r.Health = "probing", "starting" }).plan()
			if w.emitted(messages.KindDeployFailed) {
				t.Fatal("failed while still starting")
			}
			w.advance(time.Second).markNew("b", func(r *Replica) {
				r.Phase, r.Health, r.Probe = "stopping", "unhealthy", "exit code 1"
			}).plan()
			w.wantEvent(messages.KindDeployFailed)
			if !has[MarkFailed](w.acts) {
				t.Fatal("revision not marked failed")
			}
			for _, f := range w.acts {
				if e, ok := f.(step.Emit); ok && e.Kind == messages.KindDeployFailed && !strings.Contains(e.Message, "slot 1 turned unhealthy: exit code 1") {
					t.Fatalf("deploy.failed says %q", e.Message)
				}
			}
			switch action {
			case "pause":
				w.wantEvent(messages.KindRolloutPaused).want("1:a+ 1:bx 2:a+")
			case "rollback":
				w.wantEvent(messages.KindRolloutRolledBack)
				if w.s.Target.Revision != "a" {
					t.Fatalf("target %s after rollback", w.s.Target.Revision)
				}
				w.want("1:a+ 1:bx 2:a+")
			}
		})
	}
}

// SUP-17: only a new revision of this service clears its backoff; the
// stack sending the same revision again (another service changed, or only
// the replica count) does not (issue 13: a failing service's restart count
// jumped from 3 to 7 after an unrelated edit).
func TestSUP17OnlyANewRevisionClearsBackoff(t *testing.T) {
	cases := []struct {
		name  string
		next  Target
		clear bool
	}{
		{"another service of the stack changed", target("d2", "a", 1, "stop-first"), false},
		{"scaled", target("d2", "a", 3, "stop-first"), false},
		{"new definition", target("d2", "b", 1, "stop-first"), true},
		{"redeploy", target("d2", "a-r1", 1, "stop-first"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := State{Replicas: map[string]Replica{}, Failed: map[string]bool{}}
			s, acts := Step(Config{}, s, Define{Target: target("d1", "a", 1, "stop-first")}, t0)
			if len(acts) != 1 || acts[0] != (Replan{}) {
				t.Fatalf("first definition: %+v", acts)
			}
			prev := s.Target
			s, acts = Step(Config{}, s, Define{Target: c.next, Previous: &prev}, t0)
			cleared := len(acts) == 2 && acts[0] == (ClearBackoff{}) && acts[1] == (Replan{})
			if cleared != c.clear || (!c.clear && (len(acts) != 1 || acts[0] != (Replan{}))) {
				t.Fatalf("effects %+v, want clear=%v", acts, c.clear)
			}
			if s.Target != c.next {
				t.Fatalf("target %+v, want %+v", s.Target, c.next)
			}
		})
	}
}

// SVC-13, SVC-14, issue 13: an edit of another service (a new deployment
// with this service's revision unchanged) leaves what this service decided
// alone: a revision that failed and paused is not retried, a rollback
// stays rolled back, and nothing flips back and forth.
func TestSVC14UnrelatedEditKeepsFailedRevision(t *testing.T) {
	for _, action := range []string{"pause", "rollback"} {
		t.Run(action, func(t *testing.T) {
			w := newWorld(t, target("d1", "a", 1, "start-first"))
			w.define(w.s.Target, nil)
			w.plan().serve("a").plan()
			bad := target("d2", "b", 1, "start-first")
			bad.Update.FailureAction = action
			prev := w.s.Target
			w.define(bad, &prev)
			w.plan().advance(3 * time.Minute).plan().wantEvent(messages.KindDeployFailed)
			w.gone().plan().want("1:a+")
			// Another service of the stack changed: deployment d3, and the
			// stack's previous deployment has this service at b too.
			edit := bad
			edit.Deployment = "d3"
			before := w.s.Target.Revision
			if w.define(edit, &bad); has[ClearBackoff](w.acts) {
				t.Fatal("the unrelated edit cleared the backoff")
			}
			for i := 0; i < 5; i++ {
				w.plan().gone().advance(10 * time.Second)
				if has[Spawn](w.acts) || w.emitted(messages.KindRolloutStarted) || w.emitted(messages.KindRolloutRolledBack) {
					t.Fatalf("pass %d after the edit: %+v", i, w.acts)
				}
			}
			w.want("1:a+")
			if action == "rollback" && w.s.Target.Revision != before {
				t.Fatalf("target %s, was %s", w.s.Target.Revision, before)
			}
			if action == "pause" && !w.s.Failed["d3/b"] {
				t.Fatalf("failed revisions %v: b is not remembered for d3", w.s.Failed)
			}
		})
	}
}
