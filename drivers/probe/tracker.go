package probe

import "time"

// Status is an instance's health status (spec SVC-7).
type Status string

const (
	StatusNone      Status = "none"      // no healthcheck
	StatusStarting  Status = "starting"  // no success yet, not (yet) unhealthy
	StatusHealthy   Status = "healthy"   // the last counted result was a success
	StatusUnhealthy Status = "unhealthy" // Retries consecutive counted failures
)

// RestartThreshold is the SUP-14 rule for whoever decides restarts: this
// many consecutive unhealthy observations before a restart.
const RestartThreshold = 2

// Tracker is the health state of one instance run. It is a value: Observe
// returns a new one and never touches the old. Start a fresh Tracker with
// NewTracker whenever the instance (re)starts.
type Tracker struct {
	// Config is the healthcheck, defaults applied.
	Config Config
	Status Status
	// StartedAt is when the instance's current run began; the start period
	// counts from here and the first probe is due here.
	StartedAt time.Time
	// StartPeriodOver is set by the first success: after it, failures count
	// even inside the start period.
	StartPeriodOver bool
	// Failures counts consecutive counted failures (reset by a success).
	Failures int
	// UnhealthyObservations counts consecutive counted results observed
	// while the status is unhealthy, since the last healthy one. Results
	// while starting never count, probe errors never count (SUP-14).
	UnhealthyObservations int
	// Errors counts consecutive probes that could not run.
	Errors int
	// Last is the last result of any outcome; LastAt when it was observed
	// (zero before the first).
	Last   Result
	LastAt time.Time
	// HealthySince is when the status last became healthy (zero if never).
	HealthySince time.Time
}

// Change reports a status transition made by one Observe.
type Change struct {
	From, To Status
}

// NewTracker starts tracking a run that began at startedAt. With no
// healthcheck the status is none and stays none; otherwise it is starting.
func NewTracker(cfg Config, startedAt time.Time) Tracker {
	cfg = cfg.WithDefaults()
	t := Tracker{Config: cfg, Status: StatusStarting, StartedAt: startedAt}
	if !cfg.Enabled() {
		t.Status = StatusNone
	}
	return t
}

// InStartPeriod reports whether failures observed at now do not count:
// before the first success, until start_period or one interval has passed
// since the start, whichever is later. Compose's engine runs the first
// probe one interval after the start; engenho probes at once, so that a
// fast replica serves in milliseconds, and counts no failure Compose would
// not have seen: a replica that takes longer than start_interval to listen
// is not unhealthy for it (SVC-7).
func InStartPeriod(t Tracker, now time.Time) bool {
	grace := max(t.Config.StartPeriod, t.Config.Interval)
	return !t.StartPeriodOver && now.Before(t.StartedAt.Add(grace))
}

// Observe folds result r, observed at now, into t (spec SVC-7, SUP-14):
//   - Error (could not run) changes no health field; it is recorded as Last
//     so status can show it, and schedules the next probe.
//   - Healthy makes the status healthy, ends the start period and resets
//     the failure and unhealthy counts.
//   - Unhealthy inside the start period does not count. Outside it, it adds
//     a failure; Retries consecutive failures make the status unhealthy.
//     Every counted result observed while unhealthy adds one to
//     UnhealthyObservations.
func Observe(t Tracker, r Result, now time.Time) (Tracker, Change) {
	from := t.Status
	if t.Status == StatusNone {
		return t, Change{From: from, To: from}
	}
	t.Last, t.LastAt = r, now
	switch r.Outcome {
	case Healthy:
		t.Errors = 0
		t.Failures = 0
		t.UnhealthyObservations = 0
		t.StartPeriodOver = true
		if t.Status != StatusHealthy {
			t.HealthySince = now
		}
		t.Status = StatusHealthy
	case Unhealthy:
		t.Errors = 0
		if InStartPeriod(t, now) {
			break
		}
		t.Failures++
		if t.Failures >= t.Config.Retries {
			t.Status = StatusUnhealthy
		}
		if t.Status == StatusUnhealthy {
			t.UnhealthyObservations++
		}
	default:
		t.Errors++
	}
	return t, Change{From: from, To: t.Status}
}

// NextProbe returns when the next probe should start, never before now:
// the first is due at StartedAt, later ones StartInterval after the last
// observation while starting (Interval when that is shorter) and Interval
// after it otherwise. With no healthcheck it returns the zero time (never).
func NextProbe(t Tracker, now time.Time) time.Time {
	if t.Status == StatusNone {
		return time.Time{}
	}
	next := t.StartedAt
	if !t.LastAt.IsZero() {
		cadence := t.Config.Interval
		if t.Status == StatusStarting {
			// Never slower than interval: with `interval: 1s` a starting
			// instance that fails is found unhealthy after about retries
			// seconds, not retries × start_interval (SVC-13 fails it fast).
			cadence = min(t.Config.StartInterval, t.Config.Interval)
		}
		next = t.LastAt.Add(cadence)
	}
	if next.Before(now) {
		return now
	}
	return next
}
