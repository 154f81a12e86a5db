package replica

import (
	"context"
	"sync"
)

// calls holds the cancels of the replica's driver calls and probes in
// flight, so the actor's stop ends them. At rest it holds nothing
// (PERF-3: a cancel context kept for the actor's life, with the children
// map and done channel its first call left in it, was ~700 bytes a
// replica).
type calls struct {
	mu      sync.Mutex
	stopped bool
	next    uint64
	live    map[uint64]context.CancelFunc // nil when none is in flight
}

// begin returns the context of one call and the func that ends it (call
// it once, when the call is done). After stop, the context begins
// cancelled.
func (c *calls) begin() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		cancel()
		return ctx, cancel
	}
	if c.live == nil {
		c.live = map[uint64]context.CancelFunc{}
	}
	c.next++
	id := c.next
	c.live[id] = cancel
	return ctx, func() {
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.live, id)
		if len(c.live) == 0 {
			c.live = nil
		}
	}
}

// stop cancels every call in flight and every later one.
func (c *calls) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for _, cancel := range c.live {
		cancel()
	}
	c.live = nil
}

// inFlight is how many calls are in flight (tests).
func (c *calls) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}
