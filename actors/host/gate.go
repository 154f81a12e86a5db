package host

import (
	"sync/atomic"
	"time"
)

// openBit marks an open gate in Gate.word; the low bits count requests in
// flight.
const openBit = int64(1) << 62

// Gate is a hibernating host's admission word, shared by the edge (which
// enters and leaves it per request) and the host actor (which opens it when
// the host serves and closes it to sleep). Every method is lock-free and
// safe for concurrent use; nothing ever waits on it.
type Gate struct {
	word atomic.Int64 // openBit | in-flight count
	addr atomic.Pointer[string]
	// activity is when the last counted request ended, as the node's
	// clock gave it: with its monotonic reading, so the idle window is
	// measured on the monotonic clock and a wall clock stepped back or
	// forward does not keep the host awake, or put it to sleep early
	// (issue 18, clock.jump-awake: a host stayed awake 10 minutes).
	activity atomic.Pointer[time.Time]
	// until is when this node's lease may no longer be acted on (its
	// ValidUntil, on the node's monotonic clock): past it nothing is
	// admitted, open or not. A node frozen past its lease's TTL (SIGSTOP,
	// a VM paused) fences itself the instant it runs again, before its
	// host actor has even looked at a timer (ACT-14).
	until atomic.Pointer[time.Time]
}

// NewGate returns a closed gate.
func NewGate() *Gate { return &Gate{} }

// Enter admits one request if the gate is open and the lease is valid at
// now, and returns the address to proxy it to. Every successful Enter must
// be paired with one Leave.
func (g *Gate) Enter(now time.Time) (addr string, ok bool) {
	for {
		w := g.word.Load()
		if w&openBit == 0 || g.expired(now) {
			return "", false
		}
		if g.word.CompareAndSwap(w, w+1) {
			return *g.addr.Load(), true
		}
	}
}

// Leave ends a request admitted by Enter. A request that counts as
// activity stamps at as the time the host was last used (ACT-7); a
// platform tick does not.
func (g *Gate) Leave(at time.Time, activity bool) {
	if activity {
		g.stamp(at)
	}
	g.word.Add(-1)
}

// Peek returns the address while the gate is open and the lease valid at
// now, without admitting anything: for requests that must not count
// (X-Engenho-Sidecar).
func (g *Gate) Peek(now time.Time) (addr string, ok bool) {
	if g.word.Load()&openBit == 0 || g.expired(now) {
		return "", false
	}
	return *g.addr.Load(), true
}

// Fence sets when the lease stops being valid: past it the gate admits
// nothing. A zero time lifts the fence (no lease: a test's host).
func (g *Gate) Fence(until time.Time) {
	if until.IsZero() {
		g.until.Store(nil)
		return
	}
	g.until.Store(&until)
}

func (g *Gate) expired(now time.Time) bool {
	u := g.until.Load()
	return u != nil && !now.Before(*u)
}

// Open starts admitting requests to addr. A non-zero activity stamps the
// host as used at that time (a wake caused by a request).
func (g *Gate) Open(addr string, activity time.Time) {
	g.addr.Store(&addr)
	if !activity.IsZero() {
		g.stamp(activity)
	}
	for {
		w := g.word.Load()
		if g.word.CompareAndSwap(w, w|openBit) {
			return
		}
	}
}

// Close closes the gate if, and only if, nothing is in flight; it reports
// whether it did. A request can never slip in once Close returns true.
func (g *Gate) Close() bool {
	return g.word.CompareAndSwap(openBit, 0)
}

// Seal closes the gate whatever is in flight (the host stands down or the
// node shuts down); requests already admitted still Leave.
func (g *Gate) Seal() {
	for {
		w := g.word.Load()
		if g.word.CompareAndSwap(w, w&^openBit) {
			return
		}
	}
}

// IsOpen reports whether the gate admits requests.
func (g *Gate) IsOpen() bool { return g.word.Load()&openBit != 0 }

// InFlight is the number of admitted requests that have not left.
func (g *Gate) InFlight() int { return int(g.word.Load() &^ openBit) }

// LastActivity is when the last counted request ended (or the wake that
// a request caused), zero if never.
func (g *Gate) LastActivity() time.Time {
	if t := g.activity.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// stamp moves the activity time forward, never back.
func (g *Gate) stamp(at time.Time) {
	for {
		cur := g.activity.Load()
		if cur != nil && !at.After(*cur) || g.activity.CompareAndSwap(cur, &at) {
			return
		}
	}
}
