package supervise

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/engenho/engenho/drivers/clock"
)

// AbandonGrace is how long Bounded still waits, once the context of a call
// has ended, for the call to answer on its own.
const AbandonGrace = time.Second

// Bounded runs call in a goroutine of its own and returns its result, but
// waits no longer than AbandonGrace past the end of ctx (SUP-4, SVC-11).
// Drivers honour their context by contract, and then return within the
// grace; one that does not (a call stuck in the kernel, a server that
// never answers and a client that ignores cancellation) cannot hold an
// actor's step past its bound. When Bounded gives up it reports false:
// the call's goroutine is left to finish on its own and what it returns
// is dropped.
func Bounded[T any](ctx context.Context, clk clock.Clock, call func(context.Context) T) (T, bool) {
	done := make(chan T, 1)
	go func() { done <- call(ctx) }()
	select {
	case v := <-done:
		return v, true
	case <-ctx.Done():
	}
	t := clk.NewTimer(AbandonGrace)
	defer t.Stop()
	select {
	case v := <-done:
		return v, true
	case <-t.C():
		var zero T
		return zero, false
	}
}

// BoundedThen is Bounded without a goroutine waiting on the call: call
// runs in a goroutine of its own and then hands its result to done; if it
// has not answered AbandonGrace past the end of ctx, done gets the zero
// value and false instead, and the late answer is dropped. done runs
// once, in the call's goroutine or in a timer's. One goroutine a call
// where Bounded takes two (the replica's driver calls, every sweep).
func BoundedThen[T any](ctx context.Context, clk clock.Clock, call func(context.Context) T, done func(T, bool)) {
	var once atomic.Bool
	finish := func(v T, answered bool) {
		if once.CompareAndSwap(false, true) {
			done(v, answered)
		}
	}
	var mu sync.Mutex
	var grace clock.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !once.Load() {
			grace = clk.AfterFunc(AbandonGrace, func() {
				var zero T
				finish(zero, false)
			})
		}
	})
	go func() {
		v := call(ctx)
		stop()
		mu.Lock()
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
		finish(v, true)
	}()
}
