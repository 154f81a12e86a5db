package probe

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// step is one observation in a table test: the outcome observed at t0+at,
// and the status, failure count and unhealthy observations expected after.
type step struct {
	at        time.Duration
	outcome   Outcome
	status    Status
	failures  int
	unhealthy int
}

func runSteps(t *testing.T, cfg Config, steps []step) Tracker {
	t.Helper()
	tr := NewTracker(cfg, t0)
	for i, s := range steps {
		now := t0.Add(s.at)
		before := tr.Status
		var ch Change
		tr, ch = Observe(tr, Result{Outcome: s.outcome, At: now}, now)
		if ch.From != before || ch.To != tr.Status {
			t.Fatalf("step %d: change %+v does not match %s -> %s", i, ch, before, tr.Status)
		}
		if tr.Status != s.status || tr.Failures != s.failures || tr.UnhealthyObservations != s.unhealthy {
			t.Fatalf("step %d (%s at %s): got status=%s failures=%d unhealthy=%d, want %s %d %d",
				i, s.outcome, s.at, tr.Status, tr.Failures, tr.UnhealthyObservations, s.status, s.failures, s.unhealthy)
		}
	}
	return tr
}

const (
	H = Healthy
	U = Unhealthy
	E = Error
)

// SVC-7 SUP-14: the tracker's timing and counting rules, case by case.
func TestTrackerTable(t *testing.T) {
	sec := time.Second
	http := Config{Kind: KindHTTP, Retries: 3}
	graced := Config{Kind: KindHTTP, Retries: 2, StartPeriod: 30 * sec}
	cases := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"SVC-7 no healthcheck stays none", Config{}, []step{
			{0, H, StatusNone, 0, 0}, {sec, U, StatusNone, 0, 0}, {2 * sec, E, StatusNone, 0, 0},
		}},
		{"SVC-7 first success makes healthy", http, []step{
			{0, H, StatusHealthy, 0, 0},
		}},
		{"SVC-7 failures within one interval of the start do not count (Compose probes first then)", http, []step{
			{0, U, StatusStarting, 0, 0}, {5 * sec, U, StatusStarting, 0, 0}, {29 * sec, U, StatusStarting, 0, 0},
			{30 * sec, U, StatusStarting, 1, 0},
		}},
		{"SVC-7 retries consecutive failures make unhealthy, SUP-14 then counts observations", http, []step{
			{30 * sec, U, StatusStarting, 1, 0}, {35 * sec, U, StatusStarting, 2, 0},
			{40 * sec, U, StatusUnhealthy, 3, 1}, {70 * sec, U, StatusUnhealthy, 4, 2},
			{100 * sec, U, StatusUnhealthy, 5, 3},
		}},
		{"SVC-7 a success resets the failure streak", http, []step{
			{0, H, StatusHealthy, 0, 0}, {sec, U, StatusHealthy, 1, 0}, {2 * sec, U, StatusHealthy, 2, 0},
			{3 * sec, H, StatusHealthy, 0, 0}, {4 * sec, U, StatusHealthy, 1, 0},
		}},
		{"SVC-7 healthy to unhealthy and back", http, []step{
			{0, H, StatusHealthy, 0, 0}, {1 * sec, U, StatusHealthy, 1, 0}, {2 * sec, U, StatusHealthy, 2, 0},
			{3 * sec, U, StatusUnhealthy, 3, 1}, {4 * sec, H, StatusHealthy, 0, 0},
		}},
		{"SVC-7 failures during start_period do not count", graced, []step{
			{0, U, StatusStarting, 0, 0}, {10 * sec, U, StatusStarting, 0, 0}, {29 * sec, U, StatusStarting, 0, 0},
			{30 * sec, U, StatusStarting, 1, 0}, {35 * sec, U, StatusUnhealthy, 2, 1},
		}},
		{"SVC-7 a success during start_period ends it", graced, []step{
			{0, U, StatusStarting, 0, 0}, {5 * sec, H, StatusHealthy, 0, 0},
			{6 * sec, U, StatusHealthy, 1, 0}, {7 * sec, U, StatusUnhealthy, 2, 1},
		}},
		{"SUP-14 probe errors change nothing", http, []step{
			{30 * sec, E, StatusStarting, 0, 0}, {31 * sec, U, StatusStarting, 1, 0}, {32 * sec, E, StatusStarting, 1, 0},
			{33 * sec, U, StatusStarting, 2, 0}, {34 * sec, E, StatusStarting, 2, 0}, {35 * sec, U, StatusUnhealthy, 3, 1},
			{36 * sec, E, StatusUnhealthy, 3, 1}, {37 * sec, E, StatusUnhealthy, 3, 1}, {38 * sec, U, StatusUnhealthy, 4, 2},
		}},
		{"SUP-14 errors do not break a healthy status", http, []step{
			{0, H, StatusHealthy, 0, 0}, {sec, E, StatusHealthy, 0, 0}, {2 * sec, E, StatusHealthy, 0, 0},
		}},
		{"SVC-7 retries 1: one counted failure is unhealthy", Config{Kind: KindTCP, Retries: 1, Interval: sec}, []step{
			{sec, U, StatusUnhealthy, 1, 1}, {2 * sec, U, StatusUnhealthy, 2, 2}, {3 * sec, H, StatusHealthy, 0, 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runSteps(t, c.cfg, c.steps) })
	}
}

// SUP-14: the replica restarts for health once UnhealthyObservations
// reaches its threshold (RestartThreshold, 2, by default) while unhealthy.
// Starting never counts, so a replica that never left starting is not
// restarted by this rule however many failures it had in its start
// period, and a probe error counts neither way.
func TestUnhealthyObservationsSUP14(t *testing.T) {
	cfg := Config{Kind: KindHTTP, Retries: 3, StartPeriod: time.Minute}
	tr := NewTracker(cfg, t0)
	for i := range 20 {
		now := t0.Add(time.Duration(i) * time.Second)
		tr, _ = Observe(tr, Result{Outcome: Unhealthy}, now)
		if tr.Status != StatusStarting || tr.UnhealthyObservations != 0 {
			t.Fatalf("after %d failures while starting: %s with %d unhealthy observations, want starting with 0", i+1, tr.Status, tr.UnhealthyObservations)
		}
	}
	tr = runSteps(t, Config{Kind: KindHTTP, Retries: 1, Interval: time.Second}, []step{
		{0, U, StatusStarting, 0, 0}, // within one interval of the start: not counted
		{time.Second, U, StatusUnhealthy, 1, 1},
	})
	if tr.UnhealthyObservations != 1 {
		t.Fatalf("one unhealthy observation counted %d", tr.UnhealthyObservations)
	}
	tr, _ = Observe(tr, Result{Outcome: Error}, t0.Add(2*time.Second))
	if tr.Status != StatusUnhealthy || tr.UnhealthyObservations != 1 {
		t.Fatalf("a probe error moved the count: %s, %d", tr.Status, tr.UnhealthyObservations)
	}
	tr, _ = Observe(tr, Result{Outcome: Unhealthy}, t0.Add(3*time.Second))
	if tr.Status != StatusUnhealthy || tr.UnhealthyObservations != RestartThreshold {
		t.Fatalf("two unhealthy observations: %s, %d, want unhealthy, %d", tr.Status, tr.UnhealthyObservations, RestartThreshold)
	}
}

// SVC-7: probes start at the run's start, then every start_interval while
// starting and every interval after; an error still moves the schedule on.
func TestNextProbe(t *testing.T) {
	cfg := Config{Kind: KindHTTP, Interval: 30 * time.Second, StartInterval: 2 * time.Second, Retries: 2}
	tr := NewTracker(cfg, t0)
	check := func(now time.Time, want time.Time) {
		t.Helper()
		if got := NextProbe(tr, now); !got.Equal(want) {
			t.Fatalf("NextProbe(%s) = %s, want %s", now.Sub(t0), got.Sub(t0), want.Sub(t0))
		}
	}
	check(t0, t0)
	check(t0.Add(time.Second), t0.Add(time.Second)) // overdue: now, never the past
	tr, _ = Observe(tr, Result{Outcome: Unhealthy}, t0.Add(time.Second))
	check(t0.Add(time.Second), t0.Add(3*time.Second)) // starting: start_interval
	tr, _ = Observe(tr, Result{Outcome: Error}, t0.Add(3*time.Second))
	check(t0.Add(3*time.Second), t0.Add(5*time.Second))
	tr, _ = Observe(tr, Result{Outcome: Healthy}, t0.Add(5*time.Second))
	check(t0.Add(5*time.Second), t0.Add(35*time.Second)) // healthy: interval
	tr, _ = Observe(tr, Result{Outcome: Unhealthy}, t0.Add(35*time.Second))
	tr, _ = Observe(tr, Result{Outcome: Unhealthy}, t0.Add(65*time.Second))
	if tr.Status != StatusUnhealthy {
		t.Fatalf("status %s, want unhealthy", tr.Status)
	}
	check(t0.Add(65*time.Second), t0.Add(95*time.Second)) // unhealthy: interval

	// SVC-7, SVC-13: while starting, never slower than interval.
	fast := NewTracker(Config{Kind: KindHTTP, Interval: time.Second, StartInterval: 5 * time.Second, Retries: 2}, t0)
	fast, _ = Observe(fast, Result{Outcome: Unhealthy}, t0)
	if got := NextProbe(fast, t0); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("interval 1s, start_interval 5s: next probe at %s, want 1s", got.Sub(t0))
	}

	none := NewTracker(Config{Kind: KindNone}, t0)
	if got := NextProbe(none, t0); !got.IsZero() {
		t.Fatalf("no healthcheck: NextProbe = %s, want zero", got)
	}
}

// refModel recomputes the SVC-7 rules from the whole history, independently
// of Tracker's incremental fields.
type refModel struct {
	succeeded bool // a success has been seen: the start period is over
	streak    int  // counted failures since the last success
}

// SVC-7 SUP-14: properties over random result sequences.
func TestTrackerProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := Config{
			Kind:          KindHTTP,
			Retries:       rapid.IntRange(1, 5).Draw(rt, "retries"),
			StartPeriod:   time.Duration(rapid.IntRange(0, 60).Draw(rt, "start_period")) * time.Second,
			Interval:      time.Duration(rapid.IntRange(1, 60).Draw(rt, "interval")) * time.Second,
			StartInterval: time.Duration(rapid.IntRange(1, 10).Draw(rt, "start_interval")) * time.Second,
		}
		tr := NewTracker(cfg, t0)
		var ref refModel
		now := t0
		leftStarting := false
		n := rapid.IntRange(1, 60).Draw(rt, "n")
		for i := range n {
			now = now.Add(time.Duration(rapid.IntRange(0, 20).Draw(rt, "dt")) * time.Second)
			outcome := rapid.SampledFrom([]Outcome{Healthy, Unhealthy, Error}).Draw(rt, "outcome")
			before := tr
			var ch Change
			tr, ch = Observe(tr, Result{Outcome: outcome}, now)

			inGrace := !ref.succeeded && now.Before(t0.Add(max(cfg.StartPeriod, cfg.Interval)))
			switch {
			case outcome == Healthy:
				ref.succeeded, ref.streak = true, 0
			case outcome == Unhealthy && !inGrace:
				ref.streak++
			}

			if ch.From != before.Status || ch.To != tr.Status {
				rt.Fatalf("step %d: change %+v, status %s -> %s", i, ch, before.Status, tr.Status)
			}
			if outcome == Error {
				// SUP-14: a probe that could not run changes nothing.
				if tr.Status != before.Status || tr.Failures != before.Failures ||
					tr.UnhealthyObservations != before.UnhealthyObservations ||
					tr.StartPeriodOver != before.StartPeriodOver {
					rt.Fatalf("step %d: error result changed health: %+v -> %+v", i, before, tr)
				}
			}
			if tr.Failures != ref.streak {
				rt.Fatalf("step %d: failures %d, reference %d", i, tr.Failures, ref.streak)
			}
			// Never unhealthy without retries consecutive counted failures.
			if tr.Status == StatusUnhealthy && ref.streak < cfg.Retries {
				rt.Fatalf("step %d: unhealthy with %d counted failures, retries %d", i, ref.streak, cfg.Retries)
			}
			if ref.streak >= cfg.Retries && tr.Status != StatusUnhealthy {
				rt.Fatalf("step %d: %d counted failures but status %s", i, ref.streak, tr.Status)
			}
			if outcome == Healthy && tr.Status != StatusHealthy {
				rt.Fatalf("step %d: success left status %s", i, tr.Status)
			}
			if outcome == Unhealthy && inGrace && tr.Status != before.Status {
				rt.Fatalf("step %d: failure inside start_period (or the first interval) changed status %s -> %s", i, before.Status, tr.Status)
			}
			if tr.Status != StatusStarting {
				leftStarting = true
			} else if leftStarting {
				rt.Fatalf("step %d: status went back to starting", i)
			}
			// SUP-14: starting never counts; only unhealthy observations do.
			if tr.UnhealthyObservations > 0 && tr.Status != StatusUnhealthy {
				rt.Fatalf("step %d: %d unhealthy observations while %s", i, tr.UnhealthyObservations, tr.Status)
			}
			if want := max(0, ref.streak-cfg.Retries+1); tr.UnhealthyObservations != want {
				rt.Fatalf("step %d: unhealthy observations %d, want %d", i, tr.UnhealthyObservations, want)
			}
			next := NextProbe(tr, now)
			cadence := cfg.Interval
			if tr.Status == StatusStarting {
				cadence = min(cfg.StartInterval, cfg.Interval)
			}
			if !next.Equal(now.Add(cadence)) {
				rt.Fatalf("step %d: next probe %s after the observation, want %s", i, next.Sub(now), cadence)
			}
		}
	})
}
