package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers/clock"
)

// Endpoint is where the proxy listens or forwards to: a TCP address or a
// unix socket path.
type Endpoint struct {
	Network string // "tcp" or "unix"
	Address string
}

// TCP is a TCP address ("127.0.0.1:0" picks a free port).
func TCP(addr string) Endpoint { return Endpoint{Network: "tcp", Address: addr} }

// Unix is a unix socket path.
func Unix(path string) Endpoint { return Endpoint{Network: "unix", Address: path} }

func (e Endpoint) String() string { return e.Network + ":" + e.Address }

func (e Endpoint) check() error {
	if (e.Network != "tcp" && e.Network != "unix") || e.Address == "" {
		return fmt.Errorf("endpoint %q: want tcp:HOST:PORT or unix:PATH", e.String())
	}
	return nil
}

// Config configures a Proxy.
type Config struct {
	Listen Endpoint
	Target Endpoint
	// Clock times Latency delays and For windows (clock.New()).
	Clock clock.Clock
	// Logger receives faults armed, ended and applied (none when nil).
	Logger *zerolog.Logger
}

// Stats are the proxy's counters since Start.
type Stats struct {
	// Requests is every request received; Forwarded those sent on to the
	// target; UpstreamErrors those the target did not answer (the proxy
	// answered 502).
	Requests, Forwarded, UpstreamErrors int64
	// Applied counts, per kind, the requests a fault acted on; for Down
	// the windows begun.
	Applied map[Kind]int64
	// Cut counts connections the proxy cut (reset, down, blackhole).
	Cut int64
}

// Armed is one armed fault as Armed lists it.
type Armed struct {
	ID    int
	Fault Fault
	// Hits is how many requests it acted on so far (Down: 1 once begun).
	Hits int
	// Until is when a For window ends (zero: no window).
	Until time.Time
}

// Proxy is a running fault proxy. Safe for concurrent use.
type Proxy struct {
	cfg   Config
	clock clock.Clock
	log   zerolog.Logger
	srv   *http.Server
	rp    *httputil.ReverseProxy
	tr    *http.Transport
	addr  string // the address actually listened on

	mu     sync.Mutex
	ln     net.Listener // nil while down
	faults []*armed     // in arm order
	nextID int
	stats  Stats
	conns  map[*trackedConn]struct{}
	closed bool
	quit   chan struct{} // closed by Close
	serves sync.WaitGroup
}

// armed is one armed fault and its state.
type armed struct {
	id    int
	f     Fault
	left  int // requests left when f.Count > 0
	hits  int
	until time.Time
	timer clock.Timer
	done  chan struct{} // closed when disarmed
}

// Start listens on cfg.Listen and serves until Close.
func Start(cfg Config) (*Proxy, error) {
	if err := cfg.Listen.check(); err != nil {
		return nil, fmt.Errorf("faultproxy listen: %w", err)
	}
	if err := cfg.Target.check(); err != nil {
		return nil, fmt.Errorf("faultproxy target: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	p := &Proxy{cfg: cfg, clock: cfg.Clock, log: zerolog.Nop(), conns: map[*trackedConn]struct{}{}, quit: make(chan struct{})}
	if cfg.Logger != nil {
		p.log = cfg.Logger.With().Str("component", "faultproxy").Str("listen", cfg.Listen.String()).Logger()
	}
	target := cfg.Target
	p.tr = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, target.Network, target.Address)
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		// Bodies pass as they are: no transparent gzip.
		DisableCompression: true,
	}
	upstreamHost := target.Address
	if target.Network == "unix" {
		upstreamHost = "unix-target"
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Only where to connect changes: the Host header stays the
			// client's, since S3's SigV4 signs it.
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", upstreamHost
		},
		Transport:     p.tr,
		FlushInterval: -1, // stream: long-polls and byte positions of cuts
		ErrorHandler:  p.upstreamError,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	ln, err := p.listen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.ln = ln
	p.serve(ln)
	return p, nil
}

// Addr is the address the proxy listens on: HOST:PORT (the port chosen
// when Listen asked for 0) or the socket path.
func (p *Proxy) Addr() string { return p.addr }

// URL is http://HOST:PORT for a TCP proxy (an S3 endpoint), "" for a unix
// socket.
func (p *Proxy) URL() string {
	if p.cfg.Listen.Network != "tcp" {
		return ""
	}
	return "http://" + p.addr
}

// Close stops the proxy: every fault is disarmed, every connection cut,
// the socket file (if any) removed.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.quit)
	for _, a := range p.faults {
		p.endLocked(a)
	}
	p.faults = nil
	ln := p.ln
	p.ln = nil
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, c := range conns {
		c.abort()
	}
	_ = p.srv.Close() // its listener is closed already: the error says so
	p.serves.Wait()
	p.tr.CloseIdleConnections()
	if p.cfg.Listen.Network == "unix" {
		os.Remove(p.addr)
	}
	return nil
}

// Arm arms f and returns its id (for Disarm).
func (p *Proxy) Arm(f Fault) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, errors.New("faultproxy: closed")
	}
	p.nextID++
	a := &armed{id: p.nextID, f: f, left: f.Count, done: make(chan struct{})}
	if f.For > 0 {
		a.until = p.clock.Now().Add(f.For)
		id := a.id
		a.timer = p.clock.AfterFunc(f.For, func() { p.Disarm(id) })
	}
	wasDown := p.isDownLocked()
	p.faults = append(p.faults, a)
	var ln net.Listener
	var conns []*trackedConn
	if f.Kind == Down {
		a.hits = 1
		p.stats.Applied = bump(p.stats.Applied, Down)
		if !wasDown {
			ln, p.ln = p.ln, nil
			conns = p.takeConnsLocked()
		}
	}
	p.mu.Unlock()
	p.log.Info().Str("fault", f.String()).Int("id", a.id).Msg("armed")
	if ln != nil {
		ln.Close() // a unix socket's file stays: clients get "connection refused"
	}
	p.cut(conns)
	return a.id, nil
}

// Disarm ends the fault id; it reports whether it was still armed. Ending
// the last Down listens again on the same address; ending a Blackhole cuts
// the requests it held.
func (p *Proxy) Disarm(id int) bool {
	p.mu.Lock()
	var a *armed
	for i, x := range p.faults {
		if x.id == id {
			a = x
			p.faults = append(p.faults[:i:i], p.faults[i+1:]...)
			break
		}
	}
	if a == nil {
		p.mu.Unlock()
		return false
	}
	p.endLocked(a)
	relisten := a.f.Kind == Down && !p.isDownLocked() && !p.closed
	p.mu.Unlock()
	p.log.Info().Str("fault", a.f.String()).Int("id", id).Int("hits", a.hits).Msg("ended")
	if relisten {
		p.up()
	}
	return true
}

// Clear disarms every fault.
func (p *Proxy) Clear() {
	for _, a := range p.Armed() {
		p.Disarm(a.ID)
	}
}

// Armed lists the armed faults in arm order.
func (p *Proxy) Armed() []Armed {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Armed, 0, len(p.faults))
	for _, a := range p.faults {
		out = append(out, Armed{ID: a.id, Fault: a.f, Hits: a.hits, Until: a.until})
	}
	return out
}

// Stats returns a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Applied = map[Kind]int64{}
	for k, v := range p.stats.Applied {
		s.Applied[k] = v
	}
	return s
}

// Down reports whether the proxy is refusing connections.
func (p *Proxy) Down() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isDownLocked()
}

func bump(m map[Kind]int64, k Kind) map[Kind]int64 {
	if m == nil {
		m = map[Kind]int64{}
	}
	m[k]++
	return m
}

func (p *Proxy) endLocked(a *armed) {
	if a.timer != nil {
		a.timer.Stop()
	}
	close(a.done)
}

func (p *Proxy) isDownLocked() bool {
	for _, a := range p.faults {
		if a.f.Kind == Down {
			return true
		}
	}
	return false
}

// listen opens the listener. A unix socket file left by a dead server is
// replaced; one that answers is not.
func (p *Proxy) listen(e Endpoint) (net.Listener, error) {
	if e.Network == "unix" {
		if c, err := net.Dial("unix", e.Address); err == nil {
			c.Close()
			return nil, fmt.Errorf("faultproxy: %s is in use by a live server", e.Address)
		}
		if err := os.Remove(e.Address); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("faultproxy: removing stale socket: %w", err)
		}
	}
	ln, err := net.Listen(e.Network, e.Address)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening on %s: %w", e, err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		// While down the file stays, so a client gets "connection
		// refused" as from a crashed server, not "no such file".
		ul.SetUnlinkOnClose(false)
	}
	return &trackingListener{Listener: ln, p: p}, nil
}

func (p *Proxy) serve(ln net.Listener) {
	p.serves.Add(1)
	go func() {
		defer p.serves.Done()
		_ = p.srv.Serve(ln)
	}()
}

// up listens again after a Down, on the address it had. The port may be
// taken for a moment (a client's outgoing connection can hold it): after a
// first try here, it goes on trying in the background for 10s.
func (p *Proxy) up() {
	if p.relisten() == nil {
		return
	}
	go func() {
		for try := 0; try < 100; try++ {
			t := p.clock.NewTimer(100 * time.Millisecond)
			select {
			case <-t.C():
			case <-p.quit:
				t.Stop()
				return
			}
			if p.relisten() == nil {
				return
			}
		}
		p.log.Error().Msg("could not listen again after down; the proxy stays down")
	}()
}

// relisten opens the listener again unless the proxy closed or went down
// again meanwhile.
func (p *Proxy) relisten() error {
	ln, err := p.listen(Endpoint{Network: p.cfg.Listen.Network, Address: p.addr})
	if err != nil {
		p.log.Warn().Err(err).Msg("listening again after down")
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.isDownLocked() {
		ln.Close()
		return nil
	}
	p.ln = ln
	p.serve(ln)
	p.log.Info().Msg("listening again")
	return nil
}

// trackingListener records each accepted connection so Down and Close can
// cut it.
type trackingListener struct {
	net.Listener
	p *Proxy
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, p: l.p}
	l.p.mu.Lock()
	if l.p.closed {
		l.p.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	l.p.conns[tc] = struct{}{}
	l.p.mu.Unlock()
	return tc, nil
}

// trackedConn is an accepted connection.
type trackedConn struct {
	net.Conn
	p    *Proxy
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
	return c.Conn.Close()
}

// abort cuts the connection: a TCP reset (no lingering, so the kernel
// sends RST), or on a unix socket a close (unix sockets have no reset; the
// peer reads an early EOF).
func (c *trackedConn) abort() {
	c.once.Do(func() {
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	})
}

func (p *Proxy) takeConnsLocked() []*trackedConn {
	out := make([]*trackedConn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

// cut counts conns, then aborts them.
func (p *Proxy) cut(conns []*trackedConn) {
	if len(conns) == 0 {
		return
	}
	p.mu.Lock()
	p.stats.Cut += int64(len(conns))
	p.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
}

// upstreamError answers 502 when the target could not be reached or
// failed mid-answer.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client left
	}
	p.mu.Lock()
	p.stats.UpstreamErrors++
	p.mu.Unlock()
	p.log.Debug().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("target did not answer")
	w.WriteHeader(http.StatusBadGateway)
}
