package ladder

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/engenho/engenho/messages"
)

// Config is the shape of the ladder (SUP-10) and its stability window
// (SUP-11). The zero value is not useful; start from Default.
type Config struct {
	// Immediate is how many consecutive failures are retried at once.
	Immediate int `json:"immediate"`
	// Delays are the waits after the immediate ones, in order.
	Delays []time.Duration `json:"delays"`
	// Cap is the wait for every failure past Delays, and bounds them all.
	Cap time.Duration `json:"cap"`
	// Jitter spreads each wait by up to ±Jitter of itself (0..1); off by
	// default so tests and schedules are exact.
	Jitter float64 `json:"jitter,omitempty"`
	// Stable is the continuous stable window that resets a ledger.
	Stable time.Duration `json:"stable"`
}

// Default is the spec's ladder: 3 at once, then 1m, 2m, 4m, 8m, then 15m;
// reset after 5m stable.
func Default() Config {
	return Config{
		Immediate: 3,
		Delays:    []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute},
		Cap:       15 * time.Minute,
		Stable:    5 * time.Minute,
	}
}

// Validate reports a config that cannot pace anything.
func (c Config) Validate() error {
	switch {
	case c.Immediate < 0:
		return fmt.Errorf("immediate: must not be negative, got %d", c.Immediate)
	case c.Cap <= 0:
		return fmt.Errorf("cap: must be positive, got %s", c.Cap)
	case c.Stable <= 0:
		return fmt.Errorf("stable: must be positive, got %s", c.Stable)
	case c.Jitter < 0 || c.Jitter > 1:
		return fmt.Errorf("jitter: must be within 0..1, got %g", c.Jitter)
	}
	for i, d := range c.Delays {
		if d <= 0 {
			return fmt.Errorf("delays[%d]: must be positive, got %s", i, d)
		}
	}
	return nil
}

// Delay is the wait before the attempt that follows the n-th consecutive
// failure (n counts from 1), without jitter.
func (c Config) Delay(n int) time.Duration {
	if n <= c.Immediate {
		return 0
	}
	i := n - c.Immediate - 1
	d := c.Cap
	if i < len(c.Delays) {
		d = c.Delays[i]
	}
	return min(d, c.Cap)
}

// Decision is what a charged failure means for the next attempt.
type Decision struct {
	Failures int
	Delay    time.Duration
	At       time.Time
}

// Immediate reports whether the next attempt may run at once.
func (d Decision) Immediate() bool { return d.Delay == 0 }

// Fail charges one failure at now and returns the updated entry and when
// the next attempt may run. Found down again after a successful start is a
// failure too: that is how an unconfirmed attempt is charged (SUP-12).
// rnd is used only when the config has jitter; it may be nil otherwise.
func Fail(c Config, e messages.Ledger, now time.Time, reason string, rnd *rand.Rand) (messages.Ledger, Decision) {
	e.Failures++
	e.LastReason = reason
	e.LastFailure = now
	e.Unconfirmed = false
	e.StableSince = time.Time{}
	d := jitter(c, c.Delay(e.Failures), rnd)
	e.NextAttempt = now.Add(d)
	return e, Decision{Failures: e.Failures, Delay: d, At: e.NextAttempt}
}

func jitter(c Config, d time.Duration, rnd *rand.Rand) time.Duration {
	if c.Jitter == 0 || d == 0 || rnd == nil {
		return d
	}
	spread := float64(d) * c.Jitter
	return time.Duration(float64(d) + spread*(2*rnd.Float64()-1))
}

// Started records that a start call succeeded at now: the attempt is
// unconfirmed until a full stable window passes.
func Started(e messages.Ledger) messages.Ledger {
	e.Unconfirmed = true
	e.StableSince = time.Time{}
	return e
}

// Observe records whether the instance is stable now (running, healthy, in
// rotation). It returns the entry and true when the entry is to be dropped:
// the instance has been continuously stable for the whole window (SUP-11).
// Observing "not stable" ends the stretch; waiting alone never resets.
func Observe(c Config, e messages.Ledger, now time.Time, stable bool) (messages.Ledger, bool) {
	if !stable {
		e.StableSince = time.Time{}
		return e, false
	}
	if e.StableSince.IsZero() {
		e.StableSince = now
	}
	return e, now.Sub(e.StableSince) >= c.Stable
}

// Ready reports whether the next attempt may run at now.
func Ready(e messages.Ledger, now time.Time) bool { return !now.Before(e.NextAttempt) }
