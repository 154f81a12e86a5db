package fake

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/engenho/engenho/drivers"
)

// maxLog bounds what an instance keeps; older output is dropped.
const maxLog = 1 << 20

// logBuf is an instance's output. base counts the bytes dropped from the
// front, so a follower's position survives trimming. Guarded by the
// driver's mutex.
type logBuf struct {
	data   []byte
	base   int64
	notify chan struct{} // closed and replaced on every write
	closed bool          // the instance was deleted
}

func newLogBuf() *logBuf { return &logBuf{notify: make(chan struct{})} }

func (l *logBuf) write(s string) {
	if s == "" {
		return
	}
	l.data = append(l.data, s...)
	if over := len(l.data) - maxLog; over > 0 {
		l.data = append([]byte(nil), l.data[over:]...)
		l.base += int64(over)
	}
	close(l.notify)
	l.notify = make(chan struct{})
}

func (l *logBuf) close() {
	if !l.closed {
		l.closed = true
		close(l.notify)
	}
}

// tail returns the last n lines (all when n <= 0).
func (l *logBuf) tail(n int) []byte {
	return append([]byte(nil), drivers.TailLines(l.data, n)...)
}

// follower streams an instance's output from pos until ctx ends.
type follower struct {
	ctx  context.Context
	mu   *sync.Mutex // the driver's
	log  *logBuf
	pos  int64
	done chan struct{}
	once sync.Once
}

func (f *follower) Read(p []byte) (int, error) {
	for {
		f.mu.Lock()
		l := f.log
		start := f.pos - l.base
		if start < 0 { // trimmed past us: skip to what is kept
			start, f.pos = 0, l.base
		}
		if start < int64(len(l.data)) {
			n := copy(p, l.data[start:])
			f.pos += int64(n)
			f.mu.Unlock()
			return n, nil
		}
		closed, notify := l.closed, l.notify
		f.mu.Unlock()
		if closed {
			return 0, io.EOF
		}
		select {
		case <-notify:
		case <-f.ctx.Done():
			return 0, f.ctx.Err()
		case <-f.done:
			return 0, io.ErrClosedPipe
		}
	}
}

func (f *follower) Close() error {
	f.once.Do(func() { close(f.done) })
	return nil
}

func snapshot(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
