package replica

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/engenho/engenho/messages"
)

// PERF-3: the actor keeps only the decision record of the last status it
// sent its service. Over random pairs of statuses, comparing records says
// what comparing every field the service acts on said (start times as
// instants: the same instant in another zone is no change).
func TestPERF3DecisionIsWhatTheServiceActsOn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	status := func(rt *rapid.T, l string) messages.ReplicaStatus {
		pick := func(name string, vals ...string) string { return rapid.SampledFrom(vals).Draw(rt, l+name) }
		started := t0.Add(time.Duration(rapid.IntRange(0, 2).Draw(rt, l+"started")) * time.Nanosecond)
		if rapid.Bool().Draw(rt, l+"zone") {
			started = started.In(time.FixedZone("x", 3600))
		}
		addrs := map[int]string{}
		for i := rapid.IntRange(0, 2).Draw(rt, l+"addrs"); i > 0; i-- {
			addrs[i] = pick("addr", "10.0.0.1", "10.0.0.2")
		}
		return messages.ReplicaStatus{
			Phase: pick("phase", "serving", "down"), Health: pick("health", "healthy", "none"),
			LastError: pick("err", "", "boom"), FailureOutput: pick("out", "", "x"), Refused: pick("refused", "", "r"),
			RetireError: pick("retire", "", "e"), StartedAt: started,
			Restarts: rapid.IntRange(0, 1).Draw(rt, l+"restarts"), Ledger: messages.Ledger{Failures: rapid.IntRange(0, 1).Draw(rt, l+"failures")},
			Addresses: addrs, InRotation: rapid.Bool().Draw(rt, l+"rot"), Replace: rapid.Bool().Draw(rt, l+"replace"),
			Final: rapid.Bool().Draw(rt, l+"final"), HasLedger: rapid.Bool().Draw(rt, l+"hasLedger"), Withdraw: rapid.Bool().Draw(rt, l+"withdraw"),
			Revision: pick("rev", "a", "b"), // not acted on
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		a := status(rt, "a.")
		b := a
		if rapid.Bool().Draw(rt, "differ") {
			b = status(rt, "b.")
		}
		want := a.Phase != b.Phase || a.Health != b.Health || a.InRotation != b.InRotation ||
			a.Restarts != b.Restarts || a.Replace != b.Replace || a.Final != b.Final ||
			a.HasLedger != b.HasLedger || a.Ledger.Failures != b.Ledger.Failures ||
			!a.StartedAt.Equal(b.StartedAt) || len(a.Addresses) != len(b.Addresses) ||
			a.LastError != b.LastError || a.FailureOutput != b.FailureOutput ||
			a.Withdraw != b.Withdraw || a.Refused != b.Refused || a.RetireError != b.RetireError
		if got := changed(&a, &b); got != want {
			rt.Fatalf("changed %v, field by field %v:\n%+v\n%+v", got, want, a, b)
		}
	})
}
