package journal

import (
	"errors"
	"testing"
	"time"
)

// SVC-33: a pending retirement is synced, survives a reopen, keeps its
// first Since when marked again, and goes when cleared; bad names are
// refused before anything is written.
func TestSVC33PendingRetirementsSurviveReopen(t *testing.T) {
	j, clk := openTest(t, t.TempDir(), nil)
	p := PendingRetirement{Stack: "web", Service: "api", ID: "a1b2c3d4", Slot: 2, Instance: "web-api-2-a1b2c3d4", Reason: "stop: refused"}
	if err := j.MarkRetirementPending(p); err != nil {
		t.Fatal(err)
	}
	first := clk.Now()
	clk.Advance(time.Minute)
	p.Reason = "delete: refused"
	if err := j.MarkRetirementPending(p); err != nil {
		t.Fatal(err)
	}
	j = reopen(t, j)
	got, err := j.PendingRetirements("web", "api")
	if err != nil || len(got) != 1 || got[0].Slot != 2 || got[0].Instance != p.Instance || got[0].Reason != "delete: refused" || !got[0].Since.Equal(first) {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
	if other, _ := j.PendingRetirements("web", "worker"); len(other) != 0 {
		t.Fatalf("another service's: %+v", other)
	}
	if err := j.ClearRetirementPending("web", "api", p.ID); err != nil {
		t.Fatal(err)
	}
	if err := j.ClearRetirementPending("web", "api", p.ID); err != nil {
		t.Fatalf("clearing twice: %v", err)
	}
	j = reopen(t, j)
	if got, _ := j.PendingRetirements("web", "api"); len(got) != 0 {
		t.Fatalf("cleared, still %+v", got)
	}
	for _, bad := range []PendingRetirement{{Stack: "Web", Service: "api", ID: "a1"}, {Stack: "web", Service: "api", ID: "../x"}} {
		if err := j.MarkRetirementPending(bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}
