package balancer

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// httpBackend is an HTTP server answering every request with its id.
type httpBackend struct {
	id   string
	addr string
	srv  *http.Server
	done chan struct{}
	hits atomic.Int64
}

func startHTTPBackend(t *testing.T, id string) *httpBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &httpBackend{id: id, addr: ln.Addr().String(), done: make(chan struct{})}
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		io.WriteString(w, id)
	})}
	go func() {
		defer close(h.done)
		h.srv.Serve(ln)
	}()
	t.Cleanup(func() { h.srv.Close(); <-h.done })
	return h
}

func (h *httpBackend) Backend() Backend { return Backend{ID: h.id, Addr: h.addr} }

// stop shuts the server down gracefully, as a replica stopped with a grace
// period would: idle connections close, active requests finish.
func (h *httpBackend) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown %s: %v", h.id, err)
	}
	<-h.done
}

// load runs clients GETs in a loop until stopped, counting results.
type load struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startLoad(url string, clients int, keepAlive bool) *load {
	l := &load{stop: make(chan struct{})}
	for range clients {
		tr := &http.Transport{DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 1}
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer tr.CloseIdleConnections()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.one(c, url)
			}
		}()
	}
	return l
}

func (l *load) one(c *http.Client, url string) {
	resp, err := c.Get(url)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %s", resp.Status)
		}
	}
	if err != nil {
		l.failed.Add(1)
		l.firstErr.CompareAndSwap(nil, err.Error())
		return
	}
	l.ok.Add(1)
}

func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// waitProgress waits until n more requests have succeeded.
func (l *load) waitProgress(t *testing.T, n int64) {
	t.Helper()
	target := l.ok.Load() + n
	waitFor(t, "load progress", func() bool { return l.ok.Load() >= target || l.failed.Load() > 0 })
}

// SVC-16 SVC-22: backends replaced one by one under continuous HTTP load
// cost zero failed requests. Each replacement is start-first, as a rollout
// does it: the new backend joins the rotation, the old one is drained, then
// stopped gracefully. Without keep-alive every connection ends by itself
// and the drain completes naturally; with keep-alive the idle connections
// outlive the drain, are closed at its timeout, and the client retries its
// idempotent request on a fresh connection, which the balancer sends to an
// in-rotation backend.
func TestZeroFailedRequestsWhileSwappingBackends(t *testing.T) {
	for _, keepAlive := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepalive=%v", keepAlive), func(t *testing.T) {
			b, fake, addr := newTestBalancer(t)
			slots := []*httpBackend{startHTTPBackend(t, "r1-0"), startHTTPBackend(t, "r2-0")}
			rotate := func(extra ...*httpBackend) {
				var list []Backend
				for _, h := range append(slots, extra...) {
					list = append(list, h.Backend())
				}
				if err := b.SetBackends("p", list); err != nil {
					t.Fatal(err)
				}
			}
			rotate()
			l := startLoad("http://"+addr+"/", 4, keepAlive)
			l.waitProgress(t, 50)
			for round := 1; round <= 3; round++ {
				for slot, old := range slots {
					fresh := startHTTPBackend(t, fmt.Sprintf("r%d-%d", slot+1, round))
					rotate(fresh) // both serve
					l.waitProgress(t, 20)
					drained := b.Drain("p", old.id, 0)
					if keepAlive {
						fake.Advance(DefaultDrainTimeout)
					}
					waitChan(t, "the drain of "+old.id, drained)
					old.stop(t)
					slots[slot] = fresh
					rotate()
					l.waitProgress(t, 20)
					// Keep-alive clients stay where they are, so only
					// short connections must reach every new backend.
					if !keepAlive && fresh.hits.Load() == 0 {
						t.Fatalf("new backend %s got no request", fresh.id)
					}
				}
			}
			l.waitProgress(t, 50) // served by the last generation alone
			l.finish()
			if n := l.failed.Load(); n != 0 {
				t.Fatalf("%d of %d requests failed while swapping; first: %v", n, n+l.ok.Load(), l.firstErr.Load())
			}
			s, _ := b.Stats("p")
			t.Logf("keepalive=%v: %d requests ok, 0 failed, %d connections accepted", keepAlive, l.ok.Load(), s.Accepted)
			if s.Failed != 0 {
				t.Fatalf("balancer counted %d failed connections", s.Failed)
			}
		})
	}
}
