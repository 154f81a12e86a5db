package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"runtime"
	"sync"
	"syscall"

	"github.com/engenho/engenho/messages"
)

// ErrNoDaemon matches a dial that found no daemon: no socket file, or a
// socket nobody listens on.
var ErrNoDaemon = errors.New("no daemon")

// DialError says why the socket could not be reached, with a hint for the
// operator.
type DialError struct {
	Path string
	Err  error
}

func (e *DialError) Error() string {
	switch {
	case errors.Is(e.Err, fs.ErrNotExist):
		return fmt.Sprintf("is the daemon running? no socket at %s (set --socket or --data-dir)", e.Path)
	case errors.Is(e.Err, syscall.ECONNREFUSED):
		return fmt.Sprintf("is the daemon running? nothing listens on %s (a stale socket)", e.Path)
	case errors.Is(e.Err, fs.ErrPermission):
		return fmt.Sprintf("permission denied on %s: connect as root, as the daemon's user, or as a member of the socket's group", e.Path)
	}
	return fmt.Sprintf("control socket %s: %v", e.Path, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNoDaemon) true for a missing or dead socket.
func (e *DialError) Is(target error) bool {
	return target == ErrNoDaemon && (errors.Is(e.Err, fs.ErrNotExist) || errors.Is(e.Err, syscall.ECONNREFUSED))
}

// ClientOptions bound what a client sends and accepts.
type ClientOptions struct {
	// MaxRequest is checked before sending, so an oversized request fails
	// here with a clear error (default 1 MiB, the server's default).
	MaxRequest int
	// MaxResponse bounds one answer line (default 256 MiB).
	MaxResponse int
}

// Client is a connection to the daemon. Its methods may be called
// concurrently; the calls share the connection.
type Client struct {
	path string
	opts ClientOptions
	nc   net.Conn
	wmu  sync.Mutex

	mu     sync.Mutex
	nextID uint64
	calls  map[uint64]*pending
	// connErr is the last line about the connection itself (id 0):
	// refused, busy, idle timeout.
	connErr *Error
	err     error // why the connection ended; set before done closes
	done    chan struct{}
	reader  sync.WaitGroup
}

// pending is a call waiting for its lines.
type pending struct {
	lines chan []byte
	gone  chan struct{} // closed when the caller stops listening
}

// frame is one decoded answer line: the envelope, and for a final line the
// result (a *R of the call's type, or a json.RawMessage for Raw).
type frame struct {
	resp   Response
	result any
}

// typedLine is an answer line whose result is an R.
type typedLine[R any] struct {
	ID       uint64                   `json:"id"`
	More     bool                     `json:"more"`
	Event    *messages.Event          `json:"event"`
	Progress *ApplyProgress           `json:"progress"`
	Log      *LogChunk                `json:"log"`
	Services []messages.ServiceStatus `json:"services"`
	Result   *R                       `json:"result"`
	Error    *Error                   `json:"error"`
}

func decodeTyped[R any](line []byte) (frame, error) {
	var t typedLine[R]
	if err := json.Unmarshal(line, &t); err != nil {
		return frame{}, err
	}
	resp := Response{ID: t.ID, More: t.More, Event: t.Event, Progress: t.Progress, Log: t.Log, Services: t.Services, Error: t.Error}
	if t.Result == nil {
		return frame{resp: resp}, nil
	}
	return frame{resp: resp, result: t.Result}, nil
}

func decodeRaw(line []byte) (frame, error) {
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return frame{}, err
	}
	return frame{resp: resp, result: resp.Result}, nil
}

// peekID reads the id of a line the server wrote: it always starts
// {"id":N. ok is false for any other shape.
func peekID(line []byte) (uint64, bool) {
	const prefix = `{"id":`
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return 0, false
	}
	var id uint64
	n := 0
	for _, b := range line[len(prefix):] {
		if b < '0' || b > '9' {
			break
		}
		if id > (1<<64-1)/10 {
			return 0, false
		}
		id = id*10 + uint64(b-'0')
		n++
	}
	return id, n > 0
}

// Dial connects to the daemon's socket at path.
func Dial(path string) (*Client, error) { return DialWith(path, ClientOptions{}) }

// DialWith connects with explicit bounds.
func DialWith(path string, opts ClientOptions) (*Client, error) {
	if opts.MaxRequest <= 0 {
		opts.MaxRequest = DefaultMaxRequest
	}
	if opts.MaxResponse <= 0 {
		opts.MaxResponse = DefaultMaxResponse
	}
	nc, err := net.Dial("unix", path)
	if err != nil {
		return nil, &DialError{Path: path, Err: err}
	}
	c := &Client{path: path, opts: opts, nc: nc, calls: map[uint64]*pending{}, done: make(chan struct{})}
	c.reader.Add(1)
	go c.read()
	return c, nil
}

// Close closes the connection; calls in progress fail.
func (c *Client) Close() error {
	err := c.nc.Close()
	c.reader.Wait()
	return err
}

// read delivers every answer line to its call.
func (c *Client) read() {
	defer c.reader.Done()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var err error
	var buf []byte
	for {
		var line []byte
		line, err = readLine(r, c.opts.MaxResponse, buf[:0])
		if err != nil {
			break
		}
		buf = line // decoding copies what it keeps, so the buffer is reused
		if err = c.deliver(line); err != nil {
			break
		}
	}
	c.mu.Lock()
	switch {
	case c.connErr != nil:
		c.err = c.connErr
	case errors.Is(err, errTooLarge):
		c.err = fmt.Errorf("control socket %s: answer larger than %d bytes", c.path, c.opts.MaxResponse)
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		c.err = fmt.Errorf("control socket %s: the daemon closed the connection", c.path)
	case errors.Is(err, net.ErrClosed):
		c.err = fmt.Errorf("control socket %s: connection closed", c.path)
	default:
		c.err = fmt.Errorf("control socket %s: %w", c.path, err)
	}
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
}

// deliver hands one line to its call, which decodes it in its own
// goroutine (so reading the next line and decoding this one overlap). A
// line whose id cannot be read ends the connection.
func (c *Client) deliver(line []byte) error {
	id, ok := peekID(line)
	if !ok || id == 0 {
		fr, err := decodeRaw(line)
		if err != nil {
			return fmt.Errorf("control socket %s: unreadable answer: %w", c.path, err)
		}
		if fr.resp.ID == 0 {
			c.mu.Lock()
			if fr.resp.Error != nil {
				c.connErr = fr.resp.Error
			}
			c.mu.Unlock()
			return nil
		}
		id = fr.resp.ID
	}
	c.mu.Lock()
	p, ok := c.calls[id]
	c.mu.Unlock()
	if !ok {
		return nil // a call that was abandoned
	}
	select {
	case p.lines <- bytes.Clone(line):
	case <-p.gone:
	}
	return nil
}

// Err reports why the connection ended, or nil while it is open.
func (c *Client) Err() error {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	default:
		return nil
	}
}

// do sends one request and waits for its final line, handing stream items
// to onItem in order; decode reads the call's lines, several at once on
// big answers (status comes in batches). Cancelling ctx, or onItem
// failing, cancels the request on the server and returns that error.
func (c *Client) do(ctx context.Context, op Op, args any, decode func([]byte) (frame, error), onItem func(Response) error) (any, error) {
	p := &pending{lines: make(chan []byte, 16), gone: make(chan struct{})}
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.calls[id] = p
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		close(p.gone)
	}()
	if err := c.send(Request{ID: id, Op: op}, args); err != nil {
		return nil, err
	}
	dec := newLineDecoder(decode, runtime.GOMAXPROCS(0))
	defer dec.wait()
	for {
		if result, done, err := c.handleReady(id, dec, onItem); done {
			return result, err
		}
		lines := p.lines
		if dec.full() {
			lines = nil // let the decoders catch up
		}
		select {
		case line := <-lines:
			dec.push(line)
		case <-dec.settled:
		case <-ctx.Done():
			c.cancel(id)
			return nil, ctx.Err()
		case <-c.done:
			// Lines delivered before the end are still taken.
			for more := true; more; {
				select {
				case line := <-p.lines:
					dec.push(line)
				default:
					more = false
				}
			}
			dec.wait()
			if result, done, err := c.handleReady(id, dec, onItem); done {
				return result, err
			}
			return nil, c.Err()
		}
	}
}

// handleReady handles the decoded lines at the head of dec, in order;
// done when the call is over.
func (c *Client) handleReady(id uint64, dec *lineDecoder, onItem func(Response) error) (any, bool, error) {
	for {
		f, ok := dec.next()
		if !ok {
			return nil, false, nil
		}
		if f.err != nil {
			c.cancel(id)
			return nil, true, Errorf(CodeInternal, "unreadable answer: %v", f.err)
		}
		if result, done, err := c.take(id, f.fr, onItem); done {
			return result, true, err
		}
	}
}

// take handles one line of call id; done when the call is over.
func (c *Client) take(id uint64, fr frame, onItem func(Response) error) (any, bool, error) {
	if fr.resp.More {
		if onItem == nil {
			return nil, false, nil
		}
		if err := onItem(fr.resp); err != nil {
			c.cancel(id)
			return nil, true, err
		}
		return nil, false, nil
	}
	if fr.resp.Error != nil {
		return nil, true, fr.resp.Error
	}
	return fr.result, true, nil
}

// lineDecoder decodes one call's lines on up to n goroutines and hands
// them back in the order they arrived.
type lineDecoder struct {
	decode  func([]byte) (frame, error)
	sem     chan struct{}
	queue   []*decodedLine
	settled chan struct{} // a decode finished
	wg      sync.WaitGroup
}

type decodedLine struct {
	done chan struct{}
	fr   frame
	err  error
}

func newLineDecoder(decode func([]byte) (frame, error), n int) *lineDecoder {
	return &lineDecoder{decode: decode, sem: make(chan struct{}, max(n, 1)), settled: make(chan struct{}, 1)}
}

func (d *lineDecoder) push(line []byte) {
	l := &decodedLine{done: make(chan struct{})}
	d.queue = append(d.queue, l)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.sem <- struct{}{}
		l.fr, l.err = d.decode(line)
		<-d.sem
		close(l.done)
		select {
		case d.settled <- struct{}{}:
		default: // a wake-up is already pending
		}
	}()
}

// next pops the first line if it is decoded.
func (d *lineDecoder) next() (*decodedLine, bool) {
	if len(d.queue) == 0 {
		return nil, false
	}
	select {
	case <-d.queue[0].done:
		l := d.queue[0]
		d.queue = d.queue[1:]
		return l, true
	default:
		return nil, false
	}
}

// full: enough lines are queued to keep every decoder busy.
func (d *lineDecoder) full() bool { return len(d.queue) >= 2*cap(d.sem) }

func (d *lineDecoder) wait() { d.wg.Wait() }

// send writes one request line.
func (c *Client) send(req Request, args any) error {
	if args != nil {
		raw, err := json.Marshal(args)
		if err != nil {
			return fmt.Errorf("%s: encoding args: %w", req.Op, err)
		}
		req.Args = raw
	}
	line, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: encoding the request: %w", req.Op, err)
	}
	if len(line) > c.opts.MaxRequest {
		return Errorf(CodeTooLarge, "%s: request is %d bytes, the limit is %d", req.Op, len(line), c.opts.MaxRequest)
	}
	line = append(line, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.nc.Write(line); err != nil {
		// A broken connection: its reader ends too, with the daemon's
		// reason if it sent one (busy, refused) before closing.
		<-c.done
		return c.Err()
	}
	return nil
}

// cancel asks the server to end request id; its answer is dropped.
func (c *Client) cancel(id uint64) {
	c.mu.Lock()
	c.nextID++
	cid := c.nextID
	c.mu.Unlock()
	_ = c.send(Request{ID: cid, Op: OpCancel}, CancelArgs{ID: id})
}

// call is a typed request with a result of type R.
func call[R any](c *Client, ctx context.Context, op Op, args any) (R, error) {
	return streamCall[R, struct{}](c, ctx, op, args, nil, nil)
}

// streamCall is call with stream items: pick takes an item out of a line.
func streamCall[R, I any](c *Client, ctx context.Context, op Op, args any, pick func(Response) (I, bool), each func(I) error) (R, error) {
	var zero R
	var onItem func(Response) error
	if each != nil {
		onItem = func(resp Response) error {
			item, ok := pick(resp)
			if !ok {
				return fmt.Errorf("%s: a stream line without its item", op)
			}
			return each(item)
		}
	}
	result, err := c.do(ctx, op, args, decodeTyped[R], onItem)
	if err != nil {
		return zero, err
	}
	if r, ok := result.(*R); ok {
		return *r, nil
	}
	return zero, nil
}
