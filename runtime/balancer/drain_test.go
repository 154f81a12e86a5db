package balancer

import (
	"testing"
	"time"
)

// SVC-16: retirement takes a replica out of the rotation (SetBackends,
// which drains it with the default timeout) and then asks for its drain
// with the service's own timeout: the asked-for timeout is the one that
// counts, longer or shorter than the default.
func TestSVC16ADrainAskedForAfterSetBackendsTakesItsTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{{"longer", time.Hour}, {"shorter", time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			b, fake, addr := newTestBalancer(t)
			x, y := startBackend(t, "x"), startBackend(t, "y")
			b.SetBackends("p", []Backend{x.Backend()})
			held := connect(t, addr)
			b.SetBackends("p", []Backend{y.Backend()})
			drained := b.Drain("p", "x", tc.timeout)
			if tc.timeout > DefaultDrainTimeout {
				fake.Advance(DefaultDrainTimeout)
				held.echo(t, "still open after the default timeout")
				if isClosed(drained) {
					t.Fatal("drain over while its connection is open")
				}
				fake.Advance(tc.timeout - DefaultDrainTimeout)
			} else {
				fake.Advance(tc.timeout)
			}
			held.waitClosed(t)
			waitChan(t, "the drain to finish", drained)
		})
	}
}

// SVC-16: Drain(id) covers every backend of that id: one that left the
// rotation with an old address is drained too, and the channel stays open
// while a connection to it does.
func TestSVC16DrainWaitsForEveryBackendOfTheID(t *testing.T) {
	b, fake, addr := newTestBalancer(t)
	old, nu := startBackend(t, "old"), startBackend(t, "new")
	b.SetBackends("p", []Backend{{ID: "r1", Addr: old.Backend().Addr}})
	held := connect(t, addr)
	b.SetBackends("p", []Backend{{ID: "r1", Addr: nu.Backend().Addr}})
	drained := b.Drain("p", "r1", 5*time.Second)
	held.echo(t, "the old address's connection still works")
	if isClosed(drained) {
		t.Fatal("Drain(r1) over while a connection to r1's old address is open")
	}
	fake.Advance(5 * time.Second)
	held.waitClosed(t)
	waitChan(t, "the drain to finish", drained)
}

// SVC-22, SVC-16: a backend that leaves the rotation and comes back (a
// health blip) before its drain is over keeps its connections and its
// count: the stale drain does not cut them, and least connections still
// sees them.
func TestSVC22ABackendBackInRotationKeepsItsConnections(t *testing.T) {
	b, fake, addr := newTestBalancer(t)
	x, y := startBackend(t, "x"), startBackend(t, "y")
	b.SetBackends("p", []Backend{x.Backend()})
	h1, h2 := connect(t, addr), connect(t, addr)
	b.SetBackends("p", []Backend{y.Backend()})
	b.SetBackends("p", []Backend{x.Backend(), y.Backend()})
	if n := activeOn(b, "x"); n != 2 {
		t.Fatalf("x counts %d connections, want its 2", n)
	}
	for range 2 {
		if c := connect(t, addr); c.id != "y" {
			t.Fatalf("x holds 2, y 0: a new connection went to %s", c.id)
		}
	}
	fake.Advance(2 * DefaultDrainTimeout)
	h1.echo(t, "kept")
	h2.echo(t, "kept")
	if s := backendStats(t, b, "x"); !s.InRotation || s.Draining {
		t.Fatalf("x after coming back: %+v", s)
	}
}

// SVC-16: a backend whose drain was asked for (retirement) does not come
// back: listing its id again makes a new backend, and the drain goes on.
func TestSVC16ARetiredBackendIsNotRevived(t *testing.T) {
	b, fake, addr := newTestBalancer(t)
	x := startBackend(t, "x")
	b.SetBackends("p", []Backend{x.Backend()})
	held := connect(t, addr)
	drained := b.Drain("p", "x", 3*time.Second)
	b.SetBackends("p", []Backend{x.Backend()})
	s, _ := b.Stats("p")
	if len(s.Backends) != 2 || !s.Backends[0].InRotation || s.Backends[0].Active != 0 ||
		!s.Backends[1].Draining || s.Backends[1].Active != 1 {
		t.Fatalf("backends %+v, want a new x in rotation with 0 and the old one draining with 1", s.Backends)
	}
	fake.Advance(3 * time.Second)
	held.waitClosed(t)
	waitChan(t, "the drain to finish", drained)
}

// Names lists the ports under a prefix, sorted, and no other.
func TestNamesByPrefix(t *testing.T) {
	b, _, _ := newTestBalancer(t) // listens as "p"
	for _, name := range []string{"web/api/2", "web/api/1", "web/apix/1"} {
		if err := b.Listen(name, "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Names("web/api/"); len(got) != 2 || got[0] != "web/api/1" || got[1] != "web/api/2" {
		t.Fatalf("Names(web/api/) = %v", got)
	}
}
