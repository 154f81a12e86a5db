package service

import (
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/engenho/engenho/messages/step"
)

// PERF-3: the planner skips grouping the replicas by slot when plain says
// every instance is current and alone in its slot. Over random replicas:
// then cleanup, grouped by slot, would retire nothing and no slot is
// pending a rollout; and fill, which counts held slots itself, spawns in
// the slots the grouping finds free.
func TestPERF3PlainSkipsNothing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 5).Draw(rt, "replicas")
		s := State{Target: target("d1", "a", n, "stop-first"), Replicas: map[string]Replica{}, Failed: map[string]bool{},
			Adopted: true, DepsMet: true}
		for i := rapid.IntRange(0, 8).Draw(rt, "count"); i > 0; i-- {
			r := Replica{ID: fmt.Sprintf("r%d", i), Slot: rapid.IntRange(1, n+2).Draw(rt, "slot"),
				Revision: rapid.SampledFrom([]string{"a", "a", "b"}).Draw(rt, "revision"),
				Phase:    rapid.SampledFrom([]string{"creating", "serving"}).Draw(rt, "phase"),
				Retiring: rapid.IntRange(0, 4).Draw(rt, "retiring") == 0, Leaving: rapid.IntRange(0, 6).Draw(rt, "leaving") == 0}
			r.InRotation = r.Phase == "serving"
			s.Replicas[r.ID] = r
		}
		occ := slots(s)
		if plain(s) {
			for _, sn := range slotNumbers(occ) {
				sl := occ[sn]
				if len(sl.current) > 1 || len(sl.current) == 1 && sl.current[0].serving() && len(sl.old) > 0 {
					rt.Fatalf("plain, but slot %d needs a cleanup: %+v", sn, s.Replicas)
				}
			}
			if p := pendingSlots(s, occ); len(p) > 0 {
				rt.Fatalf("plain, but slots %v are pending a rollout: %+v", p, s.Replicas)
			}
		}
		var want []step.Effect
		if !holdForRecreate(s) {
			for sn := 1; sn <= s.Target.Replicas; sn++ {
				if sl := occ[sn]; sl == nil || !sl.occupied {
					want = append(want, Spawn{Slot: sn, Target: s.Target})
				}
			}
		}
		if _, got := fill(s, t0); !reflect.DeepEqual(got, want) {
			rt.Fatalf("fill %+v, by slot %+v: %+v", got, want, s.Replicas)
		}
	})
}
