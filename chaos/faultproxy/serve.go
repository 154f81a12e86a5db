package faultproxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"
)

// errCut is what a write returns once the proxy has cut the connection;
// the reverse proxy then abandons the answer.
var errCut = errors.New("faultproxy: connection cut")

// plan is what the armed faults do to one request, decided when it
// arrives. Truncate is decided when the answer's headers are known.
type plan struct {
	delay  time.Duration
	status *Fault // answer this instead of forwarding
	reset  bool   // forward, then cut after resetAfter body bytes
	after  int64
}

// ServeHTTP applies the armed faults to one request and forwards it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.stats.Requests++
	p.mu.Unlock()
	if done, ok := p.blackholed(r, true); ok {
		p.hold(w, r, done)
		return
	}
	pl := p.plan(r)
	if pl.delay > 0 && !p.wait(r.Context(), pl.delay) {
		return
	}
	if f := pl.status; f != nil {
		for k, v := range f.Header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(f.Body)))
		w.WriteHeader(f.Code)
		_, _ = w.Write(f.Body)
		return
	}
	p.mu.Lock()
	p.stats.Forwarded++
	p.mu.Unlock()
	fw := &faultWriter{ResponseWriter: w, p: p, r: r, reset: pl.reset, after: pl.after}
	p.rp.ServeHTTP(fw, r)
	fw.finish()
}

// plan takes, in arm order, every matching Latency fault and the first
// matching Status or Reset fault, and counts them used.
func (p *Proxy) plan(r *http.Request) plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pl plan
	terminal := false
	for _, a := range p.faults {
		if !a.f.matches(r) {
			continue
		}
		switch a.f.Kind {
		case Latency:
			pl.delay += a.f.Delay
		case Status:
			if terminal {
				continue
			}
			terminal = true
			f := a.f
			pl.status = &f
		case Reset:
			if terminal {
				continue
			}
			terminal, pl.reset, pl.after = true, true, a.f.After
		default:
			continue
		}
		p.useLocked(a)
	}
	p.dropSpentLocked()
	return pl
}

// useLocked counts one use of a.
func (p *Proxy) useLocked(a *armed) {
	a.hits++
	p.stats.Applied = bump(p.stats.Applied, a.f.Kind)
	if a.f.Count > 0 {
		a.left--
	}
}

// dropSpentLocked disarms the faults whose count is used up.
func (p *Proxy) dropSpentLocked() {
	kept := p.faults[:0]
	for _, a := range p.faults {
		if a.f.Count > 0 && a.left <= 0 {
			p.endLocked(a)
			p.log.Info().Str("fault", a.f.String()).Int("id", a.id).Int("hits", a.hits).Msg("spent")
			continue
		}
		kept = append(kept, a)
	}
	clear(p.faults[len(kept):])
	p.faults = kept
}

// takeTruncate decides, once the answer's headers are known, whether a
// Truncate fault applies: to a GET answered 200 or 206 with a body of
// known length. It returns how many body bytes to keep.
func (p *Proxy) takeTruncate(r *http.Request, code int, h http.Header) (int64, bool) {
	if r.Method != http.MethodGet || (code != http.StatusOK && code != http.StatusPartialContent) {
		return 0, false
	}
	size, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil || size <= 0 {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.faults {
		if a.f.Kind != Truncate || !a.f.matches(r) {
			continue
		}
		keep := a.f.After
		if keep == Half {
			keep = size / 2
		}
		keep = min(keep, size-1)
		p.useLocked(a)
		p.dropSpentLocked()
		return keep, true
	}
	return 0, false
}

// blackholed returns the end of the first armed Blackhole matching r;
// count counts r as held by it.
func (p *Proxy) blackholed(r *http.Request, count bool) (<-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.faults {
		if a.f.Kind == Blackhole && a.f.matches(r) {
			if count {
				p.useLocked(a)
			}
			return a.done, true
		}
	}
	return nil, false
}

// hold never answers r: it waits until the blackhole ends, the client
// leaves or the proxy closes, then cuts the connection.
func (p *Proxy) hold(w http.ResponseWriter, r *http.Request, done <-chan struct{}) {
	select {
	case <-done:
	case <-r.Context().Done():
	case <-p.quit:
	}
	p.hijack(w, true)
}

// stall holds an answer already streaming while a blackhole matching its
// request lasts.
func (p *Proxy) stall(r *http.Request) error {
	for {
		done, ok := p.blackholed(r, false)
		if !ok {
			return nil
		}
		select {
		case <-done:
		case <-r.Context().Done():
			return r.Context().Err()
		case <-p.quit:
			return errCut
		}
	}
}

// wait waits d on the proxy's clock; false when the client left or the
// proxy closed first.
func (p *Proxy) wait(ctx context.Context, d time.Duration) bool {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	case <-p.quit:
		return false
	}
}

// hijack takes the connection from the HTTP server and ends it: a reset
// (abort) or a clean close.
func (p *Proxy) hijack(w http.ResponseWriter, abort bool) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	tc, ok := c.(*trackedConn)
	if !ok || !abort {
		c.Close()
		return
	}
	// Counted before the cut, so a client that sees it sees the count.
	p.mu.Lock()
	p.stats.Cut++
	p.mu.Unlock()
	tc.abort()
}

// faultWriter carries an answer from the target to the client and makes
// the cuts of Reset and Truncate at their byte; it stalls while a
// blackhole lasts.
type faultWriter struct {
	http.ResponseWriter
	p     *Proxy
	r     *http.Request
	reset bool  // a Reset was planned
	after int64 // its After
	// mode is Reset or Truncate once the headers decided a cut; keep is
	// the body bytes still to pass before it.
	mode        Kind
	keep        int64
	wroteHeader bool
	cut         bool
}

func (w *faultWriter) WriteHeader(code int) {
	if code < 200 { // 100 Continue and the like pass through
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.wroteHeader || w.cut {
		return
	}
	w.wroteHeader = true
	switch {
	case w.reset && w.after == BeforeHeaders:
		w.cut = true
		w.p.hijack(w.ResponseWriter, true)
		return
	case w.reset:
		w.mode, w.keep = Reset, w.after
	default:
		if keep, ok := w.p.takeTruncate(w.r, code, w.Header()); ok {
			w.mode, w.keep = Truncate, keep
		}
	}
	w.ResponseWriter.WriteHeader(code)
	if w.mode != "" && w.keep == 0 {
		w.cutNow()
	}
}

func (w *faultWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader && !w.cut {
		w.WriteHeader(http.StatusOK)
	}
	if w.cut {
		return 0, errCut
	}
	if err := w.p.stall(w.r); err != nil {
		return 0, err
	}
	if w.mode == "" {
		return w.ResponseWriter.Write(b)
	}
	n, err := w.ResponseWriter.Write(b[:min(int64(len(b)), w.keep)])
	w.keep -= int64(n)
	if err != nil {
		return n, err
	}
	if w.keep == 0 {
		w.cutNow()
		return n, errCut
	}
	return n, nil
}

// FlushError flushes unless the connection is cut (the reverse proxy
// flushes after every write).
func (w *faultWriter) FlushError() error {
	if w.cut {
		return errCut
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer (for
// protocol upgrades).
func (w *faultWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// cutNow sends what was written, then resets (Reset) or cleanly closes
// (Truncate) the connection.
func (w *faultWriter) cutNow() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
	w.cut = true
	w.p.hijack(w.ResponseWriter, w.mode == Reset)
}

// finish makes a Reset's cut when the body ended before its byte: the
// whole answer went out, then the connection is reset.
func (w *faultWriter) finish() {
	if w.mode == Reset && !w.cut {
		w.cutNow()
	}
}

var _ net.Conn = (*trackedConn)(nil)
