package faultproxy_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engenho/engenho/chaos/faultproxy"
	"github.com/engenho/engenho/drivers/clock"
)

// backend is the server behind the proxy in these tests.
type backend struct {
	hits    atomic.Int64 // requests received
	conns   atomic.Int64 // connections accepted
	release chan struct{}
	mu      sync.Mutex
	hosts   []string
	streamd chan struct{} // closed when /stream has written its last line
}

// blob is n deterministic bytes.
func blob(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}

func (b *backend) handler() http.Handler {
	mux := http.NewServeMux()
	// GET /blob?n=N: N bytes with a Content-Length.
	mux.HandleFunc("/blob", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(blob(n))
	})
	// PUT /echo: answers the sha256 and size of the body it read.
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "%x %d", h.Sum(nil), n)
	})
	// GET /stream: a first line, then the second once release is closed.
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-b.release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "second\n")
		close(b.streamd)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		b.mu.Lock()
		b.hosts = append(b.hosts, r.Host)
		b.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

// newBackend starts a backend on TCP.
func newBackend(t *testing.T) (*backend, *httptest.Server) {
	b := &backend{release: make(chan struct{}), streamd: make(chan struct{})}
	srv := httptest.NewUnstartedServer(b.handler())
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
	})
	return b, srv
}

// startProxy starts a proxy to target, closed at the end of the test.
func startProxy(t *testing.T, listen, target faultproxy.Endpoint, clk clock.Clock) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(faultproxy.Config{Listen: listen, Target: target, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// tcpProxy is a proxy on a free loopback port in front of a new backend.
func tcpProxy(t *testing.T, clk clock.Clock) (*faultproxy.Proxy, *backend) {
	b, srv := newBackend(t)
	return startProxy(t, faultproxy.TCP("127.0.0.1:0"), faultproxy.TCP(srv.Listener.Addr().String()), clk), b
}

// newClient is a keep-alive client; fresh=true gives one that never
// reuses a connection.
func newClient(t *testing.T, fresh bool) *http.Client {
	tr := &http.Transport{DisableKeepAlives: fresh, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func mustArm(t *testing.T, p *faultproxy.Proxy, f faultproxy.Fault) int {
	t.Helper()
	id, err := p.Arm(f)
	if err != nil {
		t.Fatalf("arming %s: %v", f, err)
	}
	return id
}

// get does a GET and reads the whole body; err is the first error.
func get(c *http.Client, url string) (*http.Response, []byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// eventually polls cond every 10ms for up to a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var bg = context.Background()
