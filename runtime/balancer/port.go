package balancer

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers/clock"
)

// port is one published listen address and its backends. Every field
// below mu is guarded by it; no lock is held across a dial or a copy.
type port struct {
	name string
	addr string // as asked for; ln.Addr() is the bound one
	ln   net.Listener
	opts Options

	ctx    context.Context // canceled by close: aborts dials in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every connection

	mu       sync.Mutex
	closed   bool
	rotation []*backend // in SetBackends order
	draining []*backend
	cursor   int // where the next round-robin tie-break starts
	accepted uint64
	failed   uint64
	active   int
	rate     rateWindow
}

// backend is one backend of a port, in rotation or draining. A backend
// that leaves the rotation stays the same object while it drains. If its
// id comes back with the same address before its connections are cut and
// before anyone asked for its drain (Drain), the same object returns to
// the rotation with its connections and counts; otherwise a new object
// joins the rotation.
type backend struct {
	id, addr     string
	active       int // connections open or being dialed
	accepted     uint64
	dialFailures uint64
	suspectUntil time.Time
	conns        map[*link]struct{}
	drain        *drainState // nil while in rotation
}

type drainState struct {
	done      chan struct{}
	timer     clock.Timer
	started   time.Time
	deadline  time.Time // when the timer forces it
	requested bool      // Drain asked for it: the backend never comes back
	forced    bool      // the timeout passed: connections are being closed
	over      bool      // done is closed
}

// link is one proxied connection: client side and backend side.
type link struct {
	client, server net.Conn
}

func (l *link) close() {
	l.client.Close()
	l.server.Close()
}

func newPort(name, addr string, ln net.Listener, opts Options) *port {
	ctx, cancel := context.WithCancel(context.Background())
	return &port{name: name, addr: addr, ln: ln, opts: opts, ctx: ctx, cancel: cancel}
}

func (p *port) start() {
	p.wg.Add(1)
	go p.acceptLoop()
}

// close stops accepting, aborts dials, closes every connection and waits
// for every goroutine of the port.
func (p *port) close() {
	p.mu.Lock()
	p.closed = true
	var links []*link
	for _, b := range append(append([]*backend{}, p.rotation...), p.draining...) {
		for l := range b.conns {
			links = append(links, l)
		}
	}
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
}

func (p *port) acceptLoop() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errorsIsClosed(err) || p.ctx.Err() != nil {
				return
			}
			// Out of file descriptors and the like: back off, as net/http
			// does, instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.opts.Logger.Warn().Err(err).Str("port", p.name).Dur("retry_in", backoff).Msg("balancer accept failed")
			if !p.sleep(backoff) {
				return
			}
			continue
		}
		backoff = 0
		p.wg.Add(1)
		go p.serve(c)
	}
}

// sleep waits d on the clock; false if the port closed meanwhile.
func (p *port) sleep(d time.Duration) bool {
	t := p.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-p.ctx.Done():
		return false
	}
}

// serve forwards one client connection: pick, dial (failing over to the
// next best backend), proxy, account.
func (p *port) serve(client net.Conn) {
	defer p.wg.Done()
	defer client.Close()
	p.noteAccepted()
	defer p.noteEnded()

	var tried []*backend
	for {
		b := p.pick(tried)
		if b == nil {
			p.noteFailed(len(tried))
			return
		}
		server, err := p.dial(b.addr)
		if err != nil {
			p.dialFailed(b, err)
			tried = append(tried, b)
			continue
		}
		l := &link{client: client, server: server}
		p.attach(b, l)
		proxy(client, server)
		p.detach(b, l)
		return
	}
}

func (p *port) dial(addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	t := p.opts.Clock.AfterFunc(p.opts.DialTimeout, cancel)
	defer t.Stop()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (p *port) noteAccepted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.accepted++
	p.active++
	p.rate.add(p.opts.Clock.Now())
}

func (p *port) noteEnded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active--
}

func (p *port) noteFailed(attempts int) {
	p.mu.Lock()
	p.failed++
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		p.opts.Logger.Warn().Str("port", p.name).Int("attempts", attempts).Msg("balancer: no backend reachable, client connection closed")
	}
}

// pick chooses the backend for a new connection among the rotation, minus
// those already tried for it, and counts the connection on it. Nil when
// none is left.
func (p *port) pick(tried []*backend) *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	i := choose(p.rotation, tried, p.cursor, p.opts.Clock.Now())
	if i < 0 {
		return nil
	}
	p.cursor = i + 1
	b := p.rotation[i]
	b.active++
	return b
}

// choose returns the index in rotation of the least-loaded backend not in
// tried, preferring backends that are not suspect; ties go to the first
// found from cursor on, so equal load spreads round-robin. -1 if none.
func choose(rotation, tried []*backend, cursor int, now time.Time) int {
	n := len(rotation)
	best, bestSuspect := -1, false
	for k := range n {
		i := (cursor + k) % n
		b := rotation[i]
		if contains(tried, b) {
			continue
		}
		suspect := now.Before(b.suspectUntil)
		if best < 0 || better(b, suspect, rotation[best], bestSuspect) {
			best, bestSuspect = i, suspect
		}
	}
	return best
}

func better(b *backend, suspect bool, than *backend, thanSuspect bool) bool {
	if suspect != thanSuspect {
		return !suspect
	}
	return b.active < than.active
}

func contains(list []*backend, b *backend) bool {
	for _, x := range list {
		if x == b {
			return true
		}
	}
	return false
}

func (p *port) dialFailed(b *backend, err error) {
	p.mu.Lock()
	b.dialFailures++
	b.suspectUntil = p.opts.Clock.Now().Add(p.opts.SuspectFor)
	p.release(b)
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		p.opts.Logger.Warn().Err(err).Str("port", p.name).Str("backend", b.id).Str("addr", b.addr).
			Msg("balancer: backend dial failed, trying the next")
	}
}

// attach records an established link. If the port closed or the backend's
// drain timed out during the dial, the link is closed straight away.
func (p *port) attach(b *backend, l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.conns == nil {
		b.conns = map[*link]struct{}{}
	}
	b.conns[l] = struct{}{}
	b.accepted++
	if p.closed || (b.drain != nil && b.drain.forced) {
		l.close()
	}
}

func (p *port) detach(b *backend, l *link) {
	l.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(b.conns, l)
	p.release(b)
}

// release uncounts one connection of b and completes its drain when it was
// the last. p.mu must be held.
func (p *port) release(b *backend) {
	b.active--
	if b.drain != nil && b.active == 0 {
		p.finishDrain(b)
	}
}

func (p *port) setBackends(list []Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.rotation
	next := make([]*backend, 0, len(list))
	for _, be := range list {
		b := find(old, be.ID)
		if b == nil || b.addr != be.Addr {
			b = p.revive(be)
		}
		next = append(next, b)
	}
	p.rotation = next
	for _, b := range old {
		if !contains(next, b) {
			p.startDrain(b, p.opts.DrainTimeout, false)
		}
	}
	if len(next) > 0 {
		p.cursor %= len(next)
	}
}

// revive returns the draining backend be names (same id and address), out
// of its drain, if nothing has settled that drain yet; else a new backend.
// p.mu must be held.
func (p *port) revive(be Backend) *backend {
	for _, b := range p.draining {
		d := b.drain
		if b.id != be.ID || b.addr != be.Addr || d.requested || d.forced {
			continue
		}
		if d.timer != nil {
			d.timer.Stop()
		}
		p.draining = remove(p.draining, b)
		b.drain = nil
		p.opts.Logger.Info().Str("port", p.name).Str("backend", b.id).Int("active", b.active).
			Msg("balancer: backend back in rotation, its drain stopped")
		return b
	}
	return &backend{id: be.ID, addr: be.Addr}
}

// drain takes every backend of id out of service: the one in rotation,
// if any, starts draining, and each drain of that id already running
// ends at timeout from its start. The channel closes when all of them are
// over.
func (p *port) drain(id string, timeout time.Duration) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := find(p.rotation, id); b != nil {
		p.rotation = remove(p.rotation, b)
		p.startDrain(b, timeout, true)
	}
	var pending []<-chan struct{}
	for _, b := range append([]*backend(nil), p.draining...) {
		if b.id == id {
			p.requestDrain(b, timeout)
			pending = append(pending, b.drain.done)
		}
	}
	return p.allDone(pending)
}

// requestDrain marks b's drain as asked for. The first request sets its
// timeout, counted from the drain's start, over the default of a drain
// that SetBackends began; a later request changes nothing. p.mu must be
// held.
func (p *port) requestDrain(b *backend, timeout time.Duration) {
	d := b.drain
	if d.requested {
		return
	}
	d.requested = true
	if d.over || d.forced {
		return
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	d.deadline = d.started.Add(timeout)
	left := d.deadline.Sub(p.opts.Clock.Now())
	if left <= 0 {
		p.forceDrainLocked(b)
		return
	}
	d.timer = p.opts.Clock.AfterFunc(left, func() { p.forceDrain(b, d) })
}

// allDone is a channel that closes once every channel of pending has.
// p.mu must be held.
func (p *port) allDone(pending []<-chan struct{}) <-chan struct{} {
	switch len(pending) {
	case 0:
		return closedChan()
	case 1:
		return pending[0]
	}
	all := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for _, c := range pending {
			<-c
		}
		close(all)
	}()
	return all
}

// startDrain moves b (already out of the rotation) to draining; requested
// says Drain asked for it (else SetBackends dropped it). p.mu must be
// held; timeout must be positive, so the clock never runs the callback
// inside AfterFunc.
func (p *port) startDrain(b *backend, timeout time.Duration, requested bool) <-chan struct{} {
	d := &drainState{done: make(chan struct{}), started: p.opts.Clock.Now(), requested: requested}
	b.drain = d
	p.draining = append(p.draining, b)
	p.opts.Logger.Info().Str("port", p.name).Str("backend", b.id).Int("active", b.active).
		Dur("timeout", timeout).Msg("balancer: draining backend")
	if b.active == 0 {
		p.finishDrain(b)
		return d.done
	}
	d.deadline = d.started.Add(timeout)
	d.timer = p.opts.Clock.AfterFunc(timeout, func() { p.forceDrain(b, d) })
	return d.done
}

// forceDrain closes b's connections when its drain timeout passes; the
// drain completes as their goroutines end. A timer of a drain that has since ended, been stopped by the backend's
// return, or been given a later deadline finds that and does nothing.
func (p *port) forceDrain(b *backend, d *drainState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.drain != d || p.opts.Clock.Now().Before(d.deadline) {
		return
	}
	p.forceDrainLocked(b)
}

// forceDrainLocked is forceDrain with p.mu held.
func (p *port) forceDrainLocked(b *backend) {
	if b.drain == nil || b.drain.over || b.drain.forced {
		return
	}
	b.drain.forced = true
	p.opts.Logger.Info().Str("port", p.name).Str("backend", b.id).Int("active", b.active).
		Msg("balancer: drain timeout, closing connections")
	for l := range b.conns {
		l.close()
	}
}

// finishDrain completes b's drain. p.mu must be held.
func (p *port) finishDrain(b *backend) {
	d := b.drain
	if d.over {
		return
	}
	d.over = true
	if d.timer != nil {
		d.timer.Stop()
	}
	p.draining = remove(p.draining, b)
	close(d.done)
}

func find(list []*backend, id string) *backend {
	for _, b := range list {
		if b.id == id {
			return b
		}
	}
	return nil
}

func remove(list []*backend, b *backend) []*backend {
	out := list[:0:0]
	for _, x := range list {
		if x != b {
			out = append(out, x)
		}
	}
	return out
}
