package service

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"pgregory.net/rapid"
)

// oneSlot is a service of one replica in the given condition.
func oneSlot(r Replica) State {
	r.ID, r.Slot, r.Revision, r.Intent = "a-1", 1, "a", messages.IntentRun
	return State{Target: target("d1", "a", 1, "stop-first"), Replicas: map[string]Replica{r.ID: r},
		Failed: map[string]bool{}, Adopted: true, DepsMet: true}
}

// SVC-19, SUP-10..SUP-12, SUP-16: a service whose replica fails, backs off
// or crash-loops is never converged; its message names the slot and the
// reason (never empty), and a slot that backs off says when it starts again.
func TestSVC19SummaryTable(t *testing.T) {
	next := t0.Add(time.Minute)
	cases := []struct {
		name    string
		r       Replica
		state   messages.ServiceState
		message string // the exact message
		reason  string
		next    time.Time
		recheck time.Time
		steady  int
	}{
		{name: "serving, no history",
			r:     Replica{Phase: "serving", InRotation: true, Health: "none", ServingSince: t0.Add(-time.Hour)},
			state: messages.ServiceConverged, steady: 1},
		{name: "SUP-10 down, the ladder waits: backoff with the next attempt",
			r:     Replica{Phase: "down", Failures: 4, LastError: "exited with code 1", NextAttempt: next},
			state: messages.ServiceBackoff, message: "slot 1: exited with code 1 (4 failures)",
			reason: "exited with code 1", next: next},
		{name: "down, retried at once",
			r:     Replica{Phase: "down", Failures: 1, LastError: "killed by signal killed", NextAttempt: t0},
			state: messages.ServiceFailing, message: "slot 1: killed by signal killed (1 failure); restarting",
			reason: "killed by signal killed"},
		{name: "starting again after a failure",
			r:     Replica{Phase: "starting", Failures: 2, LastError: "exited with code 1", NextAttempt: t0.Add(-time.Second)},
			state: messages.ServiceFailing, message: "slot 1: exited with code 1 (2 failures); restarting",
			reason: "exited with code 1"},
		{name: "issue 13: serving in a crash loop (failures >= immediate) is failing, not converged",
			r: Replica{Phase: "serving", InRotation: true, Health: "none", Failures: 4, LastError: "exited with code 1",
				ServingSince: t0.Add(-time.Minute)},
			state: messages.ServiceFailing, message: "slot 1: exited with code 1 (4 failures); up again, not yet stable",
			reason: "exited with code 1"},
		{name: "serving again after one failure, within monitor: settling",
			r: Replica{Phase: "serving", InRotation: true, Health: "none", Failures: 1, LastError: "exited with code 137",
				ServingSince: t0.Add(-time.Second)},
			state: messages.ServiceStarting, message: "slot 1: exited with code 137 (1 failure); serving again, settling",
			recheck: t0.Add(4 * time.Second), steady: 1},
		{name: "serving again after one failure, past monitor",
			r: Replica{Phase: "serving", InRotation: true, Health: "healthy", Failures: 1, LastError: "exited with code 137",
				ServingSince: t0.Add(-6 * time.Second)},
			state: messages.ServiceConverged, steady: 1},
		{name: "probing again after a failure",
			r:     Replica{Phase: "probing", Health: "starting", Failures: 1, LastError: "exited with code 1"},
			state: messages.ServiceStarting, message: "0 of 1 replicas serving"},
		{name: "SUP-14 unhealthy: the probe output",
			r:     Replica{Phase: "unhealthy", Health: "unhealthy", Probe: "HTTP 500"},
			state: messages.ServiceFailing, message: "slot 1: unhealthy: HTTP 500", reason: "unhealthy: HTTP 500"},
		{name: "SUP-14 down after a health restart: backoff, the health of the last run does not count",
			r: Replica{Phase: "down", Health: "unhealthy", Probe: "HTTP 503", Failures: 4, LastError: "unhealthy: HTTP 503",
				NextAttempt: next},
			state: messages.ServiceBackoff, message: "slot 1: unhealthy: HTTP 503 (4 failures)", reason: "unhealthy: HTTP 503", next: next},
		{name: "SUP-16 restart limit reached",
			r:     Replica{Phase: "failed", Failures: 5, LastError: "restart limit reached: exited with code 2"},
			state: messages.ServiceFailing, message: "slot 1: restart limit reached: exited with code 2",
			reason: "restart limit reached: exited with code 2"},
		{name: "a reason never recorded is said so, never empty",
			r:     Replica{Phase: "down", Failures: 4, NextAttempt: next},
			state: messages.ServiceBackoff, message: "slot 1: no reason recorded (4 failures)", reason: "no reason recorded", next: next},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Summarize(oneSlot(c.r), "", t0)
			if got.State != c.state || got.Message != c.message || got.Reason != c.reason ||
				!got.NextAttempt.Equal(c.next) || !got.Recheck.Equal(c.recheck) || got.Steady != c.steady {
				t.Fatalf("got  %+v\nwant state %s message %q reason %q next %s recheck %s steady %d",
					got, c.state, c.message, c.reason, c.next, c.recheck, c.steady)
			}
		})
	}
}

// SVC-19: the worst slot is named, and how many more fail; a stack of
// such a service is not converged either (stack actor: all services).
func TestSVC19SummaryNamesTheWorstSlot(t *testing.T) {
	s := oneSlot(Replica{Phase: "down", Failures: 4, LastError: "exited with code 1", NextAttempt: t0.Add(time.Minute)})
	s.Target.Replicas = 3
	s.Replicas["a-2"] = Replica{ID: "a-2", Slot: 2, Revision: "a", Phase: "failed", LastError: "restart limit reached: exited with code 3"}
	s.Replicas["a-3"] = Replica{ID: "a-3", Slot: 3, Revision: "a", Phase: "serving", InRotation: true}
	got := Summarize(s, "", t0)
	want := "slot 2: restart limit reached: exited with code 3 (and 1 more slot(s) failing)"
	if got.State != messages.ServiceFailing || got.Message != want || !got.NextAttempt.IsZero() {
		t.Fatalf("summary %+v", got)
	}
	if got.Running != 1 || got.Healthy != 1 {
		t.Fatalf("counts %+v", got)
	}
}

// SVC-19: a rollout that is stuck on a failing new instance says why in
// its updating message.
func TestSVC19UpdatingSaysWhy(t *testing.T) {
	w := newWorld(t, target("d1", "a", 1, "start-first")).plan().serve("a").plan()
	prev := w.s.Target
	w.define(target("d2", "b", 1, "start-first"), &prev)
	w.plan()
	for id, r := range w.s.Replicas {
		if r.Revision == "b" {
			r.Phase, r.Failures, r.LastError, r.NextAttempt = "down", 4, "exited with code 1", w.now.Add(time.Minute)
			w.s.Replicas[id] = r
		}
	}
	got := Summarize(w.s, "", w.now)
	if got.State != messages.ServiceUpdating || !strings.HasSuffix(got.Message, "; slot 1: exited with code 1 (4 failures)") {
		t.Fatalf("summary %+v", got)
	}
}

// Properties of the summary over random replicas (SVC-19): converged never
// while a slot fails, backs off, is unhealthy or crash-loops; a failing or
// backing-off service always has a reason and a slot in its message; a
// next attempt only while backing off; counts are consistent.
func TestSVC19SummaryProperties(t *testing.T) {
	phases := []string{"creating", "starting", "probing", "serving", "unhealthy", "down", "failed", "stopping"}
	healths := []string{"none", "starting", "healthy", "unhealthy"}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(rt, "replicas")
		s := State{Target: target("d1", "a", n, "stop-first"), Replicas: map[string]Replica{}, Failed: map[string]bool{},
			Adopted: true, DepsMet: true}
		s.Target.Immediate = rapid.IntRange(0, 3).Draw(rt, "immediate")
		bad := false
		for slot := 1; slot <= n; slot++ {
			r := Replica{ID: string(rune('a'+slot)) + "-x", Slot: slot, Revision: "a",
				Phase:        rapid.SampledFrom(phases).Draw(rt, "phase"),
				Health:       rapid.SampledFrom(healths).Draw(rt, "health"),
				Failures:     rapid.IntRange(0, 6).Draw(rt, "failures"),
				LastError:    rapid.SampledFrom([]string{"", "exited with code 1"}).Draw(rt, "error"),
				Probe:        rapid.SampledFrom([]string{"", "HTTP 500"}).Draw(rt, "probe"),
				NextAttempt:  t0.Add(time.Duration(rapid.IntRange(-60, 60).Draw(rt, "next")) * time.Second),
				ServingSince: t0.Add(-time.Duration(rapid.IntRange(0, 20).Draw(rt, "since")) * time.Second),
			}
			r.InRotation = r.Phase == "serving" && r.Health != "unhealthy"
			if r.Phase == "failed" || (r.Health == "unhealthy" && running(r)) || (r.Failures > 0 && !running(r)) ||
				(running(r) && crashLooping(r, s.Target)) {
				bad = true
			}
			s.Replicas[r.ID] = r
		}
		got := Summarize(s, "", t0)
		if bad && got.State == messages.ServiceConverged {
			rt.Fatalf("converged with a failing slot: %+v", s.Replicas)
		}
		if got.State == messages.ServiceFailing || got.State == messages.ServiceBackoff {
			if got.Reason == "" || !strings.HasPrefix(got.Message, "slot ") || strings.HasSuffix(got.Message, ": ") {
				rt.Fatalf("state %s without a reason: %+v", got.State, got)
			}
		}
		if (got.State == messages.ServiceBackoff) != !got.NextAttempt.IsZero() {
			rt.Fatalf("state %s with next attempt %s", got.State, got.NextAttempt)
		}
		if got.State == messages.ServiceBackoff && !got.NextAttempt.After(t0) {
			rt.Fatalf("backoff with a next attempt due already: %+v", got)
		}
		if got.Steady > got.Healthy || got.Healthy > got.Running || got.Running > n {
			rt.Fatalf("counts %+v", got)
		}
	})
}

// PERF-3: Summarize takes the replicas in map order, where it sorted them
// all at every pass. Over random replicas, several to a slot, it says what
// the sorted walk says: the worst slot, lowest first among equals, and how
// many more fail.
func TestPERF3SummarizeIsOrderFree(t *testing.T) {
	phases := []string{"creating", "starting", "serving", "unhealthy", "down", "failed"}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(rt, "replicas")
		s := State{Target: target("d1", "a", n, "stop-first"), Replicas: map[string]Replica{}, Failed: map[string]bool{},
			Adopted: true, DepsMet: true}
		s.Target.Immediate = rapid.IntRange(0, 3).Draw(rt, "immediate")
		for i := rapid.IntRange(1, 12).Draw(rt, "count"); i > 0; i-- {
			r := Replica{ID: fmt.Sprintf("%c-%d", 'a'+rapid.IntRange(0, 5).Draw(rt, "id"), i), Slot: rapid.IntRange(1, n+1).Draw(rt, "slot"),
				Revision:     "a",
				Phase:        rapid.SampledFrom(phases).Draw(rt, "phase"),
				Health:       rapid.SampledFrom([]string{"none", "healthy", "unhealthy"}).Draw(rt, "health"),
				Failures:     rapid.IntRange(0, 4).Draw(rt, "failures"),
				LastError:    rapid.SampledFrom([]string{"", "exited with code 1", "killed"}).Draw(rt, "error"),
				NextAttempt:  t0.Add(time.Duration(rapid.IntRange(-60, 60).Draw(rt, "next")) * time.Second),
				ServingSince: t0.Add(-time.Duration(rapid.IntRange(0, 20).Draw(rt, "since")) * time.Second),
				Retiring:     rapid.IntRange(0, 5).Draw(rt, "retiring") == 0,
			}
			r.InRotation = r.Phase == "serving" && r.Health != "unhealthy"
			s.Replicas[r.ID] = r
		}
		if got, want := Summarize(s, "", t0), summarizeSorted(s, t0); got != want {
			rt.Fatalf("Summarize %+v, the sorted walk %+v", got, want)
		}
	})
}

// summarizeSorted is Summarize as it was: every replica sorted by slot and
// ID, the first of the worst condition kept.
func summarizeSorted(s State, now time.Time) Summary {
	var sum Summary
	current, extra := 0, 0
	var w worst
	for _, r := range sorted(s.Replicas) {
		if r.Retiring || r.Leaving || r.Slot > s.Target.Replicas {
			extra++
			continue
		}
		v := conditionOf(r, s.Target, now)
		if running(r) {
			sum.Running++
		}
		if r.InRotation {
			sum.Healthy++
			if v.cond != slotFailing {
				sum.Steady++
			}
			if r.Revision == s.Target.Revision && v.cond == slotFine {
				current++
			}
		}
		if v.cond == slotSettling {
			sum.Recheck = earliest(sum.Recheck, r.ServingSince.Add(s.Target.Update.Monitor))
		}
		if v.cond >= slotBackoff && w.cond >= slotBackoff {
			w.others++
		}
		if v.cond > w.cond {
			w.slotView, w.r, w.next = v, r, time.Time{}
			if v.cond == slotBackoff {
				w.next = r.NextAttempt
			}
		}
	}
	if w.cond >= slotBackoff && !s.Stopped {
		sum.Reason, sum.NextAttempt = w.reason, w.next
	}
	sum.State, sum.Message = stateOf(s, w, current, extra, "")
	return sum
}
