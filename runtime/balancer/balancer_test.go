package balancer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// SVC-22: least connections: held connections spread evenly, and a new
// connection goes to the backend with the fewest.
func TestLeastConnections(t *testing.T) {
	b, _, addr := newTestBalancer(t)
	x, y, z := startBackend(t, "x"), startBackend(t, "y"), startBackend(t, "z")
	if err := b.SetBackends("p", []Backend{x.Backend(), y.Backend(), z.Backend()}); err != nil {
		t.Fatal(err)
	}
	var held []*client
	count := map[string]int{}
	for range 6 {
		c := connect(t, addr)
		held = append(held, c)
		count[c.id]++
	}
	if count["x"] != 2 || count["y"] != 2 || count["z"] != 2 {
		t.Fatalf("6 held connections spread %v, want 2 each", count)
	}
	// Free x's two: the next two connections must both go to x.
	for _, c := range held {
		if c.id == "x" {
			c.Close()
		}
	}
	waitFor(t, "x's connections to end", func() bool { return activeOn(b, "x") == 0 })
	for i := range 2 {
		if c := connect(t, addr); c.id != "x" {
			t.Fatalf("connection %d went to %s with x least loaded", i, c.id)
		}
	}
	if c := connect(t, addr); c.id == "x" {
		t.Fatal("a 3-connection backend got a new connection while others had 2")
	}
}

// SVC-22: with equal load, ties are broken round-robin: short connections
// one after the other visit every backend in turn.
func TestTiesRoundRobin(t *testing.T) {
	b, _, addr := newTestBalancer(t)
	x, y, z := startBackend(t, "x"), startBackend(t, "y"), startBackend(t, "z")
	b.SetBackends("p", []Backend{x.Backend(), y.Backend(), z.Backend()})
	var order []string
	for range 9 {
		c := connect(t, addr)
		order = append(order, c.id)
		c.Close()
		waitFor(t, "the connection to end", func() bool { return portActive(b) == 0 })
	}
	if want := strings.Split("x y z x y z x y z", " "); !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}

// SVC-22 SVC-16: a backend removed from rotation gets no new connections;
// its open ones drain for the default timeout, then close.
func TestRemovedBackendGetsNoNewConnections(t *testing.T) {
	b, fake, addr := newTestBalancer(t)
	x, y := startBackend(t, "x"), startBackend(t, "y")
	b.SetBackends("p", []Backend{x.Backend(), y.Backend()})
	held := connect(t, addr)
	if held.id != "x" {
		t.Fatalf("first connection went to %s", held.id)
	}
	if err := b.SetBackends("p", []Backend{y.Backend()}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if c := connect(t, addr); c.id != "y" {
			t.Fatalf("a connection went to removed backend %s", c.id)
		}
	}
	xs := backendStats(t, b, "x")
	if xs.InRotation || !xs.Draining || xs.Active != 1 {
		t.Fatalf("removed backend stats %+v, want draining with 1 active", xs)
	}
	held.echo(t, "still served while draining")
	fake.Advance(DefaultDrainTimeout - time.Millisecond)
	held.echo(t, "still served just before the timeout")
	fake.Advance(time.Millisecond)
	held.waitClosed(t)
	waitFor(t, "x to leave the stats", func() bool { return backendStats(t, b, "x").Addr == "" })
}

// SVC-16: Drain takes a backend out of rotation at once, lets an active
// connection work until the timeout, then closes it; the channel closes
// once nothing is left.
func TestDrainTimeout(t *testing.T) {
	b, fake, addr := newTestBalancer(t)
	x, y := startBackend(t, "x"), startBackend(t, "y")
	b.SetBackends("p", []Backend{x.Backend(), y.Backend()})
	held := connect(t, addr)
	drained := b.Drain("p", "x", 3*time.Second)
	if c := connect(t, addr); c.id != "y" {
		t.Fatalf("new connection went to draining %s", c.id)
	}
	if isClosed(drained) {
		t.Fatal("drain done with a connection open")
	}
	if again := b.Drain("p", "x", time.Hour); again != drained {
		t.Fatal("draining a draining backend did not return its drain")
	}
	fake.Advance(2 * time.Second)
	held.echo(t, "working during the drain")
	if isClosed(drained) {
		t.Fatal("drain done before its timeout")
	}
	fake.Advance(time.Second)
	held.waitClosed(t)
	waitChan(t, "the drain to finish", drained)
	if s := backendStats(t, b, "x"); s.Addr != "" {
		t.Fatalf("drained backend still listed: %+v", s)
	}
}

// SVC-16: a drain finishes as soon as the last connection ends by itself.
func TestDrainFinishesWhenConnectionsEnd(t *testing.T) {
	b, fake, addr := newTestBalancer(t)
	x := startBackend(t, "x")
	b.SetBackends("p", []Backend{x.Backend()})
	held := connect(t, addr)
	drained := b.Drain("p", "x", 0)
	held.echo(t, "finishing up")
	held.Close()
	waitChan(t, "the drain to finish", drained)
	if fake.Pending() != 0 {
		t.Fatalf("%d timers left after the drain", fake.Pending())
	}
	if !isClosed(b.Drain("p", "x", 0)) || !isClosed(b.Drain("p", "nobody", 0)) || !isClosed(b.Drain("nope", "x", 0)) {
		t.Fatal("draining nothing must return a closed channel")
	}
	// Back in rotation through SetBackends.
	b.SetBackends("p", []Backend{x.Backend()})
	if c := connect(t, addr); c.id != "x" {
		t.Fatalf("re-added backend not used: %s", c.id)
	}
}

// SVC-22: a backend that refuses is skipped for the next best one, so the
// client is served; it is suspect for a while, then tried again.
func TestFailoverOnRefusedDial(t *testing.T) {
	b, fake, addr := newTestBalancer(t)
	live := startBackend(t, "live")
	dead := Backend{ID: "dead", Addr: closedAddr(t)}
	b.SetBackends("p", []Backend{dead, live.Backend()})
	for range 5 {
		if c := connect(t, addr); c.id != "live" {
			t.Fatalf("served by %s", c.id)
		}
	}
	ds := backendStats(t, b, "dead")
	if ds.DialFailures != 1 || !ds.Suspect || ds.Accepted != 0 {
		t.Fatalf("dead backend stats %+v: want 1 dial failure (then suspect, skipped)", ds)
	}
	fake.Advance(DefaultSuspectFor)
	if backendStats(t, b, "dead").Suspect {
		t.Fatal("still suspect after SuspectFor")
	}
	waitFor(t, "connections to end", func() bool { return portActive(b) == 5 })
	// Least loaded again: dead (0) is tried before live (5), fails over.
	if c := connect(t, addr); c.id != "live" {
		t.Fatalf("served by %s", c.id)
	}
	if s, _ := b.Stats("p"); s.Failed != 0 || backendStats(t, b, "dead").DialFailures != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// SVC-22: when every backend refuses, or none is in rotation, the client
// connection is closed and counted as failed.
func TestNoReachableBackendClosesClient(t *testing.T) {
	b, _, addr := newTestBalancer(t)
	for i, backends := range [][]Backend{
		nil,
		{{ID: "a", Addr: closedAddr(t)}, {ID: "b", Addr: closedAddr(t)}},
	} {
		b.SetBackends("p", backends)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // guard only
		if n, err := c.Read(make([]byte, 1)); err == nil || n != 0 {
			t.Fatalf("case %d: read %d bytes, err %v; want closed", i, n, err)
		}
		c.Close()
		if s, _ := b.Stats("p"); s.Failed != uint64(i+1) {
			t.Fatalf("case %d: failed = %d", i, s.Failed)
		}
	}
}

// SVC-22: stats: accepted, active, per-backend counts and the rate over
// the recent window.
func TestStats(t *testing.T) {
	b, fake, addr := newTestBalancer(t)
	x, y := startBackend(t, "x"), startBackend(t, "y")
	b.SetBackends("p", []Backend{x.Backend(), y.Backend()})
	var held []*client
	for range 4 {
		held = append(held, connect(t, addr))
	}
	s, _ := b.Stats("p")
	if s.Name != "p" || s.Addr != addr || s.Accepted != 4 || s.Active != 4 || s.Failed != 0 {
		t.Fatalf("stats %+v", s)
	}
	if s.Rate != 4.0/float64(RateWindow/time.Second) {
		t.Fatalf("rate %v, want 4 per %s", s.Rate, RateWindow)
	}
	want := []BackendStats{
		{ID: "x", Addr: x.Backend().Addr, InRotation: true, Active: 2, Accepted: 2},
		{ID: "y", Addr: y.Backend().Addr, InRotation: true, Active: 2, Accepted: 2},
	}
	if !slices.Equal(s.Backends, want) {
		t.Fatalf("backends %+v, want %+v", s.Backends, want)
	}
	held[0].Close()
	waitFor(t, "a connection to end", func() bool { return portActive(b) == 3 })
	fake.Advance(RateWindow)
	s, _ = b.Stats("p")
	if s.Rate != 0 || s.Accepted != 4 {
		t.Fatalf("after the window: %+v", s)
	}
	if all := b.AllStats(); len(all) != 1 || all[0].Name != "p" {
		t.Fatalf("AllStats %+v", all)
	}
}

func TestRateWindow(t *testing.T) {
	var w rateWindow
	for i := range 20 {
		w.add(t0.Add(time.Duration(i) * time.Second / 2)) // 2 per second for 10s
	}
	if r := w.perSecond(t0.Add(9 * time.Second)); r != 2 {
		t.Fatalf("rate %v, want 2", r)
	}
	if r := w.perSecond(t0.Add(14 * time.Second)); r != 1 {
		t.Fatalf("rate 5s later %v, want 1", r)
	}
	if r := w.perSecond(t0.Add(time.Hour)); r != 0 {
		t.Fatalf("rate an hour later %v", r)
	}
}

// Half-close: a client that ends its side still reads the backend's reply.
func TestHalfClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c) // until the client's half-close
		fmt.Fprintf(c, "got %d bytes", n)
	}()
	defer func() { ln.Close(); <-done }()
	b, _, addr := newTestBalancer(t)
	b.SetBackends("p", []Backend{{ID: "sink", Addr: ln.Addr().String()}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // guard only
	io.WriteString(c, strings.Repeat("a", 100000))
	c.(*net.TCPConn).CloseWrite()
	reply, err := io.ReadAll(c)
	if err != nil || string(reply) != "got 100000 bytes" {
		t.Fatalf("reply %q, %v", reply, err)
	}
}

// SVC-2: a busy address is a typed error naming it; so is an address held
// by another port of this balancer; PortFree tells beforehand.
func TestListenErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	b := New(Options{})
	defer b.Shutdown()
	busyAddr := busy.Addr().String()
	if PortFree(busyAddr) {
		t.Fatal("PortFree on a busy address")
	}
	err = b.Listen("web", busyAddr)
	var le *ListenError
	if !errors.Is(err, ErrAddrInUse) || !errors.As(err, &le) || le.Addr != busyAddr || !strings.Contains(err.Error(), busyAddr) {
		t.Fatalf("listen on busy address: %v", err)
	}

	free := closedAddr(t)
	if !PortFree(free) {
		t.Fatalf("PortFree(%s) = false", free)
	}
	if err := b.Listen("web", free); err != nil {
		t.Fatal(err)
	}
	_, portNum, _ := net.SplitHostPort(free)
	err = b.Listen("api", "0.0.0.0:"+portNum)
	if !errors.Is(err, ErrAddrInUse) || !errors.As(err, &le) || le.Holder != "web" {
		t.Fatalf("overlapping listen: %v", err)
	}
	if holder, ok := b.Holder(":" + portNum); !ok || holder != "web" {
		t.Fatalf("Holder = %q, %v", holder, ok)
	}
	if err := b.Listen("web", "127.0.0.1:0"); !errors.Is(err, ErrPortExists) {
		t.Fatalf("same name twice: %v", err)
	}
	if err := b.Listen("", "127.0.0.1:0"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty name: %v", err)
	}
	if err := b.SetBackends("nope", nil); !errors.Is(err, ErrUnknownPort) {
		t.Fatalf("unknown port: %v", err)
	}
	if err := b.Close("nope"); !errors.Is(err, ErrUnknownPort) {
		t.Fatalf("close unknown port: %v", err)
	}
	if err := b.Close("web"); err != nil {
		t.Fatal(err)
	}
	if !PortFree(free) {
		t.Fatal("address not released by Close")
	}
	b.Shutdown()
	if err := b.Listen("late", "127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Fatalf("listen after shutdown: %v", err)
	}
}

// A bad backend list is refused whole and changes nothing.
func TestSetBackendsInvalid(t *testing.T) {
	b, _, addr := newTestBalancer(t)
	x := startBackend(t, "x")
	b.SetBackends("p", []Backend{x.Backend()})
	for _, bad := range [][]Backend{
		{{ID: "y", Addr: "127.0.0.1:1"}, {ID: "y", Addr: "127.0.0.1:2"}},
		{{ID: "", Addr: "127.0.0.1:1"}},
		{{ID: "y", Addr: ""}},
	} {
		if err := b.SetBackends("p", bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
	if c := connect(t, addr); c.id != "x" {
		t.Fatalf("rotation changed by a refused list: %s", c.id)
	}
}

// A backend whose address changes under the same id is a new backend: the
// old address drains, the new one takes connections.
func TestSetBackendsAddressChange(t *testing.T) {
	b, _, addr := newTestBalancer(t)
	old, nu := startBackend(t, "old"), startBackend(t, "new")
	b.SetBackends("p", []Backend{{ID: "r1", Addr: old.Backend().Addr}})
	held := connect(t, addr)
	b.SetBackends("p", []Backend{{ID: "r1", Addr: nu.Backend().Addr}})
	if c := connect(t, addr); c.id != "new" {
		t.Fatalf("served by %s", c.id)
	}
	s, _ := b.Stats("p")
	if len(s.Backends) != 2 || !s.Backends[0].InRotation || !s.Backends[1].Draining {
		t.Fatalf("backends %+v", s.Backends)
	}
	held.echo(t, "old connection kept while draining")
}

// Close stops the listener, closes every connection, completes drains and
// leaves no goroutine (goleak in TestMain).
func TestCloseStopsEverything(t *testing.T) {
	b, _, addr := newTestBalancer(t)
	x, y := startBackend(t, "x"), startBackend(t, "y")
	b.SetBackends("p", []Backend{x.Backend(), y.Backend()})
	c1, c2 := connect(t, addr), connect(t, addr)
	drained := b.Drain("p", c1.id, time.Hour)
	if err := b.Close("p"); err != nil {
		t.Fatal(err)
	}
	c1.waitClosed(t)
	c2.waitClosed(t)
	waitChan(t, "the drain to end on Close", drained)
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("port still accepting after Close")
	}
	if _, ok := b.Stats("p"); ok {
		t.Fatal("closed port still has stats")
	}
}

func TestChoose(t *testing.T) {
	mk := func(active int, suspect bool) *backend {
		b := &backend{active: active}
		if suspect {
			b.suspectUntil = t0.Add(time.Second)
		}
		return b
	}
	a, b, c := mk(1, false), mk(0, true), mk(1, false)
	rot := []*backend{a, b, c}
	for _, tc := range []struct {
		name   string
		tried  []*backend
		cursor int
		want   int
	}{
		{"suspect avoided though least loaded", nil, 0, 0},
		{"tie from cursor", nil, 2, 2},
		{"tie wraps", nil, 1, 2},
		{"tried skipped", []*backend{a}, 0, 2},
		{"suspect as last resort", []*backend{a, c}, 0, 1},
		{"none left", []*backend{a, b, c}, 0, -1},
	} {
		if got := choose(rot, tc.tried, tc.cursor, t0); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := choose(nil, nil, 0, t0); got != -1 {
		t.Errorf("empty rotation: %d", got)
	}
}
