package replica

import (
	"context"
	"slices"
	"sync"
	"time"
)

// stopCtx is the context of the replica's driver calls and probes, done
// when the actor stops. It is not a context.WithCancel on purpose: a
// context derived from one registers in a map its parent keeps for life,
// so each replica held a cancel context, a children map and a done
// channel (~700 bytes; PERF-3, 100k replicas) once its first call was
// over. Derived contexts register here through AfterFunc (the context
// package's afterFuncer: no goroutine watches the parent), in a slice
// that keeps its backing array and is empty at rest. A new context per
// call instead cost each probe a few allocations (~7 µs of CPU a probe by
// BenchmarkPERF3IdleCPU).
type stopCtx struct {
	mu      sync.Mutex
	done    chan struct{} // made at the first Done
	stopped bool
	next    uint64
	after   []afterFn
}

type afterFn struct {
	id uint64
	f  func()
}

var _ context.Context = (*stopCtx)(nil)

func (c *stopCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *stopCtx) Value(any) any               { return nil }

func (c *stopCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.stopped {
			close(c.done)
		}
	}
	return c.done
}

func (c *stopCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return context.Canceled
	}
	return nil
}

// AfterFunc runs f in its own goroutine once c is done (as
// context.AfterFunc); stop unregisters f and says whether it did.
func (c *stopCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		go f()
		return func() bool { return false }
	}
	c.next++
	id := c.next
	c.after = append(c.after, afterFn{id, f})
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := len(c.after)
		c.after = slices.DeleteFunc(c.after, func(a afterFn) bool { return a.id == id })
		return len(c.after) < n
	}
}

// stop makes c done: every context derived from it ends.
func (c *stopCtx) stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	if c.done != nil {
		close(c.done)
	}
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for _, a := range after {
		go a.f()
	}
}

// registered is how many derived contexts wait on c (tests).
func (c *stopCtx) registered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.after)
}
