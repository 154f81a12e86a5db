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
	if _, ok := g.Enter(); ok {
		t.Fatal("a closed gate admitted a request")
	}
	g.Open("a:1", time.Time{})
	addr, ok := g.Enter()
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
	if _, ok := g.Enter(); ok {
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
					if _, ok := g.Enter(); ok {
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
				if _, ok := g.Enter(); ok {
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
