package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/engenho/engenho/drivers/objstore"
)

// withIOTimeout makes every connection of tr fail a read or write that
// makes no progress for timeout. The SDK sets no deadline of its own (no
// client timeout, no response-header timeout), so without this a server
// that accepts a connection and never answers (a partition, a wedged
// server) holds a call with no deadline forever, and a call with one for
// its whole budget, without a retry.
func withIOTimeout(tr *http.Transport, timeout time.Duration) {
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &progressConn{Conn: c, timeout: timeout}, nil
	}
}

// progressConn moves its deadline forward at every read and write: it
// times out only when nothing moves for timeout. A write moves the read
// deadline too, so the transport's read that waits for the answer (and, on
// an idle kept-alive connection, for nothing) counts from the last byte
// sent; an idle connection is dropped after timeout, and the next call
// dials again.
type progressConn struct {
	net.Conn
	timeout time.Duration
}

func (c *progressConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	return c.Conn.Read(b)
}

func (c *progressConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.timeout))
	return c.Conn.Write(b)
}

// checkedBody is an object's body as Get hands it out: a read that fails
// (a cut connection, a stall past IOTimeout) is an ErrTransient error
// naming the key, and a body that ends short of its Content-Length is an
// error, never a clean EOF, so a truncated download is never taken for the
// object.
type checkedBody struct {
	rc   io.ReadCloser
	key  string
	size int64 // -1: unknown
	read int64
}

var errShortBody = errors.New("body ended before its Content-Length")

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.read += int64(n)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF) && (b.size < 0 || b.read == b.size):
		return n, io.EOF
	case errors.Is(err, io.EOF):
		err = fmt.Errorf("%w: %d of %d bytes", errShortBody, b.read, b.size)
	}
	return n, objstore.Wrap(storeName, "get", b.key, objstore.ErrTransient, fmt.Errorf("reading body: %w", err))
}

func (b *checkedBody) Close() error { return b.rc.Close() }
