package replica

import "testing"

// SUP-4, PERF-3: a replica's calls in flight end with the actor's stop;
// one that ended leaves nothing held; a call begun after the stop begins
// cancelled.
func TestCallsEndWithTheStopAndLeaveNothingAtRest(t *testing.T) {
	var c calls
	ctx1, end1 := c.begin()
	ctx2, end2 := c.begin()
	if c.inFlight() != 2 {
		t.Fatalf("in flight %d, want 2", c.inFlight())
	}
	end1()
	if ctx1.Err() == nil {
		t.Fatal("an ended call's context is still live")
	}
	if ctx2.Err() != nil {
		t.Fatal("ending one call cancelled the other")
	}
	end2()
	if c.inFlight() != 0 || c.live != nil {
		t.Fatalf("at rest the replica holds %d calls (map %v)", c.inFlight(), c.live)
	}

	ctx3, end3 := c.begin()
	c.stop()
	if ctx3.Err() == nil {
		t.Fatal("the stop left a call in flight running")
	}
	end3() // after the stop: harmless
	ctx4, end4 := c.begin()
	defer end4()
	if ctx4.Err() == nil {
		t.Fatal("a call begun after the stop is live")
	}
	if c.inFlight() != 0 {
		t.Fatalf("after the stop %d calls are held", c.inFlight())
	}
}
