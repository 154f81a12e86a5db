package edge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/engenho/engenho/actors/host"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/rs/zerolog"
)

// Defaults.
const (
	DefaultMaxHeaderBytes = 64 << 10
	DefaultMaxBodyBytes   = 64 << 20
	DefaultRetryAfter     = 5 * time.Second // ACT-3
	// DefaultReadHeaderTimeout bounds a client sending its headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes idle keep-alive connections.
	DefaultIdleTimeout = 2 * time.Minute
)

// Options configure an Edge.
type Options struct {
	Table *Table
	// Board is read for the replicas of non-hibernating services.
	Board *supervise.Board
	Clock clock.Clock
	Log   zerolog.Logger
	// MaxHeaderBytes bounds a request's headers (SEC-4).
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request's body (SEC-4); a larger body gets 413.
	MaxBodyBytes int64
	// Transport reaches the backends; default a plain HTTP transport.
	Transport http.RoundTripper
}

// Edge is the HTTP edge. It is an http.Handler; Serve runs it on a
// listener.
type Edge struct {
	opts  Options
	board atomic.Pointer[supervise.Board]
	proxy *httputil.ReverseProxy
	srv   *http.Server
	rr    atomic.Uint64
	boxes atomic.Uint64
}

type targetKey struct{}

// New returns an edge over opts.Table.
func New(opts Options) *Edge {
	if opts.Table == nil {
		opts.Table = NewTable()
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Transport == nil {
		opts.Transport = &http.Transport{
			Proxy:               nil, // backends are local: never through a proxy
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	e := &Edge{opts: opts}
	if opts.Board != nil {
		e.board.Store(opts.Board)
	}
	e.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = pr.In.Context().Value(targetKey{}).(string)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport:     opts.Transport,
		FlushInterval: -1, // stream: server-sent events and long polls pass at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			e.opts.Log.Debug().Err(err).Str("host", r.Host).Msg("edge: backend failed")
			http.Error(w, "bad gateway", http.StatusBadGateway)
		},
		ErrorLog: nil,
	}
	e.srv = &http.Server{
		Handler:           e,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
	}
	return e
}

// SetBoard points the edge at the status board of the runtime that runs
// now (a runtime restart makes a new board); nil while none runs.
func (e *Edge) SetBoard(b *supervise.Board) { e.board.Store(b) }

// Table is the edge's routing table.
func (e *Edge) Table() *Table { return e.opts.Table }

// Listen opens the edge's listener on addr (host:port).
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("edge: listen %s: %w", addr, err)
	}
	return l, nil
}

// Serve answers requests on l until Shutdown; it returns nil after a
// Shutdown.
func (e *Edge) Serve(l net.Listener) error {
	if err := e.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("edge: %w", err)
	}
	return nil
}

// Shutdown stops accepting, lets requests in flight finish until ctx ends,
// then closes what is left (upgraded connections are closed at once).
func (e *Edge) Shutdown(ctx context.Context) error {
	err := e.srv.Shutdown(ctx)
	if err != nil {
		e.srv.Close()
	}
	return err
}

// ServeHTTP routes one request by its Host (ACT-1).
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, ok := CanonicalHost(r.Host)
	if !ok {
		http.Error(w, "unknown host", http.StatusNotFound)
		return
	}
	if r.ContentLength > e.opts.MaxBodyBytes {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, e.opts.MaxBodyBytes)
	sidecar := r.Header.Get(messages.SidecarHeader) != ""
	r.Header.Del(messages.SidecarHeader)
	hr, sr, kind := e.opts.Table.lookup(host)
	switch kind {
	case routeHost:
		e.serveHost(w, r, hr, sidecar)
	case routeService:
		e.serveService(w, r, sr)
	default:
		http.Error(w, "unknown host", http.StatusNotFound)
	}
}

// serveHost proxies to an awake host, waking it first when it sleeps
// (ACT-3, ACT-7).
func (e *Edge) serveHost(w http.ResponseWriter, r *http.Request, route host.Route, sidecar bool) {
	if sidecar {
		// Never activity, never a wake (ACT-7).
		if addr, ok := route.Gate.Peek(e.opts.Clock.Now()); ok {
			e.forward(w, r, addr)
			return
		}
		unavailable(w, DefaultRetryAfter, "host is asleep")
		return
	}
	if route.PID == nil && route.Status.State == messages.HostRestarting {
		unavailable(w, route.Status.NextAttempt.Sub(e.opts.Clock.Now()), "host is restarting; try again")
		return
	}
	wait := route.WakeTimeout
	if wait <= 0 {
		wait = messages.DefaultWakeTimeout
	}
	deadline := e.opts.Clock.NewTimer(wait)
	defer deadline.Stop()
	for {
		if addr, ok := route.Gate.Enter(e.opts.Clock.Now()); ok {
			e.forwardCounted(w, r, route.Gate, addr)
			return
		}
		res, ok := e.wake(r.Context(), route, deadline)
		if !ok {
			unavailable(w, DefaultRetryAfter, "host is waking; try again")
			return
		}
		if !res.OK {
			status := res.Status
			if status == 0 {
				status = http.StatusServiceUnavailable
			}
			retry := res.RetryAfter
			if retry <= 0 {
				retry = DefaultRetryAfter
			}
			w.Header().Set("Retry-After", retryAfter(retry))
			http.Error(w, "host unavailable: "+res.Err, status)
			return
		}
		// Awake: enter the gate (a fresh route may carry a new gate).
		if fresh, ok := e.opts.Table.Host(route.Host); ok {
			route = fresh
		}
	}
}

// forwardCounted proxies a request admitted by the gate and leaves it once
// the exchange has ended, upgraded connections included.
func (e *Edge) forwardCounted(w http.ResponseWriter, r *http.Request, g *host.Gate, addr string) {
	defer func() { g.Leave(e.opts.Clock.Now(), true) }()
	e.forward(w, r, addr)
}

func (e *Edge) forward(w http.ResponseWriter, r *http.Request, addr string) {
	r = r.WithContext(context.WithValue(r.Context(), targetKey{}, addr))
	e.proxy.ServeHTTP(w, r)
}

// wake asks the host actor to wake and waits for its answer until the
// deadline or the client gives up. ok is false when no answer came.
func (e *Edge) wake(ctx context.Context, route host.Route, deadline clock.Timer) (messages.HostWakeResult, bool) {
	if route.Engine == nil || route.PID == nil {
		return messages.HostWakeResult{}, false
	}
	box := newAnswerBox(route.Engine, e.boxes.Add(1))
	route.Engine.SpawnProc(box)
	defer route.Engine.Registry.Remove(box.pid)
	route.Engine.SendWithSender(route.PID, messages.HostWake{Host: route.Host, Reason: messages.WakeRequest}, box.pid)
	select {
	case res := <-box.ch:
		return res, true
	case <-deadline.C():
	case <-ctx.Done():
	}
	return messages.HostWakeResult{}, false
}

// serveService proxies to one in-rotation replica of a non-hibernating
// service, round robin, read from the board's snapshot.
func (e *Edge) serveService(w http.ResponseWriter, r *http.Request, route ServiceRoute) {
	var addrs []string
	if board := e.board.Load(); board != nil {
		if st, ok := board.Service(route.Stack, route.Service); ok {
			for _, rep := range st.Replicas {
				if a := rep.Addresses[route.Port]; rep.InRotation && a != "" {
					addrs = append(addrs, a)
				}
			}
		}
	}
	if len(addrs) == 0 {
		unavailable(w, DefaultRetryAfter, "no replica in rotation")
		return
	}
	e.forward(w, r, addrs[e.rr.Add(1)%uint64(len(addrs))])
}

func unavailable(w http.ResponseWriter, retry time.Duration, msg string) {
	w.Header().Set("Retry-After", retryAfter(retry))
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// retryAfter renders a Retry-After value in whole seconds, rounded up.
func retryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
