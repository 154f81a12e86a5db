package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// server is the optional HTTP listener of a Metrics.
type server struct {
	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve's goroutine has ended
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})
}

// Serve listens on addr (host:port) and serves GET /metrics in the
// background until Close. It returns once listening, or the listen error
// (an address in use is reported at once).
func (m *Metrics) Serve(addr string) error {
	if m == nil {
		return errors.New("metrics: not configured")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.srv != nil {
		return fmt.Errorf("metrics: already serving on %s", m.ln.Addr())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "engenho metrics are at /metrics", http.StatusNotFound)
	})
	// Bounded like every listener the daemon opens (SEC-4).
	m.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	m.ln = ln
	m.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln) // ends with ErrServerClosed at Close
	}(m.srv, m.done)
	return nil
}

// Addr is the address Serve listens on (with the port chosen for :0), or
// nil when not serving.
func (m *Metrics) Addr() net.Addr {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ln == nil {
		return nil
	}
	return m.ln.Addr()
}

// Close stops serving: the listener and every connection are closed and
// the serving goroutine has ended when it returns. Serve may be called
// again afterwards.
func (m *Metrics) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.srv == nil {
		return nil
	}
	err := m.srv.Close()
	<-m.done
	m.srv, m.ln, m.done = nil, nil, nil
	return err
}
