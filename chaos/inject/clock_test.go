package inject

import (
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
)

// Issue 18 (clock): a jump moves the wall time only. Two readings around
// a jump differ by the real time between them when compared (monotonic),
// and by the jump plus that on the wall (what a node writes down); a time
// without a monotonic reading just moves.
func TestShiftWallKeepsMonotonic(t *testing.T) {
	j := NewJumpClock(clock.New())
	before := j.Now()
	j.Jump(time.Hour)
	after := j.Now()
	if d := after.Sub(before); d < 0 || d > time.Second {
		t.Fatalf("compared across a +1h jump: %s, want the real time between (monotonic)", d)
	}
	if d := after.Round(0).Sub(before.Round(0)); d < time.Hour || d > time.Hour+time.Second {
		t.Fatalf("wall across a +1h jump: %s", d)
	}
	if since := j.Since(before); since < 0 || since > time.Second {
		t.Fatalf("Since across the jump: %s", since)
	}
	j.Jump(-3 * time.Hour)
	back := j.Now()
	if back.Before(after) {
		t.Fatal("a wall jump back made the monotonic time go back")
	}
	if w := back.Round(0).Sub(after.Round(0)); w > -3*time.Hour+time.Second || w < -3*time.Hour-time.Second {
		t.Fatalf("wall after a -3h jump: %s from the +1h reading", w)
	}
	plain := time.Unix(1_700_000_000, 0)
	if got := shiftWall(plain, time.Minute); !got.Equal(plain.Add(time.Minute)) {
		t.Fatalf("a time without a monotonic reading: %v", got)
	}
	j.Reset()
	if j.Offset() != 0 {
		t.Fatal("Reset left an offset")
	}
}
