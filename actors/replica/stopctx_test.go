package replica

import (
	"context"
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
