package host

import (
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// ACT-7: Close succeeds only with nothing in flight, and nothing is
// admitted after it until the gate opens again.
func TestGateCloseIsExact(t *testing.T) {
	g := NewGate()
	if _, ok := g.Enter(t0); ok {
		t.Fatal("a closed gate admitted a request")
	}
	g.Open("a:1", time.Time{})
	addr, ok := g.Enter(t0)
	if !ok || addr != "a:1" {
		t.Fatalf("enter: %q %v", addr, ok)
	}
	if g.Close() {
		t.Fatal("closed with a request in flight")
	}
	g.Leave(t0, true)
	if !g.Close() {
		t.Fatal("did not close when idle")
	}
	if _, ok := g.Enter(t0); ok {
		t.Fatal("admitted after close")
	}
	if !g.LastActivity().Equal(t0) {
		t.Fatalf("activity %v", g.LastActivity())
	}
	g.Leave(t0.Add(-time.Hour), true) // an older stamp never moves it back
	g.word.Add(1)                     // (undo the extra Leave's decrement)
	if !g.LastActivity().Equal(t0) {
		t.Fatalf("activity moved back: %v", g.LastActivity())
	}
}

// ACT-7, property: under any interleaving of requests and close attempts,
// a successful Close never overlaps an admitted request.
func TestGateNeverClosesOverARequest(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := NewGate()
		g.Open("a:1", time.Time{})
		workers := rapid.IntRange(1, 8).Draw(rt, "workers")
		var mu sync.Mutex
		active, closedWhileActive := 0, false
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					if _, ok := g.Enter(t0); ok {
						mu.Lock()
						active++
						mu.Unlock()
						mu.Lock()
						active--
						mu.Unlock()
						g.Leave(t0, false)
					}
				}
			}()
		}
		closes := rapid.IntRange(0, 50).Draw(rt, "closes")
		for range closes {
			if g.Close() {
				mu.Lock()
				if active != 0 {
					closedWhileActive = true
				}
				mu.Unlock()
				if _, ok := g.Enter(t0); ok {
					rt.Fatal("admitted right after a close")
				}
				g.Open("a:1", time.Time{})
			}
		}
		wg.Wait()
		if closedWhileActive {
			rt.Fatal("closed while a request was admitted")
		}
		if g.InFlight() != 0 {
			rt.Fatalf("in flight at the end: %d", g.InFlight())
		}
	})
}

// ACT-14: a gate fenced by the lease admits nothing once the lease may no
// longer be acted on, open or not; a renewed lease moves the fence on, and
// Peek (a sidecar's request) is fenced too.
func TestACT14GateFencedByLease(t *testing.T) {
	g := NewGate()
	g.Open("a:1", time.Time{})
	g.Fence(t0.Add(30 * time.Second))
	if _, ok := g.Enter(t0.Add(29 * time.Second)); !ok {
		t.Fatal("refused while the lease is valid")
	}
	g.Leave(t0, false)
	for _, at := range []time.Duration{30 * time.Second, time.Hour} {
		if _, ok := g.Enter(t0.Add(at)); ok {
			t.Fatalf("admitted %s after the lease's start, past its TTL", at)
		}
		if _, ok := g.Peek(t0.Add(at)); ok {
			t.Fatalf("peeked %s after the lease's start, past its TTL", at)
		}
	}
	if !g.IsOpen() || g.InFlight() != 0 {
		t.Fatalf("the fence changed the gate: open %v, in flight %d", g.IsOpen(), g.InFlight())
	}
	g.Fence(t0.Add(time.Hour + time.Minute)) // renewed
	if _, ok := g.Enter(t0.Add(time.Hour)); !ok {
		t.Fatal("refused after a renew moved the fence on")
	}
	g.Leave(t0, false)
	g.Fence(time.Time{})
	if _, ok := g.Enter(t0.Add(100 * time.Hour)); !ok {
		t.Fatal("a lifted fence still refuses")
	}
	g.Leave(t0, false)
}
