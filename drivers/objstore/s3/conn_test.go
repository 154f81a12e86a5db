package s3_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/s3"
	"github.com/engenho/engenho/drivers/objstore/s3/s3test"
)

func storeAt(t *testing.T, endpoint string, tune func(*s3.Config)) *s3.Store {
	t.Helper()
	cfg := s3.Config{Endpoint: endpoint, Bucket: "bucket", PathStyle: true, AccessKey: "a", SecretKey: "s"}
	if tune != nil {
		tune(&cfg)
	}
	store, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// within runs fn and fails the test if it has not returned within a
// minute (the calls below must end on their own timeouts, not hang).
func within(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s still waiting after a minute: the store hangs", what)
		return nil
	}
}

// DRV-18: a download cut short (the server closes cleanly before the
// Content-Length it announced) is a transient error naming the key, never
// a short object.
func TestDRV18ShortBodyIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Header().Set("ETag", `"e"`)
		w.Write([]byte(strings.Repeat("x", 500)))
		w.(http.Flusher).Flush()
		c, _, _ := http.NewResponseController(w).Hijack()
		c.Close()
	}))
	defer srv.Close()
	store := storeAt(t, srv.URL, nil)
	obj, err := store.Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if !errors.Is(err, objstore.ErrTransient) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "k") {
		t.Fatalf("reading a body cut at 500 of 1000 bytes: %v, want a transient error naming the key", err)
	}
	if len(data) != 500 {
		t.Fatalf("read %d bytes", len(data))
	}
}

// DRV-18: a server that accepts and never answers fails each attempt
// after IOTimeout, the SDK tries again, and a call without a deadline of
// its own ends with a transient error rather than waiting forever.
func TestDRV18SilentServerTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go io.Copy(io.Discard, c) // reads, never answers
		}
	}()
	store := storeAt(t, "http://"+ln.Addr().String(), func(c *s3.Config) { c.IOTimeout = 200 * time.Millisecond; c.MaxAttempts = 2 })
	err = within(t, "a put to a silent server", func() error {
		_, err := store.Put(context.Background(), "k", strings.NewReader("v"), objstore.CreateOnly())
		return err
	})
	var ne net.Error
	if !errors.Is(err, objstore.ErrTransient) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("put to a silent server: %v, want a transient timeout", err)
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("%d connections for 2 attempts: the timeout was not retried", n)
	}
}

// DRV-18: a body that stalls half way fails the read after IOTimeout.
func TestDRV18StalledBodyTimesOut(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte(strings.Repeat("x", 500)))
		w.(http.Flusher).Flush()
		<-stop
	}))
	defer srv.Close()
	defer close(stop)
	store := storeAt(t, srv.URL, func(c *s3.Config) { c.IOTimeout = 200 * time.Millisecond })
	obj, err := store.Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	err = within(t, "reading a stalled body", func() error {
		_, err := io.ReadAll(obj.Body)
		return err
	})
	var ne net.Error
	if !errors.Is(err, objstore.ErrTransient) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("reading a stalled body: %v, want a transient timeout", err)
	}
}

// DRV-18: the I/O timeout bounds waits, not work: a connection left idle
// longer than it is dropped and the next call dials again, and a body that
// trickles in for longer than the timeout, never pausing that long, is read
// whole.
func TestDRV18IdleConnectionsAndLongTransfers(t *testing.T) {
	store := s3test.Fake(t, func(c *s3.Config) { c.IOTimeout = 100 * time.Millisecond })
	ctx := context.Background()
	if _, err := store.Put(ctx, "a", strings.NewReader("1"), objstore.Always); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // idle past the timeout
	if _, err := store.Put(ctx, "a", strings.NewReader("2"), objstore.Always); err != nil {
		t.Fatalf("a put after the idle connection timed out: %v", err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10000")
		for range 100 {
			w.Write([]byte(strings.Repeat("x", 100)))
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	}))
	defer srv.Close()
	slow := storeAt(t, srv.URL, func(c *s3.Config) { c.IOTimeout = time.Second })
	obj, err := slow.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if err != nil || len(data) != 10000 {
		t.Fatalf("a 2s trickle under a 1s I/O timeout: %d bytes, %v", len(data), err)
	}
}
