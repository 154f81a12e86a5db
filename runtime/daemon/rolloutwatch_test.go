package daemon

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

func plan(deployment string, changes ...stackfile.Change) []control.StackPlan {
	return []control.StackPlan{{Stack: "web", Deployment: deployment, Changes: changes}}
}

func change(service string, a stackfile.Action) stackfile.Change {
	return stackfile.Change{Service: service, Action: a}
}

func snap(service, deployment string, state messages.ServiceState, msg string) messages.ServiceStatus {
	return messages.ServiceStatus{Stack: "web", Service: service, Deployment: deployment, State: state, Message: msg, Desired: 2}
}

func ev(seq uint64, service, kind, msg string) messages.Event {
	return messages.Event{Seq: seq, Stack: "web", Service: service, Kind: kind, Message: msg}
}

var (
	api = svcKey{"web", "api"}
	t0  = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
)

// SVC-5: the verdicts of apply --wait, rule by rule.
func TestSVC5RolloutWatchVerdicts(t *testing.T) {
	type step struct {
		svc   *messages.ServiceStatus // a snapshot of web/api (nil: the board has none)
		event *messages.Event
		shown bool // the step is streamed as progress
	}
	s := func(st messages.ServiceStatus) *messages.ServiceStatus { return &st }
	e := func(x messages.Event) *messages.Event { return &x }
	cases := []struct {
		name    string
		action  stackfile.Action
		steps   []step
		outcome control.Outcome // "" = not decided yet
		reason  string
	}{
		{"create converges", stackfile.ActionCreate, []step{
			{svc: nil},
			{svc: s(snap("api", "3", messages.ServiceStarting, "0 of 2 replicas serving")), shown: true},
			{svc: s(snap("api", "3", messages.ServiceStarting, "0 of 2 replicas serving"))}, // same again: not shown
			{svc: s(snap("api", "3", messages.ServiceConverged, "")), shown: true},
		}, control.OutcomeConverged, ""},
		{"a snapshot of the old deployment is no verdict", stackfile.ActionUpdate, []step{
			{svc: s(snap("api", "2", messages.ServiceConverged, ""))},
		}, control.OutcomeNone, ""},
		{"deploy.failed fails it, the rollback's converged does not undo it", stackfile.ActionUpdate, []step{
			{svc: s(snap("api", "3", messages.ServiceUpdating, "")), shown: true},
			{event: e(ev(9, "api", messages.KindReplicaFailed, "unhealthy")), shown: true},
			{event: e(ev(10, "api", messages.KindDeployFailed, "revision b: slot 1 did not become healthy")), shown: true},
			{event: e(ev(11, "api", messages.KindRolloutRolledBack, "rolled back to revision a")), shown: true},
			{svc: s(snap("api", "2", messages.ServiceConverged, ""))},
		}, control.OutcomeFailed, "deploy.failed: revision b: slot 1 did not become healthy"},
		{"a failure event before the service took the deployment is an older rollout's", stackfile.ActionUpdate, []step{
			{event: e(ev(10, "api", messages.KindDeployFailed, "old")), shown: true},
			{svc: s(snap("api", "3", messages.ServiceConverged, "")), shown: true},
		}, control.OutcomeConverged, ""},
		{"paused", stackfile.ActionUpdate, []step{
			{svc: s(snap("api", "3", messages.ServicePaused, "slot 2 never became healthy")), shown: true},
		}, control.OutcomeFailed, "paused: slot 2 never became healthy"},
		{"failing", stackfile.ActionCreate, []step{
			{svc: s(snap("api", "3", messages.ServiceFailing, "slot 1: exited with code 1")), shown: true},
		}, control.OutcomeFailed, "failing: slot 1: exited with code 1"},
		{"backoff fails it (SVC-19: a slot is down until its next attempt)", stackfile.ActionCreate, []step{
			{svc: s(snap("api", "3", messages.ServiceBackoff, "slot 1: exited with code 1 (4 failures)")), shown: true},
		}, control.OutcomeFailed, "backoff: slot 1: exited with code 1 (4 failures)"},
		{"a state that is not on the way fails it", stackfile.ActionCreate, []step{
			{svc: s(snap("api", "3", "unknown", "")), shown: true},
		}, control.OutcomeFailed, "unknown"},
		{"waiting is on the way", stackfile.ActionCreate, []step{
			{svc: s(snap("api", "3", messages.ServiceWaiting, "waiting for web/db")), shown: true},
		}, control.OutcomeNone, ""},
		{"superseded by a newer deployment", stackfile.ActionUpdate, []step{
			{svc: s(snap("api", "4", messages.ServiceUpdating, ""))},
		}, control.OutcomeFailed, "now on deployment 4, not 3"},
		{"rolled back by hand after it took the deployment", stackfile.ActionUpdate, []step{
			{svc: s(snap("api", "3", messages.ServiceUpdating, "")), shown: true},
			{svc: s(snap("api", "2", messages.ServiceUpdating, ""))},
		}, control.OutcomeFailed, "now on deployment 2, not 3"},
		{"back on the old deployment, then the event behind it names the reason", stackfile.ActionUpdate, []step{
			{svc: s(snap("api", "3", messages.ServiceUpdating, "")), shown: true},
			{svc: s(snap("api", "2", messages.ServiceConverged, ""))},
			{event: e(ev(10, "api", messages.KindDeployFailed, "revision b: slot 1 did not become healthy")), shown: true},
			{event: e(ev(11, "api", messages.KindRolloutRolledBack, "rolled back to revision a")), shown: true},
		}, control.OutcomeFailed, "deploy.failed: revision b: slot 1 did not become healthy"},
		{"a removed service converges once gone", stackfile.ActionRemove, []step{
			{svc: s(snap("api", "2", messages.ServiceConverged, ""))},
			{svc: nil},
		}, control.OutcomeConverged, "removed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newRolloutWatch(plan("3", change("api", c.action)), nil)
			for i, st := range c.steps {
				var shown bool
				if st.event != nil {
					shown = w.event(*st.event)
				} else if st.svc != nil {
					shown = w.status(api, *st.svc, true, t0)
				} else {
					shown = w.status(api, messages.ServiceStatus{}, false, t0)
				}
				if shown != st.shown {
					t.Errorf("step %d: shown %v, want %v", i, shown, st.shown)
				}
			}
			got, _ := w.verdicts()
			if got[0].Outcome != c.outcome || got[0].Reason != c.reason {
				t.Errorf("verdict %+v, want %q %q", got[0], c.outcome, c.reason)
			}
			if out, done := w.outcome(); done != (c.outcome != control.OutcomeNone) || out != c.outcome {
				t.Errorf("outcome %q done %v", out, done)
			}
		})
	}
}

// SVC-5: one failed service decides the verdict at once; the others are
// listed as converged or still rolling out. Unchanged services and other
// services' events are not watched.
func TestSVC5RolloutWatchOneVerdict(t *testing.T) {
	w := newRolloutWatch(plan("3", change("api", stackfile.ActionUpdate), change("db", stackfile.ActionCreate),
		change("cache", stackfile.ActionCreate), change("old", stackfile.ActionUnchanged)), nil)
	if len(w.keys()) != 3 {
		t.Fatalf("watching %v", w.keys())
	}
	w.status(svcKey{"web", "cache"}, snap("cache", "3", messages.ServiceConverged, ""), true, t0)
	w.status(svcKey{"web", "db"}, snap("db", "3", messages.ServiceStarting, ""), true, t0)
	if _, done := w.outcome(); done {
		t.Fatal("decided before any service failed or all converged")
	}
	if w.event(ev(5, "old", messages.KindDeployFailed, "x")) || w.event(messages.Event{Stack: "web", Kind: messages.KindConfigReloaded}) {
		t.Error("an event of an unwatched service was taken as progress")
	}
	w.status(api, snap("api", "3", messages.ServiceUpdating, ""), true, t0)
	w.event(ev(6, "api", messages.KindRolloutPaused, "rollout of revision b paused"))
	out, done := w.outcome()
	verdicts, failed := w.verdicts()
	if !done || out != control.OutcomeFailed {
		t.Fatalf("outcome %q %v", out, done)
	}
	want := []control.ServiceVerdict{
		{Stack: "web", Service: "api", Outcome: control.OutcomeFailed, Reason: "rollout.paused: rollout of revision b paused", Seq: 6},
		{Stack: "web", Service: "db"},
		{Stack: "web", Service: "cache", Outcome: control.OutcomeConverged},
	}
	for i := range want {
		if verdicts[i] != want[i] {
			t.Errorf("verdict %d: %+v, want %+v", i, verdicts[i], want[i])
		}
	}
	if len(failed) != 1 || failed[0].Service != "api" {
		t.Errorf("failed snapshots %+v", failed)
	}
	if out, done := newRolloutWatch(plan("3", change("old", stackfile.ActionUnchanged)), nil).outcome(); !done || out != control.OutcomeConverged {
		t.Errorf("nothing to roll out: %q %v", out, done)
	}
}

// SVC-5: over random snapshots and events, an outcome once given never
// changes (only a failure its state decided takes a failure event's
// reason), converged is only given after a converged snapshot at the
// apply's deployment, and the outcome is failed exactly when a verdict is.
func TestSVC5RolloutWatchProperties(t *testing.T) {
	states := []messages.ServiceState{messages.ServiceStarting, messages.ServiceConverged, messages.ServiceUpdating,
		messages.ServicePaused, messages.ServiceWaiting, messages.ServiceFailing, "backoff"}
	kinds := []string{messages.KindDeployFailed, messages.KindRolloutPaused, messages.KindRolloutRolledBack,
		messages.KindReplicaFailed, messages.KindReplicaRestarted, messages.KindDeploySucceeded, messages.KindRolloutStarted}
	rapid.Check(t, func(t *rapid.T) {
		services := []string{"api", "db"}
		w := newRolloutWatch(plan("3", change("api", stackfile.ActionUpdate), change("db", stackfile.ActionCreate)),
			func(svcKey) time.Duration { return 5 * time.Second })
		convergedSeen := map[string]bool{}
		now := t0
		given := map[string]control.ServiceVerdict{}
		for i, n := 0, rapid.IntRange(0, 30).Draw(t, "steps"); i < n; i++ {
			now = now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(t, "ms")) * time.Millisecond)
			name := rapid.SampledFrom(services).Draw(t, "service")
			k := svcKey{"web", name}
			if rapid.Bool().Draw(t, "event") {
				w.event(ev(uint64(i), name, rapid.SampledFrom(kinds).Draw(t, "kind"), "m"))
			} else {
				dep := rapid.SampledFrom([]string{"2", "3", "4"}).Draw(t, "deployment")
				st := rapid.SampledFrom(states).Draw(t, "state")
				if dep == "3" && st == messages.ServiceConverged {
					convergedSeen[name] = true
				}
				w.status(k, snap(name, dep, st, ""), rapid.Bool().Draw(t, "ok"), now)
			}
			verdicts, _ := w.verdicts()
			anyFailed := false
			for _, v := range verdicts {
				if prev, ok := given[v.Service]; ok && prev != v && (prev.Outcome != v.Outcome || prev.Seq != 0 || v.Seq == 0) {
					t.Fatalf("verdict of %s changed from %+v to %+v", v.Service, prev, v)
				}
				if v.Outcome != control.OutcomeNone {
					given[v.Service] = v
				}
				if v.Outcome == control.OutcomeConverged && !convergedSeen[v.Service] {
					t.Fatalf("%s converged without a converged snapshot at deployment 3", v.Service)
				}
				anyFailed = anyFailed || v.Outcome == control.OutcomeFailed
			}
			if out, done := w.outcome(); anyFailed != (done && out == control.OutcomeFailed) {
				t.Fatalf("outcome %q %v with failed=%v", out, done, anyFailed)
			}
		}
	})
}

// SVC-5, SVC-13: a created service is converged only once it stayed
// converged through its monitor window; leaving converged restarts the
// window, and failing in it fails the rollout. An update is not held: its
// rollout monitored each new instance already.
func TestSVC5RolloutWatchMonitorWindow(t *testing.T) {
	monitor := func(svcKey) time.Duration { return 5 * time.Second }
	w := newRolloutWatch(plan("3", change("api", stackfile.ActionCreate)), monitor)
	conv := snap("api", "3", messages.ServiceConverged, "")
	w.status(api, conv, true, t0)
	if until, ok := w.holding(api); !ok || !until.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("holding %v %v", until, ok)
	}
	if next, ok := w.nextLook(); !ok || !next.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("next look %v %v", next, ok)
	}
	w.status(api, snap("api", "3", messages.ServiceStarting, ""), true, t0.Add(2*time.Second)) // left converged
	w.status(api, conv, true, t0.Add(3*time.Second))
	w.status(api, conv, true, t0.Add(7*time.Second))
	if _, done := w.outcome(); done {
		t.Fatal("converged before 5s of converged in a row")
	}
	w.status(api, conv, true, t0.Add(8*time.Second))
	if out, done := w.outcome(); !done || out != control.OutcomeConverged {
		t.Fatalf("after the window: %q %v", out, done)
	}
	if _, ok := w.nextLook(); ok {
		t.Error("a decided service still has a window")
	}

	crash := newRolloutWatch(plan("3", change("api", stackfile.ActionCreate)), monitor)
	crash.status(api, conv, true, t0)
	crash.status(api, snap("api", "3", messages.ServiceFailing, "slot 1: exited with code 1"), true, t0.Add(300*time.Millisecond))
	if out, _ := crash.outcome(); out != control.OutcomeFailed {
		t.Fatalf("a create that crashed in its window: %q", out)
	}

	upd := newRolloutWatch(plan("3", change("api", stackfile.ActionUpdate)), monitor)
	upd.status(api, conv, true, t0)
	if out, done := upd.outcome(); !done || out != control.OutcomeConverged {
		t.Fatalf("an update is held: %q %v", out, done)
	}
}
