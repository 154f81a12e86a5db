package messages

import (
	"testing"
	"time"
)

// ACT-17: the loss window is the time since the store was last known to
// hold the host's state, from the wake when never, and only for an awake
// or stopping host.
func TestACT17LossWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Minute)
	cases := []struct {
		name   string
		st     HostStatus
		window time.Duration
	}{
		{"awake, synced 3m ago", HostStatus{State: HostAwake, Since: t0, Replicated: Replicated{Synced: now.Add(-3 * time.Minute)}}, 3 * time.Minute},
		{"awake, never synced", HostStatus{State: HostAwake, Since: t0}, 10 * time.Minute},
		{"stopping, synced 1m ago", HostStatus{State: HostStopping, Since: t0, Replicated: Replicated{Synced: now.Add(-time.Minute)}}, time.Minute},
		{"asleep", HostStatus{State: HostAsleep, Since: t0, Replicated: Replicated{Synced: t0}}, 0},
		{"waking", HostStatus{State: HostWaking, Since: t0}, 0},
		{"clock behind the sync", HostStatus{State: HostAwake, Since: t0, Replicated: Replicated{Synced: now.Add(time.Second)}}, 0},
	}
	for _, c := range cases {
		if got := c.st.LossWindow(now); got != c.window {
			t.Errorf("%s: loss window %s, want %s", c.name, got, c.window)
		}
	}
	r := Replicated{LastShipped: t0, LastShippedBytes: 7, Synced: now}
	if got := r.Reset(); got.Synced != (time.Time{}) || got.LastShipped != t0 || got.LastShippedBytes != 7 {
		t.Errorf("Reset: %+v", got)
	}
}
