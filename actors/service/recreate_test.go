package service

import (
	"fmt"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"pgregory.net/rapid"
)

func recreateTarget(dep, rev string, n int) Target {
	t := target(dep, rev, n, stackfile.OrderStopFirst)
	t.Update.Strategy = stackfile.RolloutRecreate
	return t
}

// goneOne ends one retiring replica actor (the lowest slot's).
func (w *world) goneOne() *world {
	for _, r := range sorted(w.s.Replicas) {
		if r.Retiring {
			delete(w.s.Replicas, r.ID)
			return w
		}
	}
	return w
}

func (w *world) spawned() int {
	n := 0
	for _, f := range w.acts {
		if _, ok := f.(Spawn); ok {
			n++
		}
	}
	return n
}

// SVC-25: recreate retires every old instance in one pass, starts nothing
// while any of them is still there, then starts every slot at once; the
// rollout is one batch and succeeds once all serve through monitor.
func TestSVC25RecreateStopsAllThenStartsAll(t *testing.T) {
	w := newWorld(t, target("d1", "a", 3, stackfile.OrderStopFirst)).plan().serve("a").plan()
	prev := w.s.Target
	w.define(recreateTarget("d2", "b", 3), &prev)
	w.plan().want("1:ax 2:ax 3:ax").wantEvent(messages.KindRolloutStarted)
	if n := len(w.s.Rollout.Batch); n != 3 {
		t.Fatalf("batch of %d slots, want every slot", n)
	}
	w.goneOne().plan().want("2:ax 3:ax") // slot 1 is free, but old instances remain
	if w.spawned() != 0 {
		t.Fatalf("a new instance started beside old ones: %+v", w.acts)
	}
	w.goneOne().plan().want("3:ax")
	w.gone().plan().want("1:b 2:b 3:b")
	if w.spawned() != 3 {
		t.Fatalf("%d spawns in the pass after the last old instance went, want 3 at once", w.spawned())
	}
	w.serve("b").plan().advance(5 * time.Second).plan()
	if !has[SaveProgress](w.acts) {
		t.Fatalf("no progress saved: %+v", w.acts)
	}
	w.want("1:b+ 2:b+ 3:b+").wantEvent(messages.KindDeploySucceeded)
}

// SVC-25: the deploy that switches a service from rolling to recreate is
// a recreate (the strategy of the deployment being rolled out governs):
// the old revision keeps its open connections through one drain, the
// same window for every old instance since they all retire in one pass,
// and no old instance is stopped before it was retired (drained). With
// rolling (the same deploy without the switch) only the first batch
// retires.
func TestSVC25SwitchFromRollingDrainsOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		next     Target
		retiring int
	}{
		{"rolling to recreate", recreateTarget("d2", "b", 3), 3},
		{"rolling to rolling", target("d2", "b", 3, stackfile.OrderStopFirst), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, target("d1", "a", 3, stackfile.OrderStopFirst)).plan().serve("a").plan()
			prev := w.s.Target
			w.define(c.next, &prev).plan()
			retires := 0
			for _, f := range w.acts {
				if r, ok := f.(Retire); ok {
					retires++
					if w.s.Replicas[r.ID].InRotation {
						t.Fatalf("retired %s still in rotation", r.ID)
					}
				}
			}
			if retires != c.retiring || w.spawned() != 0 {
				t.Fatalf("%d retired and %d started in the first pass, want %d and 0", retires, w.spawned(), c.retiring)
			}
			// Old instances the pass did not retire still serve.
			for _, r := range w.s.Replicas {
				if !r.Retiring && !r.InRotation {
					t.Fatalf("old %s left rotation without being retired", r.ID)
				}
			}
		})
	}
}

// SVC-25: a strategy change alone is no new revision: nothing is replaced.
func TestSVC25StrategyChangeAloneReplacesNothing(t *testing.T) {
	w := newWorld(t, target("d1", "a", 3, stackfile.OrderStopFirst)).plan().serve("a").plan()
	w.s.Defined = "a"
	prev := w.s.Target
	w.define(recreateTarget("d2", "a", 3), &prev).plan().want("1:a+ 2:a+ 3:a+")
	if w.s.Rollout != nil || w.spawned() != 0 {
		t.Fatalf("a rollout for a strategy change: %+v", w.acts)
	}
}

// SVC-25, SVC-14: a daemon restarted half way through a recreate (no
// rollout in memory, one old instance left, two slots empty) starts no new
// instance until the old one is gone.
func TestSVC25RecreateResumesWithoutMixing(t *testing.T) {
	w := newWorld(t, recreateTarget("d2", "b", 3))
	w.s.Replicas["a-1"] = Replica{ID: "a-1", Slot: 3, Revision: "a", Deployment: "d1", Phase: "serving", InRotation: true, Intent: messages.IntentRun}
	w.plan().want("3:ax")
	if w.spawned() != 0 {
		t.Fatalf("new instances beside an old one: %+v", w.acts)
	}
	w.gone().plan().want("1:b 2:b 3:b")
}

// SVC-25, SVC-13: a recreate whose new instances do not serve within the
// deadline rolls back (failure_action rollback), again all at once when
// the previous deployment is recreate too.
func TestSVC25RecreateRollback(t *testing.T) {
	first := recreateTarget("d1", "a", 2)
	w := newWorld(t, first).plan().serve("a").plan()
	next := recreateTarget("d2", "b", 2)
	next.Update.FailureAction = "rollback"
	w.define(next, &first).plan().want("1:ax 2:ax")
	w.gone().plan().want("1:b 2:b")
	w.advance(2 * time.Minute).plan().wantEvent(messages.KindRolloutRolledBack).want("1:bx 2:bx")
	if w.spawned() != 0 {
		t.Fatalf("old revision started beside the failed new one: %+v", w.acts)
	}
	w.gone().plan().want("1:a 2:a")
}

// SVC-25 property: under recreate, whatever the order of events, a pass
// that starts a new instance has no instance of another revision left,
// and the service converges to one serving instance per slot.
func TestSVC25RecreateNeverMixesProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(rt, "replicas")
		w := newWorld(t, recreateTarget("d1", "r0", n))
		for step := 0; step < 40; step++ {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0:
				tg := w.s.Target
				tg.Deployment, tg.Revision = fmt.Sprintf("d%d", step+1), fmt.Sprintf("r%d", step+1)
				prev := w.s.Target
				w.set(tg, &prev)
			case 1:
				w.s.Target.Replicas = rapid.IntRange(0, 5).Draw(rt, "scale")
			case 2:
				w.goneOne()
			case 3:
				w.serve(w.s.Target.Revision)
			case 4:
				w.advance(time.Duration(rapid.IntRange(0, 30).Draw(rt, "wait")) * time.Second)
			}
			w.plan()
			if w.spawned() > 0 {
				for _, r := range w.s.Replicas {
					if !r.Leaving && r.Revision != w.s.Target.Revision {
						rt.Fatalf("spawned beside %s of revision %s: %s", r.ID, r.Revision, w.layout())
					}
				}
			}
		}
		for i := 0; i < 30; i++ {
			w.gone().plan().serve(w.s.Target.Revision).plan().advance(15 * time.Second)
		}
		w.plan()
		perSlot := map[int]int{}
		for _, r := range w.s.Replicas {
			if r.Retiring || r.Revision != w.s.Target.Revision || !r.InRotation {
				rt.Fatalf("left over: %+v", r)
			}
			perSlot[r.Slot]++
		}
		for s := 1; s <= w.s.Target.Replicas; s++ {
			if perSlot[s] != 1 {
				rt.Fatalf("slot %d holds %d: %s", s, perSlot[s], w.layout())
			}
		}
	})
}
