package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a clock that moves only when Advance or Set is called. Timers due
// at or before the new time fire in due order; AfterFunc callbacks run
// synchronously inside Advance, in the caller's goroutine, so a test knows
// they have run when Advance returns.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer
	added  chan struct{}
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, added: make(chan struct{}, 1)}
}

type fakeTimer struct {
	clock *Fake
	due   time.Time
	seq   uint64
	f     func()
	c     chan time.Time
	done  bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.clock.remove(t)
	return true
}

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.schedule(d, fn, nil)
}

func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.schedule(d, nil, make(chan time.Time, 1))
}

func (f *Fake) schedule(d time.Duration, fn func(), c chan time.Time) *fakeTimer {
	f.mu.Lock()
	f.seq++
	t := &fakeTimer{clock: f, due: f.now.Add(d), seq: f.seq, f: fn, c: c}
	f.timers = append(f.timers, t)
	f.mu.Unlock()
	select {
	case f.added <- struct{}{}:
	default:
	}
	if d <= 0 {
		f.Advance(0)
	}
	return t
}

// remove drops t from the pending list; f.mu must be held.
func (f *Fake) remove(t *fakeTimer) {
	for i, p := range f.timers {
		if p == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return
		}
	}
}

// Advance moves the clock forward by d, firing every timer that falls due,
// each at its own due time.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.Set(target)
}

// Set moves the clock to t (never backwards), firing due timers in order.
func (f *Fake) Set(t time.Time) {
	for {
		f.mu.Lock()
		next := f.nextDue(t)
		if next == nil {
			if t.After(f.now) {
				f.now = t
			}
			f.mu.Unlock()
			return
		}
		next.done = true
		f.remove(next)
		if next.due.After(f.now) {
			f.now = next.due
		}
		now := f.now
		f.mu.Unlock()
		if next.f != nil {
			next.f()
		} else {
			next.c <- now
		}
	}
}

// nextDue returns the earliest timer due at or before t; f.mu must be held.
func (f *Fake) nextDue(t time.Time) *fakeTimer {
	sort.Slice(f.timers, func(i, j int) bool {
		if f.timers[i].due.Equal(f.timers[j].due) {
			return f.timers[i].seq < f.timers[j].seq
		}
		return f.timers[i].due.Before(f.timers[j].due)
	})
	if len(f.timers) == 0 || f.timers[0].due.After(t) {
		return nil
	}
	return f.timers[0]
}

// Pending reports how many timers are waiting to fire.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// NextDue returns when the earliest pending timer fires, if any.
func (f *Fake) NextDue() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.nextDue(time.Unix(1<<40, 0))
	if t == nil {
		return time.Time{}, false
	}
	return t.due, true
}

// WaitForTimers blocks until at least n timers are pending or the real-time
// limit passes; it reports whether they were. Tests use it to wait for an
// actor to arm its timer before advancing the clock.
func (f *Fake) WaitForTimers(n int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if f.Pending() >= n {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-f.added:
		case <-time.After(min(left, 5*time.Millisecond)):
		}
	}
}
