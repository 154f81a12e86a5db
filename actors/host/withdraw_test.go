package host

import (
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
	"pgregory.net/rapid"
)

// SVC-30 at the edge (issue 17, fail-closed recovery): a hibernating
// host's instance is withdrawn from the edge (its gate sealed or closed)
// before it is stopped or started again, whatever brings the stop: a dead
// instance, a lost lease, idleness, a drain. The gate is the host's own
// state, so sealing it cannot fail.
func TestSVC30EdgeWithdrawnBeforeTouch(t *testing.T) {
	withdrawnThenStopped := 0 // cases where a served instance was stopped: the property is not vacuous
	rapid.Check(t, func(rt *rapid.T) {
		cfg := testConfig()
		cfg.HasSidecars = rapid.Bool().Draw(rt, "sidecars")
		now := t0
		s, _ := Step(cfg, State{}, Begin{}, now)
		outcomes := []string{OK, OK, OK, Failed, Held, Lost, FirstBoot, Unproven, NotReady, Unchanged}
		open, closing, served := false, false, false
		// Wake it first, so the random events act on a served instance.
		for _, e := range []any{OpDone{Op: OpCleanup, Outcome: OK}, WakeAsked{Reason: messages.WakeRequest}, OpDone{Op: OpDefinition, Outcome: OK}, OpDone{Op: OpAcquire, Outcome: OK},
			OpDone{Op: OpRestore, Outcome: OK}, OpDone{Op: OpStart, Outcome: OK}, OpDone{Op: OpReadyCheck, Outcome: OK}} {
			now = now.Add(100 * time.Millisecond)
			var fx []step.Effect
			s, fx = Step(cfg, s, e, now)
			for _, f := range fx {
				if _, ok := f.(OpenGate); ok {
					open, served = true, true
				}
			}
		}
		if !open {
			rt.Fatalf("the wake did not open the gate: %+v", s)
		}
		for i := range rapid.IntRange(1, 120).Draw(rt, "n") {
			now = now.Add(time.Duration(rapid.IntRange(0, 600).Draw(rt, "dt")) * time.Second)
			var e any
			switch rapid.IntRange(0, 9).Draw(rt, "ev") {
			case 0, 1, 2, 3:
				e = OpDone{Op: s.Op, Outcome: rapid.SampledFrom(outcomes).Draw(rt, "out")}
			case 4:
				e = WakeAsked{Reason: messages.WakeRequest}
			case 5:
				e = IdleCheck{InFlight: rapid.IntRange(0, 1).Draw(rt, "inflight"), LastActivity: now.Add(-time.Hour)}
			case 6:
				e = GateClosed{OK: rapid.Bool().Draw(rt, "closed")}
			case 7:
				e = SidecarsStopped{Proven: rapid.Bool().Draw(rt, "proven")}
			case 8:
				e = rapid.SampledFrom([]any{InstanceExited{Code: 137}, Drain{}, Sweep{}}).Draw(rt, "misc")
			default:
				e = SideDone{Op: SideRenew, Outcome: rapid.SampledFrom([]string{OK, Lost}).Draw(rt, "renew")}
			}
			if g, ok := e.(GateClosed); ok && closing && g.OK {
				open, closing = false, false
			}
			var fx []step.Effect
			s, fx = Step(cfg, s, e, now)
			for _, f := range fx {
				switch f := f.(type) {
				case OpenGate:
					open, served = true, true
				case SealGate:
					open, closing = false, false
				case TryCloseGate:
					closing = true
				case Do:
					if open && (f.Op == OpStopInstance || f.Op == OpStart) {
						rt.Fatalf("step %d: %s while the edge still routes to the instance (event %T)", i, f.Op, e)
					}
					if served && f.Op == OpStopInstance {
						withdrawnThenStopped++
					}
				}
			}
		}
	})
	if withdrawnThenStopped == 0 {
		t.Fatal("no case stopped an instance the edge had served")
	}
}
