package replica

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SUP-4, PERF-3: the replica's context ends every call derived from it
// when the actor stops; a call that ended leaves nothing registered; a
// call derived after the stop begins done.
func TestStopCtxEndsItsCallsAndHoldsNothingAtRest(t *testing.T) {
	var c stopCtx
	a, cancelA := context.WithCancel(&c)
	b, cancelB := context.WithTimeout(&c, time.Hour)
	defer cancelB()
	if c.registered() != 2 {
		t.Fatalf("registered %d, want 2", c.registered())
	}
	cancelA()
	if a.Err() == nil || b.Err() != nil {
		t.Fatalf("after ending one call: a %v, b %v", a.Err(), b.Err())
	}
	if c.registered() != 1 {
		t.Fatalf("an ended call is still registered (%d)", c.registered())
	}
	c.stop()
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the stop did not end a call in flight")
	}
	if c.Err() == nil || c.registered() != 0 {
		t.Fatalf("after the stop: err %v, registered %d", c.Err(), c.registered())
	}
	late, cancelLate := context.WithCancel(&c)
	defer cancelLate()
	select {
	case <-late.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a call derived after the stop is live")
	}
	c.stop() // twice: harmless
}

// PERF-3: a call derived and ended at rest registers and unregisters, so
// the replica holds no map or context for it afterwards.
func TestStopCtxAtRestAfterManyCalls(t *testing.T) {
	var c stopCtx
	for range 100 {
		ctx, cancel := context.WithCancelCause(&c)
		cancel(nil)
		if ctx.Err() == nil {
			t.Fatal("a cancelled call is live")
		}
	}
	if c.registered() != 0 || cap(c.after) > 4 {
		t.Fatalf("after 100 calls one at a time: %d registered, capacity %d", c.registered(), cap(c.after))
	}
	if c.Err() != nil {
		t.Fatal("the calls ended the replica's context")
	}
}

// SUP-4: under contention — contexts derived, ended and made to run
// AfterFuncs from many goroutines while the actor stops — every context
// derived from a stopCtx ends, each AfterFunc either ran or was
// unregistered (its stop said true) and never both, nothing stays
// registered, and Err is set only with Done closed.
func TestSUP4StopCtxUnderContention(t *testing.T) {
	for round := range 50 {
		var c stopCtx
		const workers, each = 8, 40
		var wg sync.WaitGroup
		var ran, unregistered atomic.Int64
		derived := make(chan context.Context, workers*each)
		start := make(chan struct{})
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range each {
					switch (w + i) % 3 {
					case 0:
						ctx, cancel := context.WithCancel(&c)
						if i%2 == 0 {
							cancel()
						} else {
							defer cancel()
						}
						derived <- ctx
					case 1:
						ctx, cancel := context.WithCancelCause(&c)
						derived <- ctx
						if i%2 == 0 {
							cancel(nil)
						} else {
							defer cancel(nil)
						}
					case 2:
						stop := context.AfterFunc(&c, func() { ran.Add(1) })
						if i%2 == 0 && stop() {
							unregistered.Add(1)
						}
					}
					if c.Err() != nil {
						select {
						case <-c.Done():
						default:
							t.Error("Err is set but Done is open")
						}
					}
				}
			}()
		}
		close(start)
		if round%2 == 0 {
			runtime.Gosched()
		}
		c.stop()
		wg.Wait()
		close(derived)
		for ctx := range derived {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("a context derived from a stopped stopCtx is still live")
			}
			if !errors.Is(ctx.Err(), context.Canceled) {
				t.Fatalf("derived context's Err %v", ctx.Err())
			}
		}
		afterFuncs := int64(0)
		for w := range workers {
			for i := range each {
				if (w+i)%3 == 2 {
					afterFuncs++
				}
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for ran.Load()+unregistered.Load() != afterFuncs {
			if time.Now().After(deadline) {
				t.Fatalf("AfterFuncs: %d ran + %d unregistered, want %d", ran.Load(), unregistered.Load(), afterFuncs)
			}
			time.Sleep(time.Millisecond)
		}
		if c.registered() != 0 {
			t.Fatalf("after the stop %d are registered", c.registered())
		}
	}
}
