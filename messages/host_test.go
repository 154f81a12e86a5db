package messages

import (
	"testing"
	"time"
)

// ACT-14: a host shown up (awake, waking, stopping) on a lease past its
// validity is fenced; a sleeping one, or one with no lease recorded, is not.
func TestACT14FencedAt(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cases := []struct {
		state HostState
		until time.Time
		at    time.Time
		want  bool
	}{
		{HostAwake, t0, t0.Add(-time.Second), false},
		{HostAwake, t0, t0, true},
		{HostStopping, t0, t0.Add(time.Hour), true},
		{HostWaking, t0, t0.Add(time.Second), true},
		{HostAsleep, t0, t0.Add(time.Hour), false},
		{HostAwake, time.Time{}, t0.Add(time.Hour), false},
	}
	for _, c := range cases {
		if got := (HostStatus{State: c.state, LeaseUntil: c.until}).FencedAt(c.at); got != c.want {
			t.Errorf("%s, lease until %v, at %v: fenced %v, want %v", c.state, c.until, c.at, got, c.want)
		}
	}
}
