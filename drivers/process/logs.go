package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
)

// logSet is an instance's output: the current file, written by the
// workload itself (stdout and stderr share one O_APPEND descriptor, so the
// order is kept and the output survives a daemon restart), and up to keep
// rotated copies PATH.1 (newest) .. PATH.keep.
//
// Rotation is copy-then-truncate, since the workload holds the file open:
// output written between the copy and the truncate (a few microseconds) is
// lost. It happens when the file has reached max bytes, checked at every
// Start and once a second while the file is being written (logwatch.go).
type logSet struct {
	mu   sync.Mutex // one rotation at a time
	path string
	max  int64
	keep int
}

func (l *logSet) file(i int) string {
	if i == 0 {
		return l.path
	}
	return l.path + "." + strconv.Itoa(i)
}

// openForWorkload opens the current file for a new run.
func (l *logSet) openForWorkload() (*os.File, error) {
	return os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// rotateIfFull rotates when the current file has reached max bytes.
func (l *logSet) rotateIfFull() error {
	_, err := l.check()
	return err
}

// check rotates when the current file has reached max bytes; it returns
// the file's size after that (-1: there is no file).
func (l *logSet) check() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fi, err := os.Stat(l.path)
	if err != nil {
		return -1, nil
	}
	if fi.Size() < l.max {
		return fi.Size(), nil
	}
	os.Remove(l.file(l.keep))
	for i := l.keep - 1; i >= 1; i-- {
		if err := os.Rename(l.file(i), l.file(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fi.Size(), fmt.Errorf("rotate %s: %w", l.file(i), err)
		}
	}
	if err := copyTruncate(l.path, l.file(1)); err != nil {
		return fi.Size(), err
	}
	return 0, nil
}

func copyTruncate(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("rotate %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Truncate(src, 0); err != nil {
		return fmt.Errorf("rotate %s: %w", src, err)
	}
	return os.Rename(tmp, dst)
}

// segment is one open log file and the size it had when opened.
type segment struct {
	f    *os.File
	size int64
}

// openSegments opens the rotated files oldest first, then the current one
// (which must exist: Create makes it).
func (l *logSet) openSegments() ([]segment, error) {
	var segs []segment
	for i := l.keep; i >= 0; i-- {
		f, err := os.Open(l.file(i))
		if errors.Is(err, os.ErrNotExist) && i > 0 {
			continue
		}
		if err != nil {
			closeSegments(segs)
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			closeSegments(segs)
			return nil, err
		}
		segs = append(segs, segment{f: f, size: fi.Size()})
	}
	return segs, nil
}

func closeSegments(segs []segment) {
	for _, s := range segs {
		s.f.Close()
	}
}

// tailBytes returns the last n lines of segs (all of it for n <= 0).
func tailBytes(segs []segment, n int) ([]byte, error) {
	var buf []byte
	const block = 64 << 10
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		for end := s.size; end > 0; {
			start := max(end-block, 0)
			chunk := make([]byte, end-start)
			if _, err := s.f.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			buf = append(chunk, buf...)
			end = start
			if n > 0 && hasLines(buf, n) {
				return drivers.TailLines(buf, n), nil
			}
		}
	}
	return drivers.TailLines(buf, n), nil
}

// hasLines reports whether b holds n line breaks before its last line, so
// its last n lines are all in b.
func hasLines(b []byte, n int) bool {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return bytes.Count(b, []byte{'\n'}) >= n
}

// segmentsReader reads segs in order and closes them.
type segmentsReader struct {
	io.Reader
	segs []segment
}

func newSegmentsReader(segs []segment) *segmentsReader {
	rs := make([]io.Reader, len(segs))
	for i, s := range segs {
		rs[i] = io.NewSectionReader(s.f, 0, s.size)
	}
	return &segmentsReader{Reader: io.MultiReader(rs...), segs: segs}
}

func (r *segmentsReader) Close() error {
	closeSegments(r.segs)
	return nil
}

// followPoll is how often a follower looks for new output.
const followPoll = 100 * time.Millisecond

// follower streams the current file from pos until ctx ends, after
// backlog. When the file shrinks (rotated), the rest of the old content is
// read from PATH.1, which holds it at the same offsets.
type follower struct {
	ctx     context.Context
	clk     clock.Clock
	backlog io.Reader
	cur     *os.File
	pos     int64
	rotated string // PATH.1
	// draining: the current file was truncated under us; finish the old
	// content from the rotated copy before starting again at 0.
	draining bool
	closers  []io.Closer
	once     sync.Once
}

func (f *follower) Read(p []byte) (int, error) {
	if f.backlog != nil {
		n, err := f.backlog.Read(p)
		if n > 0 || !errors.Is(err, io.EOF) {
			return n, err
		}
		f.backlog = nil
	}
	for {
		if err := f.ctx.Err(); err != nil {
			return 0, err
		}
		fi, err := f.cur.Stat()
		if err != nil {
			return 0, err
		}
		if size := fi.Size(); size < f.pos {
			f.draining = true
		}
		if f.draining {
			if n := f.readRotated(p); n > 0 {
				return n, nil
			}
			f.draining, f.pos = false, 0
			continue
		}
		switch size := fi.Size(); {
		case size > f.pos:
			n, err := f.cur.ReadAt(p[:min(int64(len(p)), size-f.pos)], f.pos)
			f.pos += int64(n)
			if n > 0 || (err != nil && !errors.Is(err, io.EOF)) {
				return n, err
			}
		default:
			t := f.clk.NewTimer(followPoll)
			select {
			case <-t.C():
			case <-f.ctx.Done():
				t.Stop()
				return 0, f.ctx.Err()
			}
		}
	}
}

// readRotated reads what followed pos in the rotated copy.
func (f *follower) readRotated(p []byte) int {
	old, err := os.Open(f.rotated)
	if err != nil {
		return 0
	}
	defer old.Close()
	n, _ := old.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n
}

func (f *follower) Close() error {
	f.once.Do(func() {
		f.cur.Close()
		for _, c := range f.closers {
			c.Close()
		}
	})
	return nil
}

// Logs returns the instance's output, stdout and stderr together in the
// order written, across rotated files. Tail N keeps the last N lines.
// Follow streams new output (polling every 100ms on the clock, following
// rotations) until ctx ends.
func (d *Driver) Logs(ctx context.Context, name string, opts drivers.LogOptions) (io.ReadCloser, error) {
	in, err := d.lockLive(opLogs, name)
	if err != nil {
		return nil, err
	}
	logs := in.logs
	in.mu.Unlock()
	segs, err := logs.openSegments()
	if errors.Is(err, os.ErrNotExist) {
		return nil, d.errorf(opLogs, name, drivers.ErrNotFound, "")
	}
	if err != nil {
		return nil, drivers.Wrap(DriverName, opLogs, name, drivers.ErrTransient, err)
	}
	var backlog io.ReadCloser
	if opts.Tail > 0 {
		b, err := tailBytes(segs, opts.Tail)
		if err != nil {
			closeSegments(segs)
			return nil, drivers.Wrap(DriverName, opLogs, name, drivers.ErrTransient, err)
		}
		backlog = io.NopCloser(bytes.NewReader(b))
	}
	if !opts.Follow {
		if backlog != nil {
			closeSegments(segs)
			return backlog, nil
		}
		return newSegmentsReader(segs), nil
	}
	cur := segs[len(segs)-1]
	f := &follower{ctx: ctx, clk: d.clk, cur: cur.f, pos: cur.size, rotated: logs.file(1)}
	for _, s := range segs[:len(segs)-1] {
		f.closers = append(f.closers, s.f)
	}
	if backlog != nil {
		f.backlog = backlog
	} else {
		rs := make([]io.Reader, len(segs))
		for i, s := range segs {
			rs[i] = io.NewSectionReader(s.f, 0, s.size)
		}
		f.backlog = io.MultiReader(rs...)
	}
	return f, nil
}
