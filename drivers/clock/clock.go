package clock

import "time"

// Clock tells the time and schedules callbacks.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a timer whose channel receives once d has passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a scheduled callback or channel send.
type Timer interface {
	// C is nil for timers made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// New returns the wall clock.
func New() Clock { return Real{} }

func (Real) Now() time.Time                  { return time.Now() }
func (Real) Since(t time.Time) time.Duration { return time.Since(t) }

func (Real) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}

func (Real) NewTimer(d time.Duration) Timer {
	return realTimer{t: time.NewTimer(d)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
