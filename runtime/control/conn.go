package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// errTooLarge is the reader's: the line went past the limit.
var errTooLarge = errors.New("request line too large")

// past is a deadline already reached: setting it wakes a blocked read or
// write at once, without a timer.
var past = time.Unix(1, 0)

// conn is one client connection. Its reader goroutine (serve) reads lines
// and starts one goroutine per request; answers are written whole, one
// line at a time, under wmu.
type conn struct {
	srv  *Server
	nc   *net.UnixConn
	ctx  context.Context // ends when the client is gone or the server closes
	stop context.CancelFunc

	wmu sync.Mutex // one line at a time

	mu        sync.Mutex
	inflight  map[uint64]*request
	idleGen   uint64
	idleTimer clock.Timer
	// reason, once set, is the last line the connection gets: why it was
	// closed (idle timeout). Setting it also stops the reader.
	reason *Error
	ending bool

	requests sync.WaitGroup
}

// request is one request in flight.
type request struct {
	cancel    context.CancelFunc
	cancelled bool // by the client's cancel op
}

func newConn(s *Server, nc *net.UnixConn) *conn {
	ctx, stop := context.WithCancel(s.ctx)
	return &conn{srv: s, nc: nc, ctx: ctx, stop: stop, inflight: map[uint64]*request{}}
}

// serve runs the connection to its end; the caller closes it.
func (c *conn) serve() {
	defer c.stop()
	p, ok := c.admitPeer()
	if !ok {
		return
	}
	// Every request's context carries the peer: a change records who
	// asked (SVC-23).
	c.ctx = withPeer(c.ctx, p)
	c.mu.Lock()
	c.armIdle()
	c.mu.Unlock()
	final := c.readLoop()
	// The client is gone or done sending: streams end; answers of
	// requests in flight are still written if the client reads them.
	c.stop()
	c.requests.Wait()
	c.mu.Lock()
	c.stopIdle()
	c.ending = true
	if final == nil {
		final = c.reason
	}
	c.mu.Unlock()
	if final != nil {
		_ = c.write(outLine{Error: final})
	}
}

// admitPeer checks the peer's credentials (DMN-11, SEC-1).
func (c *conn) admitPeer() (Peer, bool) {
	p, err := peerOf(c.nc)
	if err != nil {
		c.srv.log.Warn().Err(err).Msg("connection refused: peer credentials unreadable")
		_ = c.write(outLine{Error: Errorf(CodeRefused, "peer credentials unreadable")})
		return p, false
	}
	ok, why := c.srv.access.allows(p)
	if ok {
		return p, true
	}
	c.srv.log.Warn().Uint32("uid", p.UID).Uint32("gid", p.GID).Int32("pid", p.PID).Str("reason", why).
		Msg("connection refused: peer not allowed")
	_ = c.write(outLine{Error: &Error{Code: CodeRefused, Message: fmt.Sprintf("uid %d is not allowed on this socket: %s", p.UID, why)}})
	return p, false
}

// readLoop reads and dispatches lines until the client is done, the
// connection is stopped, or a line is too large; it returns the last line
// to send, if any.
func (c *conn) readLoop() *Error {
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var buf []byte
	bad := 0
	for {
		line, err := readLine(r, c.srv.opts.MaxRequest, buf[:0])
		if errors.Is(err, errTooLarge) {
			return Errorf(CodeTooLarge, "request line exceeds %d bytes (the daemon's control.max_request); closing the connection", c.srv.opts.MaxRequest)
		}
		if err != nil {
			// EOF (a half-written last line is dropped: it affects
			// nothing), the client reset, or stopReading.
			return nil
		}
		if cap(line) <= 64<<10 {
			buf = line
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if c.dispatch(line) {
			bad = 0
			continue
		}
		if bad++; bad >= maxBadLines {
			return Errorf(CodeBadRequest, "%d malformed requests in a row; closing the connection", bad)
		}
	}
}

// readLine reads one line without its newline into buf. A line longer than
// max is errTooLarge; reading stops there, so at most max plus one buffer
// is ever held.
func readLine(r *bufio.Reader, max int, buf []byte) ([]byte, error) {
	for {
		frag, err := r.ReadSlice('\n')
		n := len(buf) + len(frag)
		if err == nil {
			n-- // the newline
		}
		if n > max {
			return nil, errTooLarge
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// dispatch answers or starts one request; false if the line was malformed.
func (c *conn) dispatch(line []byte) bool {
	c.mu.Lock()
	c.stopIdle()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.armIdle()
		c.mu.Unlock()
	}()
	d, derr := decode(line)
	if derr != nil {
		_ = c.write(outLine{ID: d.req.ID, Error: derr})
		return false
	}
	if d.req.Op == OpCancel {
		_ = c.write(outLine{ID: d.req.ID, Result: c.cancelRequest(d.args.(CancelArgs).ID)})
		return true
	}
	ctx, cancel := context.WithCancel(c.ctx)
	req, err := c.track(d.req.ID, cancel)
	if err != nil {
		cancel()
		_ = c.write(outLine{ID: d.req.ID, Error: err})
		return true
	}
	c.requests.Add(1)
	go c.run(ctx, d, req)
	return true
}

// track records a new request in flight, within the connection's bound.
func (c *conn) track(id uint64, cancel context.CancelFunc) (*request, *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.inflight[id]; dup {
		return nil, Errorf(CodeConflict, "request id %d is already in flight on this connection", id)
	}
	if len(c.inflight) >= c.srv.opts.MaxInFlight {
		return nil, Errorf(CodeBusy, "%d requests in flight on this connection; wait for one to end", c.srv.opts.MaxInFlight)
	}
	req := &request{cancel: cancel}
	c.inflight[id] = req
	return req, nil
}

func (c *conn) cancelRequest(id uint64) CancelResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	req, ok := c.inflight[id]
	if !ok {
		return CancelResult{}
	}
	req.cancelled = true
	req.cancel()
	return CancelResult{Cancelled: true}
}

// run calls the handler and writes the final line.
func (c *conn) run(ctx context.Context, d decoded, req *request) {
	defer c.requests.Done()
	id := d.req.ID
	emit := func(l outLine) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.ID, l.More = id, true
		return c.write(l)
	}
	result, err := c.call(ctx, d, emit)
	c.mu.Lock()
	delete(c.inflight, id)
	cancelled := req.cancelled
	c.armIdle()
	c.mu.Unlock()
	req.cancel()
	if err == nil && d.spec.streaming && !cancelled && c.srv.ctx.Err() != nil {
		// The stream did not end, the server did: say so, not "done".
		err = context.Canceled
	}
	if err != nil {
		_ = c.write(outLine{ID: id, Error: c.wireError(d.req.Op, err, cancelled)})
		return
	}
	_ = c.write(outLine{ID: id, Result: result})
}

// call runs the handler, turning a panic into an error.
func (c *conn) call(ctx context.Context, d decoded, emit func(outLine) error) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.srv.log.Error().Str("op", string(d.req.Op)).Interface("panic", p).Bytes("stack", debug.Stack()).Msg("handler panicked")
			result, err = nil, Errorf(CodeInternal, "%s: the daemon failed to answer (handler panic, logged)", d.req.Op)
		}
	}()
	return d.spec.run(ctx, c.srv.opts.Handler, d.args, emit)
}

// wireError maps a handler's error to its wire form.
func (c *conn) wireError(op Op, err error, cancelled bool) *Error {
	var e *Error
	var refused *lifecycle.Refused
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &refused):
		return &Error{Code: CodeRefused, Message: refused.Error(), Details: map[string]string{
			"state": string(refused.State.Name), "event": refused.Event.String(), "reason": refused.Reason,
		}}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		if cancelled {
			return Errorf(CodeCancelled, "%s cancelled by the client", op)
		}
		if c.srv.ctx.Err() != nil {
			return Errorf(CodeUnavailable, "%s ended: the daemon's control server is closing", op)
		}
		return Errorf(CodeCancelled, "%s ended: the client went away", op)
	}
	c.srv.log.Warn().Str("op", string(op)).Err(err).Msg("request failed")
	return Errorf(CodeInternal, "%s: %v", op, err)
}

// write sends one line. A client that does not take it within the write
// timeout is cut off: its writes fail from then on and its reader stops.
func (c *conn) write(l outLine) error {
	b := encodeLine(l)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	watchdog := c.srv.opts.Clock.AfterFunc(c.srv.opts.WriteTimeout, func() {
		_ = c.nc.SetWriteDeadline(past)
	})
	_, err := c.nc.Write(b)
	watchdog.Stop()
	if err != nil {
		c.stopReading(nil)
	}
	return err
}

// encodeLine encodes l with its newline. A value that cannot be encoded
// (a NaN in a result) becomes an internal error on the same id.
func encodeLine(l outLine) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		buf.Reset()
		_ = enc.Encode(outLine{ID: l.ID, Error: Errorf(CodeInternal, "encoding the answer: %v", err)})
	}
	return buf.Bytes()
}

// stopReading ends the connection's reader and its requests; reason, if
// not nil, is the last line sent.
func (c *conn) stopReading(reason *Error) {
	c.mu.Lock()
	if reason != nil && c.reason == nil {
		c.reason = reason
	}
	c.mu.Unlock()
	c.stop()
	_ = c.nc.SetReadDeadline(past)
}

// armIdle starts the idle timer when nothing is in flight; c.mu is held.
func (c *conn) armIdle() {
	if c.ending || len(c.inflight) > 0 || c.idleTimer != nil {
		return
	}
	c.idleGen++
	gen := c.idleGen
	timeout := c.srv.opts.IdleTimeout
	c.idleTimer = c.srv.opts.Clock.AfterFunc(timeout, func() { c.idleFired(gen, timeout) })
}

// stopIdle stops the idle timer; c.mu is held.
func (c *conn) stopIdle() {
	c.idleGen++
	if c.idleTimer != nil {
		c.idleTimer.Stop()
		c.idleTimer = nil
	}
}

func (c *conn) idleFired(gen uint64, timeout time.Duration) {
	c.mu.Lock()
	current := gen == c.idleGen && len(c.inflight) == 0
	if current {
		c.idleTimer = nil
	}
	c.mu.Unlock()
	if current {
		c.stopReading(Errorf(CodeTimeout, "connection idle for %s; closed", timeout))
	}
}
