package faultproxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/chaos/faultproxy"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/incus"
)

// fakeIncusd answers GET /1.0 like incusd (trusted) and holds
// /1.0/operations/ID/wait until release is closed, as a long operation.
type fakeIncusd struct {
	release chan struct{}
	waits   atomic.Int64
}

func (f *fakeIncusd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/1.0":
		json.NewEncoder(w).Encode(map[string]any{"type": "sync", "status": "Success", "status_code": 200,
			"metadata": map[string]any{"api_version": "1.0", "auth": "trusted"}})
	case "/1.0/operations/op1/wait":
		f.waits.Add(1)
		select { // incusd answers a wait only once it is over
		case <-f.release:
		case <-r.Context().Done():
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"type": "sync", "status": "Success", "status_code": 200,
			"metadata": map[string]any{"id": "op1", "status": "Success", "status_code": 200}})
	default:
		w.WriteHeader(404)
		json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": "not found", "error_code": 404})
	}
}

// shortTemp is a short temporary directory: a unix socket path must stay
// under 108 bytes, which t.TempDir() under a long test name may not.
func shortTemp(t *testing.T) string {
	dir, err := os.MkdirTemp("", "fp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// unixProxy starts a fake incusd on a unix socket and a proxy on another.
func unixProxy(t *testing.T) (*faultproxy.Proxy, *fakeIncusd) {
	dir := shortTemp(t)
	back := filepath.Join(dir, "incusd.sock")
	ln, err := net.Listen("unix", back)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeIncusd{release: make(chan struct{})}
	srv := &http.Server{Handler: f}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return startProxy(t, faultproxy.Unix(filepath.Join(dir, "proxy.sock")), faultproxy.Unix(back), nil), f
}

func incusClient(t *testing.T, socket string) *incus.Client {
	c, err := incus.NewClient(incus.ClientConfig{Socket: socket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// CHS-2: unix socket to unix socket, as in front of incusd: our incus
// client works through it, long operation waits included; a status fault
// in incusd's JSON shape is an *incus.APIError with its code and message.
func TestUnixProxyIncusClient(t *testing.T) {
	p, f := unixProxy(t)
	c := incusClient(t, p.Addr())
	if info, err := c.Server(bg); err != nil || info.Auth != "trusted" {
		t.Fatalf("GET /1.0 through the proxy: %+v, %v", info, err)
	}

	mustArm(t, p, faultproxy.IncusError(500, "database is locked").Times(1).On(http.MethodGet, "/1.0"))
	_, err := c.Server(bg)
	var ae *incus.APIError
	if !errors.As(err, &ae) || ae.Status != 500 || ae.Message != "database is locked" {
		t.Fatalf("with the fault: %v, want incus APIError 500 \"database is locked\"", err)
	}
	if _, err := c.Server(bg); err != nil {
		t.Fatalf("after the fault: %v", err)
	}

	// A long wait passes through and ends when the operation does.
	done := make(chan error, 1)
	go func() {
		_, err := c.Wait(bg, "/1.0/operations/op1", "test op")
		done <- err
	}()
	eventually(t, "waiting on the operation", func() bool { return f.waits.Load() == 1 })
	close(f.release)
	if err := <-done; err != nil {
		t.Fatalf("operation wait through the proxy: %v", err)
	}
}

// CHS-2: on a unix socket, down leaves the socket file and refuses
// connections (as a crashed incusd does): our client reports incusd
// unreachable, naming the socket; a wait in flight is cut. Reset on a unix
// socket (which has no TCP reset) is an early EOF.
func TestUnixProxyDownAndReset(t *testing.T) {
	p, f := unixProxy(t)
	c := incusClient(t, p.Addr())
	waitErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		_, err := c.Wait(ctx, "/1.0/operations/op1", "test op")
		waitErr <- err
	}()
	eventually(t, "waiting on the operation", func() bool { return f.waits.Load() == 1 })

	id := mustArm(t, p, faultproxy.DownFault(0))
	var ue *incus.UnreachableError
	if err := <-waitErr; !errors.As(err, &ue) {
		t.Fatalf("a wait in flight when incusd goes down: %v, want UnreachableError", err)
	}
	if _, err := os.Stat(p.Addr()); err != nil {
		t.Fatalf("the socket file is gone while down: %v", err)
	}
	_, err := c.Server(bg)
	if !errors.As(err, &ue) || !errors.Is(err, syscall.ECONNREFUSED) || ue.Where != p.Addr() {
		t.Fatalf("while down: %v, want UnreachableError on %s, connection refused", err, p.Addr())
	}
	p.Disarm(id)
	if _, err := c.Server(bg); err != nil {
		t.Fatalf("after down: %v", err)
	}

	mustArm(t, p, faultproxy.ResetFault(0).Times(1).On(http.MethodGet, "/1.0"))
	_, err = c.Server(bg)
	if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		t.Fatalf("reset on a unix socket: %v, want an early EOF", err)
	}
}

// CHS-2, DRV-5: against the real incusd (when its socket answers) our
// driver sees a proxied 500 on a list as a transient error, reads one
// instance again through a 500 (incusd answers 500 while it settles a
// stopped container), and takes a slow API as slow, not failed. Read-only:
// it lists and inspects, nothing else.
func TestRealIncusdThroughProxy(t *testing.T) {
	c0, err := incus.NewClient(incus.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c0.Server(bg)
	c0.Close()
	drivertest.Need(t, "incus", err == nil, "incusd not answering on "+incus.DefaultSocket+" (bash drivers/incus/setup.sh)")

	dir := shortTemp(t)
	p := startProxy(t, faultproxy.Unix(filepath.Join(dir, "incus.sock")), faultproxy.Unix(incus.DefaultSocket), nil)
	d, err := incus.New(incus.Options{Socket: p.Addr()})
	if err != nil {
		t.Fatalf("driver through the proxy: %v", err)
	}
	defer d.Close()
	if _, err := d.List(bg, nil); err != nil {
		t.Fatalf("list through the proxy: %v", err)
	}
	mustArm(t, p, faultproxy.IncusError(500, "injected by faultproxy").Times(1).On(http.MethodGet, "/1.0/instances"))
	_, err = d.List(bg, nil)
	var ae *incus.APIError
	if !errors.Is(err, drivers.ErrTransient) || !errors.As(err, &ae) || ae.Message != "injected by faultproxy" {
		t.Fatalf("list with a 500 from incusd: %v, want a transient driver error carrying incusd's message", err)
	}
	mustArm(t, p, faultproxy.IncusError(500, "injected by faultproxy").Times(2).On(http.MethodGet, "/1.0/instances/faultproxy-none"))
	_, err = d.Inspect(bg, "faultproxy-none")
	if !errors.Is(err, drivers.ErrNotFound) {
		t.Fatalf("inspect through two 500s: %v, want not found (read again past the 500s)", err)
	}
	mustArm(t, p, faultproxy.LatencyFault(200*time.Millisecond).Times(1))
	if _, err := d.List(bg, nil); err != nil {
		t.Fatalf("list through a slow API: %v", err)
	}
	if st := p.Stats(); st.Applied[faultproxy.Status] != 3 || st.Applied[faultproxy.Latency] != 1 {
		t.Errorf("stats %+v", st)
	}
}
