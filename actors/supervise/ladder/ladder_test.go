package ladder

import (
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// SUP-10: the first 3 consecutive failures retry at once; then 1m, 2m, 4m,
// 8m, and 15m for every later one.
func TestSUP10DefaultLadderDelays(t *testing.T) {
	want := []time.Duration{0, 0, 0, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 15 * time.Minute, 15 * time.Minute}
	c := Default()
	for i, w := range want {
		if got := c.Delay(i + 1); got != w {
			t.Errorf("failure %d: delay %s, want %s", i+1, got, w)
		}
	}
}

// SUP-10: the shape is configurable and the cap bounds listed delays too.
func TestSUP10ConfiguredLadder(t *testing.T) {
	c := Config{Immediate: 1, Delays: []time.Duration{10 * time.Second, time.Hour}, Cap: 30 * time.Second, Stable: time.Minute}
	want := []time.Duration{0, 10 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := c.Delay(i + 1); got != w {
			t.Errorf("failure %d: delay %s, want %s", i+1, got, w)
		}
	}
}

// SUP-10, SUP-19: a crash loop driven by a fake clock restarts at exactly
// the ladder's times, through the 15m cap, in milliseconds of real time.
func TestSUP10ExactTimesOnFakeClockThroughCap(t *testing.T) {
	clk := clock.NewFake(t0)
	l := NewLedger(Default(), 1)
	var attempts []time.Duration
	var crash func()
	crash = func() {
		attempts = append(attempts, clk.Since(t0))
		if len(attempts) == 12 {
			return
		}
		d := l.Fail("web/api/1", clk.Now(), "exited 1")
		clk.AfterFunc(d.Delay, crash) // the workload dies right after each start
	}
	crash()
	for len(attempts) < 12 {
		next, ok := clk.NextDue()
		if !ok {
			t.Fatalf("no attempt scheduled after %d", len(attempts))
		}
		clk.Set(next)
	}
	m := time.Minute
	want := []time.Duration{0, 0, 0, 0, 1 * m, 3 * m, 7 * m, 15 * m, 30 * m, 45 * m, 60 * m, 75 * m}
	for i, w := range want {
		if attempts[i] != w {
			t.Errorf("attempt %d at +%s, want +%s", i, attempts[i], w)
		}
	}
}

// SUP-11: waiting does not reset a ledger; only a continuous stable window.
func TestSUP11WaitingDoesNotReset(t *testing.T) {
	l := NewLedger(Default(), 1)
	for i := 0; i < 5; i++ {
		l.Fail("k", t0, "crash")
	}
	later := t0.Add(24 * time.Hour)
	if !l.Ready("k", later) {
		t.Fatal("next attempt should be due after a day")
	}
	d := l.Fail("k", later, "crash")
	if d.Failures != 6 || d.Delay != 4*time.Minute {
		t.Fatalf("after a day of waiting: failures %d delay %s, want 6 and 4m", d.Failures, d.Delay)
	}
}

// SUP-11: a stable stretch interrupted before 5m does not reset; 5m
// continuous does.
func TestSUP11StableWindowResets(t *testing.T) {
	l := NewLedger(Default(), 1)
	l.Fail("k", t0, "crash")
	l.Started("k")
	if l.Observe("k", t0.Add(time.Second), true) {
		t.Fatal("reset after 0s stable")
	}
	if l.Observe("k", t0.Add(4*time.Minute), true) {
		t.Fatal("reset after 3m59s stable")
	}
	l.Observe("k", t0.Add(4*time.Minute+time.Second), false) // blip: unhealthy once
	if l.Observe("k", t0.Add(6*time.Minute), true) {
		t.Fatal("reset although the stretch restarted at 6m")
	}
	if !l.Observe("k", t0.Add(11*time.Minute), true) {
		t.Fatal("no reset after 5m continuously stable")
	}
	if _, ok := l.Get("k"); ok {
		t.Fatal("entry kept after reset")
	}
}

// SUP-12: an attempt whose start succeeded is unconfirmed; found down before
// it was stable, it is charged, so a workload that dies right after every
// successful start climbs the ladder.
func TestSUP12UnconfirmedAttemptIsCharged(t *testing.T) {
	l := NewLedger(Default(), 1)
	now := t0
	var last Decision
	for i := 0; i < 5; i++ {
		last = l.Fail("k", now, "exited")
		now = last.At
		l.Started("k")
		e, _ := l.Get("k")
		if !e.Unconfirmed {
			t.Fatalf("attempt %d not marked unconfirmed", i)
		}
		now = now.Add(2 * time.Second)
		l.Observe("k", now, true) // ran 2s, then found down again
	}
	if last.Failures != 5 || last.Delay != 2*time.Minute {
		t.Fatalf("failures %d delay %s, want 5 and 2m", last.Failures, last.Delay)
	}
}

// SUP-13: a healthy thing accumulates no state; Forget drops a gone instance.
func TestSUP13NoHistoryNoEntry(t *testing.T) {
	l := NewLedger(Default(), 1)
	l.Started("k")
	l.Observe("k", t0, true)
	if l.Len() != 0 {
		t.Fatalf("ledger has %d entries for a key with no failures", l.Len())
	}
	l.Fail("k", t0, "x")
	l.Forget("k")
	if l.Len() != 0 {
		t.Fatal("forgotten key kept")
	}
}

// SUP-17: a new deployment or retry clears a service's backoff.
func TestSUP17ForgetPrefixClearsService(t *testing.T) {
	l := NewLedger(Default(), 1)
	for _, k := range []string{"web/api/1", "web/api/2", "web/db/1"} {
		for i := 0; i < 6; i++ {
			l.Fail(k, t0, "x")
		}
	}
	l.ForgetPrefix("web/api/")
	if got := l.Keys(); len(got) != 1 || got[0] != "web/db/1" {
		t.Fatalf("keys after clearing web/api: %v", got)
	}
	if !l.Ready("web/api/1", t0) {
		t.Fatal("cleared key not ready at once")
	}
}

func TestJitterStaysWithinBounds(t *testing.T) {
	c := Default()
	c.Jitter = 0.2
	l := NewLedger(c, 7)
	for i := 0; i < 3; i++ {
		l.Fail("k", t0, "x")
	}
	for i := 0; i < 50; i++ {
		d := l.Fail("k", t0, "x")
		base := c.Delay(d.Failures)
		lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
		if d.Delay < lo || d.Delay > hi {
			t.Fatalf("failure %d: delay %s outside [%s, %s]", d.Failures, d.Delay, lo, hi)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("default invalid: %v", err)
	}
	bad := []Config{
		{Immediate: -1, Cap: time.Minute, Stable: time.Minute},
		{Cap: 0, Stable: time.Minute},
		{Cap: time.Minute, Stable: 0},
		{Cap: time.Minute, Stable: time.Minute, Jitter: 2},
		{Cap: time.Minute, Stable: time.Minute, Delays: []time.Duration{0}},
	}
	for i, c := range bad {
		if c.Validate() == nil {
			t.Errorf("config %d accepted: %+v", i, c)
		}
	}
}

// SUP-10..SUP-12 as properties over random event sequences: the failure
// count is the number of failures since the last reset, every delay is the
// configured one and never above the cap, and only a full continuous stable
// window drops an entry.
func TestLadderProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := Config{
			Immediate: rapid.IntRange(0, 4).Draw(t, "immediate"),
			Cap:       time.Duration(rapid.IntRange(1, 20).Draw(t, "cap")) * time.Minute,
			Stable:    time.Duration(rapid.IntRange(1, 10).Draw(t, "stable")) * time.Minute,
		}
		for i, n := 0, rapid.IntRange(0, 5).Draw(t, "ndelays"); i < n; i++ {
			c.Delays = append(c.Delays, time.Duration(rapid.IntRange(1, 30).Draw(t, "delay"))*time.Minute)
		}
		l := NewLedger(c, 1)
		now := t0
		failures := 0
		var stableSince time.Time
		for _, op := range rapid.SliceOfN(rapid.IntRange(0, 3), 1, 200).Draw(t, "ops") {
			now = now.Add(time.Duration(rapid.IntRange(0, 600).Draw(t, "wait")) * time.Second)
			switch op {
			case 0:
				d := l.Fail("k", now, "x")
				failures++
				stableSince = time.Time{}
				if d.Failures != failures {
					t.Fatalf("failures %d, model %d", d.Failures, failures)
				}
				if d.Delay != c.Delay(failures) || d.Delay > c.Cap {
					t.Fatalf("delay %s for failure %d, want %s (cap %s)", d.Delay, failures, c.Delay(failures), c.Cap)
				}
			case 1:
				l.Started("k")
				stableSince = time.Time{}
			case 2:
				if failures > 0 && stableSince.IsZero() {
					stableSince = now
				}
				reset := l.Observe("k", now, true)
				wantReset := failures > 0 && now.Sub(stableSince) >= c.Stable
				if reset != wantReset {
					t.Fatalf("reset %v, model %v", reset, wantReset)
				}
				if reset {
					failures = 0
					stableSince = time.Time{}
				}
			case 3:
				l.Observe("k", now, false)
				stableSince = time.Time{}
			}
			if _, ok := l.Get("k"); ok != (failures > 0) {
				t.Fatalf("entry present %v with %d failures", ok, failures)
			}
		}
	})
}
