package service

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

// served is a service of two serving replicas of revision a.
func served() State {
	s := State{Target: target("d1", "a", 2, "stop-first"), Replicas: map[string]Replica{}, Failed: map[string]bool{},
		Deps: map[string]messages.DependencyStatus{}, Adopted: true, DepsMet: true, Defined: "a"}
	for _, r := range []Replica{{ID: "a-1", Slot: 1}, {ID: "a-2", Slot: 2}} {
		r.Revision, r.Deployment, r.Phase, r.InRotation, r.Intent = "a", "d1", "serving", true, messages.IntentRun
		s.Replicas[r.ID] = r
	}
	return s
}

// The events that only record what the actor saw: each changes the state
// as said and asks for what it says, nothing more.
func TestStepRecordingEvents(t *testing.T) {
	stopped := served()
	stopped.Stopped = true
	retiring := served()
	r := retiring.Replicas["a-1"]
	r.Retiring, r.InRotation = true, false
	retiring.Replicas["a-1"] = r
	cases := []struct {
		name  string
		s     State
		e     Event
		check func(s State) bool
		fx    []step.Effect
	}{
		{"Recall remembers failed revisions (SVC-14)", served(), Recall{Failed: map[string]bool{"d0/z": true}},
			func(s State) bool { return s.Failed["d0/z"] }, nil},
		{"Spawned holds the new replica", served(), Spawned{Replica: Replica{ID: "b-3", Slot: 1, Revision: "b"}},
			func(s State) bool { return s.Replicas["b-3"].Revision == "b" && len(s.Replicas) == 3 }, nil},
		{"Report takes the replica's status", served(),
			Report{Status: messages.ReplicaStatus{ID: "a-1", Phase: "down", Health: "unhealthy", LastProbe: "HTTP 500",
				Ledger: messages.Ledger{Failures: 2, NextAttempt: t0.Add(time.Minute)}, LastError: "exited with code 1"}},
			func(s State) bool {
				r := s.Replicas["a-1"]
				return r.Phase == "down" && !r.InRotation && r.Failures == 2 && r.LastError == "exited with code 1" &&
					r.NextAttempt.Equal(t0.Add(time.Minute)) && r.Health == "unhealthy" && r.Probe == "HTTP 500"
			}, []step.Effect{Replan{}}},
		{"Report of a restarted replica actor keeps the ledger's reason", served(),
			Report{Status: messages.ReplicaStatus{ID: "a-1", Phase: "down", Ledger: messages.Ledger{Failures: 1, LastReason: "killed"}}},
			func(s State) bool { return s.Replicas["a-1"].LastError == "killed" }, []step.Effect{Replan{}}},
		{"Report of a retiring replica never puts it in rotation", retiring,
			Report{Status: messages.ReplicaStatus{ID: "a-1", Phase: "serving", InRotation: true}},
			func(s State) bool { return !s.Replicas["a-1"].InRotation }, []step.Effect{Replan{}}},
		{"SVC-8 Report of a replaced instance: the replica leaves its slot", served(),
			Report{Status: messages.ReplicaStatus{ID: "a-2", Phase: "serving", InRotation: true, Replace: true}},
			func(s State) bool { r := s.Replicas["a-2"]; return r.Leaving && !r.InRotation }, []step.Effect{Replan{}}},
		{"Report of a replica the service no longer has is dropped", served(),
			Report{Status: messages.ReplicaStatus{ID: "gone", Phase: "serving"}},
			func(s State) bool { _, ok := s.Replicas["gone"]; return !ok && len(s.Replicas) == 2 }, nil},
		{"Exited forgets the replica", served(), Exited{ID: "a-2"},
			func(s State) bool { _, ok := s.Replicas["a-2"]; return !ok && len(s.Replicas) == 1 }, []step.Effect{Replan{}}},
		{"Exited of a child that was no replica still plans", served(), Exited{},
			func(s State) bool { return len(s.Replicas) == 2 }, []step.Effect{Replan{}}},
		{"SVC-18 Dependency records the status", served(), Dependency{Status: messages.DependencyStatus{Service: "db", Running: 1}},
			func(s State) bool { return s.Deps["db"].Running == 1 }, []step.Effect{Replan{}}},
		{"SVC-10 SetStopped stops, with an event", served(), SetStopped{Stopped: true},
			func(s State) bool { return s.Stopped },
			[]step.Effect{step.Emit{Kind: messages.KindServiceStopped, Level: messages.LevelInfo, Message: "stopped by the operator"}, Replan{}}},
		{"SVC-10 SetStopped false starts, with an event", stopped, SetStopped{},
			func(s State) bool { return !s.Stopped },
			[]step.Effect{step.Emit{Kind: messages.KindServiceStarted, Level: messages.LevelInfo, Message: "started by the operator"}, Replan{}}},
		{"SVC-10 the same intent again does nothing", stopped, SetStopped{Stopped: true},
			func(s State) bool { return s.Stopped }, nil},
		{"SUP-17 Retry clears every replica's backoff", served(), Retry{},
			func(s State) bool { return len(s.Replicas) == 2 }, []step.Effect{ClearBackoff{}}},
		{"Remove marks the service removed", served(), Remove{},
			func(s State) bool { return s.Removed && len(s.Replicas) == 2 }, []step.Effect{Replan{}}},
		{"SetTarget asks for nothing", served(), SetTarget{Target: target("d2", "b", 2, "stop-first")},
			func(s State) bool { return s.Target.Revision == "b" }, nil},
		{"a timer the core never armed is refused", served(), Fired{Timer: "other"},
			func(s State) bool { return len(s.Replicas) == 2 }, []step.Effect{step.Refuse{Reason: `no timer "other"`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(c.s)
			got, fx := Step(Config{}, c.s, c.e, t0)
			if !c.check(got) {
				t.Fatalf("state %+v", got)
			}
			if !reflect.DeepEqual(fx, c.fx) {
				t.Fatalf("effects %+v, want %+v", fx, c.fx)
			}
			if !reflect.DeepEqual(c.s, before) {
				t.Fatal("Step changed the state it was given")
			}
		})
	}
}

// SVC-18: depends_on is met when each dependency has a running replica
// (service_started) or a healthy one (service_healthy).
func TestSVC18DependsOnConditions(t *testing.T) {
	started := []stackfile.Dependency{{Service: "db", Condition: stackfile.ConditionStarted}}
	healthy := []stackfile.Dependency{{Service: "db", Condition: stackfile.ConditionHealthy}}
	both := append(append([]stackfile.Dependency(nil), started...), stackfile.Dependency{Service: "q", Condition: stackfile.ConditionHealthy})
	cases := []struct {
		name string
		deps []stackfile.Dependency
		st   map[string]messages.DependencyStatus
		met  bool
	}{
		{"no dependencies", nil, nil, true},
		{"started: not heard of", started, nil, false},
		{"started: running", started, map[string]messages.DependencyStatus{"db": {Service: "db", Running: 1}}, true},
		{"started: healthy counts as running", started, map[string]messages.DependencyStatus{"db": {Service: "db", Healthy: 1}}, true},
		{"healthy: only running", healthy, map[string]messages.DependencyStatus{"db": {Service: "db", Running: 2}}, false},
		{"healthy: healthy", healthy, map[string]messages.DependencyStatus{"db": {Service: "db", Running: 1, Healthy: 1}}, true},
		{"two: one missing", both, map[string]messages.DependencyStatus{"db": {Service: "db", Running: 1}}, false},
		{"two: both met", both, map[string]messages.DependencyStatus{"db": {Running: 1}, "q": {Running: 1, Healthy: 1}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := depsMet(Config{DependsOn: c.deps}, c.st); got != c.met {
				t.Fatalf("met %v, want %v", got, c.met)
			}
			s := served()
			s.Replicas, s.DepsMet = map[string]Replica{}, false
			s.Deps = c.st
			s, fx := Step(Config{DependsOn: c.deps}, s, Tick{}, t0)
			if s.DepsMet != c.met || has[Spawn](fx) != c.met {
				t.Fatalf("after a pass: deps met %v, spawns %v; want %v", s.DepsMet, has[Spawn](fx), c.met)
			}
		})
	}
}

// The removal: nothing before adoption (instances found on the driver go
// too); then every instance retires, highest slot last, the snapshot is
// published, and once the last replica actor ended the service shuts down
// and ends, in that order.
func TestStepRemoval(t *testing.T) {
	s := served()
	s.Adopted = false
	s, fx := Step(Config{}, s, Remove{}, t0)
	if !reflect.DeepEqual(fx, []step.Effect{Replan{}}) {
		t.Fatalf("remove before adoption: %+v, want only a replan", fx)
	}
	if s, fx = Step(Config{}, s, Tick{}, t0); len(fx) != 0 {
		t.Fatalf("removal before adoption: %+v", fx)
	}
	s, fx = Step(Config{}, s, Adopted{}, t0)
	want := []step.Effect{Retire{ID: "a-1", Slot: 1}, Retire{ID: "a-2", Slot: 2}, Publish{}}
	if !reflect.DeepEqual(fx, want) {
		t.Fatalf("effects %+v, want %+v", fx, want)
	}
	for _, r := range s.Replicas {
		if !r.Retiring || r.InRotation {
			t.Fatalf("replica %+v not retiring", r)
		}
	}
	s, _ = Step(Config{}, s, Exited{ID: "a-1"}, t0)
	if s, fx = Step(Config{}, s, Tick{}, t0); !reflect.DeepEqual(fx, []step.Effect{Publish{}}) {
		t.Fatalf("effects %+v while a replica still retires", fx)
	}
	s, _ = Step(Config{}, s, Exited{ID: "a-2"}, t0)
	_, fx = Step(Config{}, s, Tick{}, t0)
	if want := []step.Effect{Publish{}, Shutdown{}, step.End{}}; !reflect.DeepEqual(fx, want) {
		t.Fatalf("effects %+v, want %+v", fx, want)
	}
}

// SUP-19: the wake timer is armed for the earliest deadline a pass needs,
// and again only for an earlier one; once it fired, the next deadline
// arms it again.
func TestStepWakeTimer(t *testing.T) {
	w := newWorld(t, target("d1", "a", 1, "start-first")).plan().serve("a").plan()
	prev := w.s.Target
	w.set(target("d2", "b", 1, "start-first"), &prev).plan()
	deadline := w.now.Add(2 * time.Minute)
	if len(armsOf(w.acts)) != 0 {
		t.Fatalf("the batch's first pass armed %+v", w.acts)
	}
	w.advance(time.Second).plan() // the new replica's first report: the batch is watched
	if arms := armsOf(w.acts); len(arms) != 1 || !arms[0].At.Equal(deadline) || !w.s.WakeAt.Equal(deadline) {
		t.Fatalf("arms %+v, wake at %s; want the deadline %s", arms, w.s.WakeAt, deadline)
	}
	w.advance(time.Second).plan()
	if arms := armsOf(w.acts); len(arms) != 0 {
		t.Fatalf("armed again for a later or the same deadline: %+v", arms)
	}
	w.serve("b").plan() // the monitor ends before the deadline
	until := w.now.Add(5 * time.Second)
	if arms := armsOf(w.acts); len(arms) != 1 || !arms[0].At.Equal(until) {
		t.Fatalf("arms %+v, want the monitor's end %s", arms, until)
	}
	w.advance(5 * time.Second)
	w.plan() // the wake fires
	if !w.s.WakeAt.IsZero() && !w.s.WakeAt.After(w.now) {
		t.Fatalf("wake at %s after it fired at %s", w.s.WakeAt, w.now)
	}
	w.want("1:ax 1:b+")
	if !w.emitted(messages.KindDeploySucceeded) && !has[SaveProgress](w.acts) {
		t.Fatalf("the fired wake did not end the batch: %+v", w.acts)
	}
}

// SVC-20 through Step: the alarm uses the configured delay and arms the
// wake timer for it.
func TestSVC20AlarmThroughStep(t *testing.T) {
	w := newWorld(t, target("d1", "a", 1, "stop-first")).plan().serve("a").plan()
	w.cfg.UnhealthyAfter = 30 * time.Second
	w.markNew("a", func(r *Replica) { r.Phase, r.InRotation = "probing", false })
	w.plan()
	if !w.s.WakeAt.Equal(w.now.Add(30 * time.Second)) {
		t.Fatalf("wake at %s, want the alarm's delay", w.s.WakeAt)
	}
	w.advance(29 * time.Second).plan()
	if w.emitted(messages.KindHealthUnhealthy) {
		t.Fatal("raised before the delay")
	}
	w.advance(time.Second).plan().wantEvent(messages.KindHealthUnhealthy)
	w.serve("a").plan().wantEvent(messages.KindHealthRecovered)
}

func armsOf(fx []step.Effect) []step.Arm {
	var out []step.Arm
	for _, f := range fx {
		if a, ok := f.(step.Arm); ok {
			out = append(out, a)
		}
	}
	return out
}

// snapshot is a deep copy of s, to tell whether Step changed it.
func snapshot(s State) State {
	c := copyMaps(s)
	if s.Previous != nil {
		p := *s.Previous
		c.Previous = &p
	}
	if s.Pending != nil {
		p := *s.Pending
		c.Pending = &p
	}
	if s.Deps == nil {
		c.Deps = nil
	}
	return c
}

// drawEvent picks an event the actor could feed the core now.
func drawEvent(rt *rapid.T, w *world, i int) Event {
	ids := []string{"", "nobody"}
	for _, r := range sorted(w.s.Replicas) {
		ids = append(ids, r.ID)
	}
	switch rapid.IntRange(0, 13).Draw(rt, "event") {
	case 0:
		tg := w.s.Target
		tg.Deployment, tg.Revision = fmt.Sprintf("d%d", i+1), rapid.SampledFrom([]string{tg.Revision, fmt.Sprintf("r%d", i+1)}).Draw(rt, "rev")
		tg.Replicas = rapid.IntRange(0, 4).Draw(rt, "scale")
		tg.Update.FailureAction = rapid.SampledFrom([]string{"pause", "rollback", "continue"}).Draw(rt, "action")
		prev := w.s.Target
		return Define{Target: tg, Previous: &prev}
	case 1:
		tg := w.s.Target
		tg.Deployment, tg.Revision = fmt.Sprintf("d%d", i+1), fmt.Sprintf("r%d", i+1)
		prev := w.s.Target
		return SetTarget{Target: tg, Previous: &prev}
	case 2, 3:
		st := messages.ReplicaStatus{ID: rapid.SampledFrom(ids).Draw(rt, "id"),
			Phase:   rapid.SampledFrom([]string{"creating", "probing", "serving", "unhealthy", "down", "failed"}).Draw(rt, "phase"),
			Health:  rapid.SampledFrom([]string{"none", "starting", "healthy", "unhealthy"}).Draw(rt, "health"),
			Replace: rapid.IntRange(0, 9).Draw(rt, "replace") == 0,
			Ledger:  messages.Ledger{Failures: rapid.IntRange(0, 5).Draw(rt, "failures"), NextAttempt: w.now.Add(time.Minute)}}
		st.InRotation = st.Phase == "serving" && st.Health != "unhealthy"
		st.ServingSince = w.now
		return Report{Status: st}
	case 4:
		return Exited{ID: rapid.SampledFrom(ids).Draw(rt, "id")}
	case 5:
		return Dependency{Status: messages.DependencyStatus{Service: "db", Running: rapid.IntRange(0, 1).Draw(rt, "running")}}
	case 6:
		return SetStopped{Stopped: rapid.Bool().Draw(rt, "stopped")}
	case 7:
		return Retry{}
	case 8:
		if rapid.IntRange(0, 5).Draw(rt, "remove") == 0 {
			return Remove{}
		}
		return Tick{}
	case 9:
		return Fired{Timer: rapid.SampledFrom([]string{WakeTimer, WakeTimer, "other"}).Draw(rt, "timer")}
	case 10:
		return Adopted{}
	case 11:
		return Recall{Failed: map[string]bool{w.s.Target.key(): true}}
	}
	return Tick{}
}

// Properties of Step over random event histories: it never changes the
// state it is given; a pass's deadlines leave it as one Arm of the wake
// timer, only when earlier than the armed one, and WakeAt says when it is
// armed; a planning pass ends with Publish, a removal ends with Shutdown
// and End once no replica is left, and nothing else publishes or ends;
// Retire and SetIntent name replicas of the new state as it says; a
// refusal is only for a timer the core never armed.
func TestStepProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		order := rapid.SampledFrom([]string{"stop-first", "start-first"}).Draw(rt, "order")
		w := newWorld(t, target("d1", "r0", rapid.IntRange(0, 4).Draw(rt, "replicas"), order))
		w.s.Deps, w.s.Adopted = map[string]messages.DependencyStatus{}, rapid.Bool().Draw(rt, "adopted")
		if rapid.Bool().Draw(rt, "depends") {
			w.cfg.DependsOn = []stackfile.Dependency{{Service: "db", Condition: stackfile.ConditionStarted}}
			w.s.DepsMet = false
		}
		for i := 0; i < 60; i++ {
			w.advance(time.Duration(rapid.IntRange(0, 40).Draw(rt, "wait")) * time.Second)
			e := drawEvent(rt, w, i)
			in, before := w.s, snapshot(w.s)
			out, fx := Step(w.cfg, in, e, w.now)
			if !reflect.DeepEqual(in, before) {
				rt.Fatalf("Step(%T) changed the state it was given", e)
			}
			checkEffects(rt, e, before, out, fx)
			w.s = out
			for _, f := range fx {
				if sp, ok := f.(Spawn); ok {
					w.n++
					id := fmt.Sprintf("%s-%d", sp.Target.Revision, w.n)
					w.s, _ = Step(w.cfg, w.s, Spawned{Replica: Replica{ID: id, Slot: sp.Slot, Revision: sp.Target.Revision,
						Deployment: sp.Target.Deployment, Phase: "creating", SpawnedAt: w.now, Intent: messages.IntentRun}}, w.now)
				}
			}
		}
	})
}

// PERF-3: the actor folds events into its state in place (fold), where
// Step copies the state first. Over random event histories both give the
// same states and effects.
func TestPERF3FoldInPlaceIsStep(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		order := rapid.SampledFrom([]string{"stop-first", "start-first"}).Draw(rt, "order")
		w := newWorld(t, target("d1", "r0", rapid.IntRange(0, 4).Draw(rt, "replicas"), order))
		w.s.Adopted = rapid.Bool().Draw(rt, "adopted")
		if rapid.Bool().Draw(rt, "depends") {
			w.cfg.DependsOn = []stackfile.Dependency{{Service: "db", Condition: stackfile.ConditionStarted}}
			w.s.DepsMet = false
		}
		inPlace := snapshot(w.s)
		both := func(e Event) []step.Effect {
			var fx, fx2 []step.Effect
			w.s, fx = Step(w.cfg, w.s, e, w.now)
			inPlace, fx2 = fold(w.cfg, inPlace, e, w.now)
			if !reflect.DeepEqual(w.s, inPlace) {
				rt.Fatalf("%T: fold gave state %+v, Step %+v", e, inPlace, w.s)
			}
			if !reflect.DeepEqual(fx, fx2) {
				rt.Fatalf("%T: fold gave effects %+v, Step %+v", e, fx2, fx)
			}
			return fx
		}
		for i := 0; i < 60; i++ {
			w.advance(time.Duration(rapid.IntRange(0, 40).Draw(rt, "wait")) * time.Second)
			for _, f := range both(drawEvent(rt, w, i)) {
				if sp, ok := f.(Spawn); ok {
					w.n++
					both(Spawned{Replica: Replica{ID: fmt.Sprintf("%s-%d", sp.Target.Revision, w.n), Slot: sp.Slot, Revision: sp.Target.Revision,
						Deployment: sp.Target.Deployment, Phase: "creating", SpawnedAt: w.now, Intent: messages.IntentRun}})
				}
			}
		}
	})
}

func checkEffects(rt *rapid.T, e Event, before, after State, fx []step.Effect) {
	wakeBefore := before.WakeAt
	isPass := false
	switch e := e.(type) {
	case Tick, Adopted:
		isPass = true
	case Fired:
		isPass = e.Timer == WakeTimer
		if isPass {
			wakeBefore = time.Time{}
		}
	}
	arms := armsOf(fx)
	switch {
	case len(arms) > 1:
		rt.Fatalf("%T armed %d times: %+v", e, len(arms), fx)
	case len(arms) == 1:
		a := arms[0]
		if a.Timer != WakeTimer || a.Keep || !a.At.Equal(after.WakeAt) || !wakeBefore.IsZero() && !a.At.Before(wakeBefore) {
			rt.Fatalf("%T armed %+v; wake was at %s, is at %s", e, a, wakeBefore, after.WakeAt)
		}
	case !after.WakeAt.Equal(wakeBefore):
		rt.Fatalf("%T moved the wake from %s to %s without arming", e, wakeBefore, after.WakeAt)
	}
	ended := false
	for i, f := range fx {
		switch f := f.(type) {
		case wake:
			rt.Fatalf("a wake left Step: %+v", fx)
		case Publish:
			if !isPass {
				rt.Fatalf("%T published", e)
			}
		case step.End:
			if !after.Removed || len(after.Replicas) != 0 || i != len(fx)-1 || i == 0 || fx[i-1] != (Shutdown{}) {
				rt.Fatalf("%T ended: %+v with %d replicas", e, fx, len(after.Replicas))
			}
			ended = true
		case Retire:
			if r, ok := after.Replicas[f.ID]; !ok || !r.Retiring || r.InRotation || r.Slot != f.Slot {
				rt.Fatalf("retire of %s: %+v", f.ID, r)
			}
		case SetIntent:
			if r, ok := after.Replicas[f.ID]; !ok || r.Intent != f.Intent {
				rt.Fatalf("intent of %s: %+v", f.ID, r)
			}
		case Spawn:
			if !isPass || f.Slot < 1 {
				rt.Fatalf("%T spawned slot %d", e, f.Slot)
			}
		case step.Emit:
			if f.Kind == "" || f.Message == "" {
				rt.Fatalf("an event without a kind or message: %+v", f)
			}
		case step.Refuse:
			if fired, ok := e.(Fired); !ok || fired.Timer == WakeTimer {
				rt.Fatalf("%T refused: %s", e, f.Reason)
			}
		}
	}
	if isPass && !after.Removed && (len(fx) == 0 || fx[len(fx)-1] != (Publish{})) {
		rt.Fatalf("a pass that did not end with Publish: %+v", fx)
	}
	if isPass && after.Removed && after.Adopted && len(after.Replicas) == 0 && !ended {
		rt.Fatalf("a removal with no replica left did not end: %+v", fx)
	}
}
