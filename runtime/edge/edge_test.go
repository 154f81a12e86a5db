package edge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/host"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// backend is an instance stand-in: it records what reached it.
type backend struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	last http.Header
	host string
}

func newBackend(t *testing.T, name string) *backend {
	b := &backend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		b.mu.Lock()
		b.last, b.host = r.Header.Clone(), r.Host
		b.mu.Unlock()
		if r.Header.Get("Upgrade") == "test" {
			hijackEcho(w)
			return
		}
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, name)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// hijackEcho answers an upgrade and echoes lines until the client closes.
func hijackEcho(w http.ResponseWriter) {
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
	rw.Flush()
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			return
		}
		rw.WriteString(line)
		rw.Flush()
	}
}

func (b *backend) addr() string { return strings.TrimPrefix(b.srv.URL, "http://") }

type fixture struct {
	t     *testing.T
	clk   *clock.Fake
	table *Table
	board *supervise.Board
	edge  *Edge
	srv   *httptest.Server
	eng   *actor.Engine
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, clk: clock.NewFake(t0), table: NewTable(), board: supervise.NewBoard()}
	f.edge = New(Options{Table: f.table, Board: f.board, Clock: f.clk, MaxHeaderBytes: 4 << 10, MaxBodyBytes: 1 << 10})
	f.srv = httptest.NewUnstartedServer(f.edge)
	f.srv.Config.MaxHeaderBytes = 4 << 10
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	eng, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	f.eng = eng
	return f
}

func (f *fixture) get(host string, hdr map[string]string) (*http.Response, string) {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+"/x", nil)
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// fakeHost is a host actor stand-in: it counts wakes and, when told to,
// opens the gate and answers.
type fakeHost struct {
	gate    *host.Gate
	addr    string
	wakes   atomic.Int64
	refuse  bool
	silent  bool
	retryIn time.Duration
}

func (h *fakeHost) receive(c *actor.Context) {
	if _, ok := c.Message().(messages.HostWake); !ok {
		return
	}
	h.wakes.Add(1)
	switch {
	case h.silent:
	case h.refuse:
		c.Respond(messages.HostWakeResult{Status: http.StatusServiceUnavailable, RetryAfter: h.retryIn, Err: "lease held"})
	default:
		h.gate.Open(h.addr, time.Time{})
		c.Respond(messages.HostWakeResult{OK: true})
	}
}

func (f *fixture) host(name string, h *fakeHost) host.Route {
	pid := f.eng.SpawnFunc(h.receive, "host-"+name)
	f.t.Cleanup(func() { <-f.eng.Poison(pid).Done() })
	r := host.Route{Host: name, Stack: "s", Service: name, Engine: f.eng, PID: pid, Gate: h.gate, WakeTimeout: 30 * time.Second}
	f.table.SetHost(r)
	return r
}

// ACT-1, SEC-4: an unknown host is 404 and reaches no backend; each known
// host reaches only its own backend.
func TestACT1RoutesByHostOnly(t *testing.T) {
	f := newFixture(t)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	ga := host.NewGate()
	ga.Open(a.addr(), time.Time{})
	f.host("a.localhost", &fakeHost{gate: ga, addr: a.addr()})
	f.board.PutReplica(messages.ReplicaStatus{Stack: "web", Service: "api", ID: "r1", InRotation: true, Addresses: map[int]string{80: b.addr()}})
	f.table.SetServices("web", []ServiceRoute{{Host: "api.localhost", Service: "api", Port: 80}})

	for _, h := range []string{"nope.localhost", "localhost", "", "a.localhost.evil", "A..localhost", "1.2.3.4"} {
		if resp, _ := f.get(h, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("host %q: status %d, want 404", h, resp.StatusCode)
		}
	}
	if a.hits.Load() != 0 || b.hits.Load() != 0 {
		t.Fatalf("an unknown host reached a backend: a=%d b=%d", a.hits.Load(), b.hits.Load())
	}
	if _, body := f.get("A.localhost:8080", nil); body != "a" {
		t.Fatalf("a.localhost answered %q", body)
	}
	if _, body := f.get("api.localhost.", nil); body != "b" {
		t.Fatalf("api.localhost answered %q", body)
	}
	a.mu.Lock()
	host := a.host
	a.mu.Unlock()
	if host != "A.localhost:8080" {
		t.Fatalf("backend saw Host %q, want the client's", host)
	}
}

// ACT-1: a service route goes only to replicas in rotation; none → 503.
func TestACT1ServiceRouteUsesRotation(t *testing.T) {
	f := newFixture(t)
	in, out := newBackend(t, "in"), newBackend(t, "out")
	f.board.PutReplica(messages.ReplicaStatus{Stack: "web", Service: "api", ID: "r1", InRotation: true, Addresses: map[int]string{80: in.addr()}})
	f.board.PutReplica(messages.ReplicaStatus{Stack: "web", Service: "api", ID: "r2", InRotation: false, Addresses: map[int]string{80: out.addr()}})
	st := stackfile.Stack{Name: "web", Order: []string{"api"}, Services: map[string]stackfile.Service{
		"api": {Name: "api", Ports: []stackfile.Port{{Target: 80}}, Engenho: stackfile.Engenho{Host: "api.localhost"}}}}
	f.table.SetStack(st)
	for range 4 {
		if _, body := f.get("api.localhost", nil); body != "in" {
			t.Fatalf("answered %q, want the in-rotation replica", body)
		}
	}
	if out.hits.Load() != 0 {
		t.Fatal("a replica out of rotation got traffic")
	}
	f.board.PutReplica(messages.ReplicaStatus{Stack: "web", Service: "api", ID: "r1", InRotation: false, Addresses: map[int]string{80: in.addr()}})
	if resp, _ := f.get("api.localhost", nil); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("no replica in rotation: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	f.table.RemoveStack("web")
	if resp, _ := f.get("api.localhost", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("removed stack: %d", resp.StatusCode)
	}
}

// SEC-4: headers and bodies are bounded.
func TestSEC4BoundsHeadersAndBodies(t *testing.T) {
	f := newFixture(t)
	a := newBackend(t, "a")
	g := host.NewGate()
	g.Open(a.addr(), time.Time{})
	f.host("a.localhost", &fakeHost{gate: g, addr: a.addr()})
	resp, _ := f.get("a.localhost", map[string]string{"X-Big": strings.Repeat("x", 8<<10)})
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("big header: %d", resp.StatusCode)
	}
	post := func(body io.Reader, length int64) int {
		req, _ := http.NewRequest("POST", f.srv.URL+"/", body)
		req.Host, req.ContentLength = "a.localhost", length
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(strings.NewReader(strings.Repeat("x", 2<<10)), 2<<10); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared big body: %d", code)
	}
	// A chunked body without a length is cut at the bound.
	if code := post(io.MultiReader(strings.NewReader(strings.Repeat("x", 4<<10))), -1); code != http.StatusRequestEntityTooLarge && code != http.StatusBadGateway {
		t.Fatalf("chunked big body: %d", code)
	}
	if code := post(strings.NewReader("small"), 5); code != http.StatusOK {
		t.Fatalf("small body: %d", code)
	}
	// The handler releases its in-flight count once it has returned, which
	// can be just after the client has read the whole response.
	for deadline := time.Now().Add(5 * time.Second); g.InFlight() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if g.InFlight() != 0 {
		t.Fatalf("in flight after the requests: %d", g.InFlight())
	}
}

// ACT-3: a request to an asleep host asks its actor to wake and is proxied
// once the host answers.
func TestACT3WakeThenProxy(t *testing.T) {
	f := newFixture(t)
	a := newBackend(t, "a")
	h := &fakeHost{gate: host.NewGate(), addr: a.addr()}
	f.host("a.localhost", h)
	if _, body := f.get("a.localhost", nil); body != "a" {
		t.Fatalf("answered %q", body)
	}
	if h.wakes.Load() != 1 {
		t.Fatalf("wakes: %d", h.wakes.Load())
	}
	if _, body := f.get("a.localhost", nil); body != "a" || h.wakes.Load() != 1 {
		t.Fatalf("awake host woken again: %q, wakes %d", body, h.wakes.Load())
	}
	if !h.gate.LastActivity().Equal(t0) {
		t.Fatalf("activity %v, want the request's end %v", h.gate.LastActivity(), t0)
	}
}

// ACT-3: a failed wake is the waiter's answer, with the host's Retry-After.
func TestACT3FailedWakeAnswers503(t *testing.T) {
	f := newFixture(t)
	h := &fakeHost{gate: host.NewGate(), refuse: true, retryIn: 12 * time.Second}
	f.host("a.localhost", h)
	resp, _ := f.get("a.localhost", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "12" {
		t.Fatalf("status %d retry %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// ACT-3: a waiter waits at most the wake timeout (30s on the clock), then
// gets 503 with Retry-After: 5.
func TestACT3WaiterBoundedBy30s(t *testing.T) {
	f := newFixture(t)
	h := &fakeHost{gate: host.NewGate(), silent: true}
	f.host("a.localhost", h)
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := f.get("a.localhost", nil)
		done <- resp
	}()
	if !f.clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("the waiter armed no deadline")
	}
	f.clk.Advance(29 * time.Second)
	select {
	case <-done:
		t.Fatal("answered before the wake timeout")
	default:
	}
	f.clk.Advance(time.Second)
	resp := <-done
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("status %d retry %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// ACT-7: a sidecar's request never wakes a sleeping host, never counts as
// activity or in flight, and loses its marker before it is proxied.
func TestACT7SidecarRequests(t *testing.T) {
	f := newFixture(t)
	a := newBackend(t, "a")
	h := &fakeHost{gate: host.NewGate(), addr: a.addr()}
	f.host("a.localhost", h)
	side := map[string]string{messages.SidecarHeader: "backup"}
	if resp, _ := f.get("a.localhost", side); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("asleep: %d", resp.StatusCode)
	}
	if h.wakes.Load() != 0 || a.hits.Load() != 0 {
		t.Fatalf("a sidecar request woke the host (%d) or reached it (%d)", h.wakes.Load(), a.hits.Load())
	}
	h.gate.Open(a.addr(), time.Time{})
	f.clk.Advance(time.Minute)
	if _, body := f.get("a.localhost", side); body != "a" {
		t.Fatalf("awake: %q", body)
	}
	a.mu.Lock()
	leaked := a.last.Get(messages.SidecarHeader)
	a.mu.Unlock()
	if leaked != "" {
		t.Fatalf("the sidecar header reached the instance: %q", leaked)
	}
	if !h.gate.LastActivity().IsZero() {
		t.Fatalf("a sidecar request stamped activity: %v", h.gate.LastActivity())
	}
}

// ACT-7: an open WebSocket (an upgraded connection) is in flight until it
// closes.
func TestACT7UpgradedConnectionCountsUntilClosed(t *testing.T) {
	f := newFixture(t)
	a := newBackend(t, "a")
	g := host.NewGate()
	g.Open(a.addr(), time.Time{})
	f.host("a.localhost", &fakeHost{gate: g, addr: a.addr()})
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: a.localhost\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	fmt.Fprint(conn, "ping\n")
	if line, _ := br.ReadString('\n'); line != "ping\n" {
		t.Fatalf("echo %q", line)
	}
	if n := g.InFlight(); n != 1 {
		t.Fatalf("in flight with the socket open: %d", n)
	}
	if g.Close() {
		t.Fatal("the gate closed with a WebSocket open")
	}
	conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for g.InFlight() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !g.Close() {
		t.Fatalf("the gate did not close after the socket closed (in flight %d)", g.InFlight())
	}
}
