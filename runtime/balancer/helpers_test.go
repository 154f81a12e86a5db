package balancer

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// idBackend is a TCP server that greets each connection with its id and a
// newline, then echoes everything until EOF.
type idBackend struct {
	id string
	ln net.Listener
	wg sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startBackend(t *testing.T, id string) *idBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &idBackend{id: id, ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.Close)
	return b
}

func (b *idBackend) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer c.Close()
			if _, err := io.WriteString(c, b.id+"\n"); err == nil {
				io.Copy(c, c)
			}
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
		}()
	}
}

func (b *idBackend) Backend() Backend { return Backend{ID: b.id, Addr: b.ln.Addr().String()} }

// Close stops the server and closes its connections.
func (b *idBackend) Close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// client is one connection through the balancer to an idBackend.
type client struct {
	net.Conn
	r  *bufio.Reader
	id string // the backend that greeted it
}

// connect dials addr and reads the backend's greeting.
func connect(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cl := &client{Conn: c, r: bufio.NewReader(c)}
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // guard only
	line, err := cl.r.ReadString('\n')
	if err != nil {
		c.Close()
		t.Fatalf("no greeting through %s: %v", addr, err)
	}
	cl.id = strings.TrimSpace(line)
	t.Cleanup(func() { c.Close() })
	return cl
}

// echo sends msg and checks it comes back.
func (c *client) echo(t *testing.T, msg string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // guard only
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatalf("write to %s: %v", c.id, err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != msg {
		t.Fatalf("echo via %s: got %q, %v", c.id, line, err)
	}
}

// waitClosed checks the balancer closed the connection (EOF or reset).
func (c *client) waitClosed(t *testing.T) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // guard only
	_, err := c.r.ReadString('\n')
	if err == nil {
		t.Fatalf("connection to %s still open", c.id)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection to %s not closed", c.id)
	}
}

// waitFor polls cond; the limit is a guard against hangs, not a timing
// assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitChan(t *testing.T, what string, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// newTestBalancer listens port "p" on a free loopback port with a fake
// clock; it is shut down at cleanup.
func newTestBalancer(t *testing.T) (*Balancer, *clock.Fake, string) {
	t.Helper()
	fake := clock.NewFake(t0)
	b := New(Options{Clock: fake})
	if err := b.Listen("p", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	addr, _ := b.Addr("p")
	return b, fake, addr.String()
}

func backendStats(t *testing.T, b *Balancer, id string) BackendStats {
	t.Helper()
	s, ok := b.Stats("p")
	if !ok {
		t.Fatal("no stats for port p")
	}
	for _, be := range s.Backends {
		if be.ID == id {
			return be
		}
	}
	return BackendStats{ID: id}
}

func activeOn(b *Balancer, id string) int {
	s, _ := b.Stats("p")
	n := 0
	for _, be := range s.Backends {
		if be.ID == id {
			n += be.Active
		}
	}
	return n
}

func portActive(b *Balancer) int {
	s, _ := b.Stats("p")
	return s.Active
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
