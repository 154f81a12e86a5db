package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"

	"github.com/engenho/engenho/drivers/objstore"
)

// A restore's download (PERF-5). A restore reads a list of objects whole
// and in order: a tar archive, or a cas checkpoint's blobs. The fetcher
// cuts them into pieces of at most a chunk: an object larger than a chunk
// is fetched as ranged GETs, several in flight, so a large download is not
// one request's stream; small objects take one GET each, several in flight
// too. The first pieces of a large object are small (1 MiB, then doubling
// up to a chunk) so its first bytes come soon. Every piece, in order, goes
// both to the consumer (the extraction) and to a hashing goroutine, which
// checks each object's size and sha256; a piece's buffer is free once both
// are done with it. Download, extraction and hashing overlap, and memory
// stays under a budget of bytes fetched and not yet both written and
// hashed.

// fetchTuning sets the fetcher's sizes; docs/objstore.md has the
// measurements behind the defaults.
type fetchTuning struct {
	chunk    int64 // bytes per ranged GET
	parallel int   // GETs in flight
	ahead    int64 // bytes fetched and not yet both extracted and hashed, at most
}

// firstPiece is the size of a large object's first piece; later pieces
// double up to a chunk.
const firstPiece = 1 << 20

var defaultFetch = fetchTuning{chunk: 8 << 20, parallel: 4, ahead: 48 << 20}

func (t fetchTuning) orDefault() fetchTuning {
	if t.chunk <= 0 || t.parallel <= 0 || t.ahead < 2*t.chunk {
		return defaultFetch
	}
	return t
}

// target is one object a restore reads whole, or one file's content in a
// pack (packs.go): size bytes of the object at key from off.
type target struct {
	key    string
	off    int64 // where the content starts in the object: 0 but in a pack
	inPack bool
	size   int64
	sha256 string
	crc32c string // empty: checked with sha256 (sum.go)
	name   string // what it is, for errors: "archive" or a file's path
}

// blobTarget is where a Cas checkpoint's file is read from.
func (c *Checkpointer) blobTarget(host string, it IndexItem) target {
	return target{key: c.blobDir(host) + it.blobName(), off: it.Off, inPack: it.Pack != "",
		size: it.Size, sha256: it.Hash, crc32c: it.CRC, name: it.Path}
}

func (t target) entry() Entry {
	return Entry{Key: t.key, SHA256: t.sha256, CRC32C: t.crc32c, Size: t.size}
}

// piece is up to a chunk of one target, fetched by one GET.
type piece struct {
	t      int // index of its target
	off, n int64
	last   bool // the target's last piece
	buf    []byte
	err    error
	done   chan struct{} // closed once buf or err is set
	refs   atomic.Int32  // the consumer and the hasher, until each is done
}

type fetcher struct {
	store   objstore.Store
	ranges  objstore.RangeReader // nil: a store without ranges (see readSeq)
	seq     *objstore.Object     // readSeq's open GET
	targets []target
	tune    fetchTuning

	ctx        context.Context
	cancel     context.CancelFunc
	order      chan *piece   // dispatched pieces, in order
	slots      chan struct{} // a token per GET in flight
	budget     budget
	hashQ      chan *piece   // dispatched pieces, in order, for the hasher
	dispatched chan struct{} // closed when dispatch returns
	hashed     chan struct{} // closed when hash returns
	fetches    sync.WaitGroup

	// The consumer's side.
	cur     *piece
	pos     int
	readErr error // the first download error the consumer met

	// Written by hash before it closes hashed.
	hashErr  error
	verified int // targets whose size and sha256 matched
}

// newFetcher starts downloading targets. The caller reads them in order,
// each to its end (reader), then calls finish.
func (c *Checkpointer) newFetcher(ctx context.Context, targets []target) *fetcher {
	tune := c.cfg.fetch.orDefault()
	f := &fetcher{
		store: c.cfg.Store, targets: targets, tune: tune,
		order: make(chan *piece, 256), slots: make(chan struct{}, tune.parallel),
		budget: budget{left: tune.ahead, more: make(chan struct{}, 1)},
		hashQ:  make(chan *piece, 256), dispatched: make(chan struct{}), hashed: make(chan struct{}),
	}
	f.ranges, _ = c.cfg.Store.(objstore.RangeReader)
	f.ctx, f.cancel = context.WithCancel(ctx)
	if f.ranges == nil {
		// One GET streamed in order (see readSeq).
		f.tune.parallel = 1
		f.slots = make(chan struct{}, 1)
	}
	for _, t := range targets {
		// An empty object has nothing to fetch; its hash must still be
		// the empty one.
		if t.size > 0 || f.hashErr != nil {
			continue
		}
		if err := checkRead(t.entry(), 0, readSum(t.entry())); err != nil {
			f.hashErr = fmt.Errorf("%s: %w", t.name, err)
			f.cancel()
		}
	}
	go f.dispatch()
	go f.hash()
	return f
}

// dispatch starts a fetch per piece, in order, within the budget and the
// GETs allowed in flight, and queues the pieces for the hasher and the
// consumer. It closes both queues when it returns.
func (f *fetcher) dispatch() {
	defer close(f.dispatched)
	defer close(f.order)
	defer close(f.hashQ)
	for i := 0; i < len(f.targets); i++ {
		t := f.targets[i]
		if end := f.runEnd(i); end > i+1 || (t.inPack && t.size > 0 && t.size <= f.tune.chunk) {
			if !f.dispatchRun(i, end) {
				return
			}
			i = end - 1
			continue
		}
		n := min(t.size, f.tune.chunk)
		if t.size > f.tune.chunk {
			n = min(firstPiece, f.tune.chunk)
		}
		for off := int64(0); off < t.size; off, n = off+n, min(2*n, f.tune.chunk, t.size-off-n) {
			if f.budget.take(f.ctx, n) != nil {
				return
			}
			select {
			case f.slots <- struct{}{}:
			case <-f.ctx.Done():
				return
			}
			p := &piece{t: i, off: off, n: n, last: off+n == t.size, done: make(chan struct{})}
			p.refs.Store(2)
			f.fetches.Add(1)
			go f.fetch(p)
			if !f.queue(p) {
				return
			}
		}
	}
}

// queue hands a dispatched piece to the hasher, then the consumer: a
// piece the consumer has is always the hasher's too, even if the fetcher
// is stopped right after.
func (f *fetcher) queue(p *piece) bool {
	for _, q := range []chan *piece{f.hashQ, f.order} {
		select {
		case q <- p:
		case <-f.ctx.Done():
			return false
		}
	}
	return true
}

// runEnd is the end (exclusive) of the run of packed targets from i that
// one GET can read: neighbours in the same pack, within a chunk in all.
func (f *fetcher) runEnd(i int) int {
	t := f.targets[i]
	if !t.inPack || t.size == 0 {
		return i + 1
	}
	end, j := t.off+t.size, i+1
	for ; j < len(f.targets); j++ {
		u := f.targets[j]
		if !u.inPack || u.key != t.key || u.off != end || u.size == 0 || end+u.size-t.off > f.tune.chunk {
			break
		}
		end += u.size
	}
	return j
}

// dispatchRun fetches targets [i, end), neighbours in one pack, with one
// GET: a piece each, all done when the GET is.
func (f *fetcher) dispatchRun(i, end int) bool {
	first, last := f.targets[i], f.targets[end-1]
	n := last.off + last.size - first.off
	if f.budget.take(f.ctx, n) != nil {
		return false
	}
	select {
	case f.slots <- struct{}{}:
	case <-f.ctx.Done():
		return false
	}
	done := make(chan struct{})
	ps := make([]*piece, 0, end-i)
	for k := i; k < end; k++ {
		p := &piece{t: k, n: f.targets[k].size, last: true, done: done}
		p.refs.Store(2)
		ps = append(ps, p)
	}
	f.fetches.Add(1)
	go f.fetchRun(ps, first.off, n, done)
	for _, p := range ps {
		if !f.queue(p) {
			return false
		}
	}
	return true
}

// fetchRun reads n bytes from off of the pack ps's targets are in, and
// gives each piece its part.
func (f *fetcher) fetchRun(ps []*piece, off, n int64, done chan struct{}) {
	defer f.fetches.Done()
	defer close(done)
	defer func() { <-f.slots }()
	key := f.targets[ps[0].t].key
	buf := make([]byte, n)
	err := f.readAt(key, off, buf)
	at := int64(0)
	for _, p := range ps {
		t := f.targets[p.t]
		p.buf = buf[at : at+p.n : at+p.n] // capped: never pooled (putBuf)
		at += p.n
		if err != nil {
			p.err = fmt.Errorf("fetching %s (object %s, bytes %d-%d): %w", t.name, key, t.off, t.off+t.size-1, err)
		}
	}
}

// readAt fills buf from off of the object at key, which must hold that
// much; a store without ranges is read from the start.
func (f *fetcher) readAt(key string, off int64, buf []byte) error {
	var obj *objstore.Object
	var err error
	if f.ranges != nil {
		obj, err = f.ranges.GetRange(f.ctx, key, off, int64(len(buf)))
	} else {
		obj, err = f.store.Get(f.ctx, key)
	}
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	if obj.Size < off+int64(len(buf)) {
		return fmt.Errorf("%w: the object is %d bytes, want at least %d", ErrCorrupt, obj.Size, off+int64(len(buf)))
	}
	if f.ranges == nil {
		if _, err := io.CopyN(io.Discard, obj.Body, off); err != nil {
			return shortRead(err, 0, int64(len(buf)))
		}
	}
	got, err := io.ReadFull(obj.Body, buf)
	return shortRead(err, got, int64(len(buf)))
}

// shortRead is a body that ended early: a transient error, never a short
// piece.
func shortRead(err error, got int, want int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the store sent %d of %d bytes: %w", objstore.ErrTransient, got, want, io.ErrUnexpectedEOF)
	}
	return err
}

func (f *fetcher) fetch(p *piece) {
	defer f.fetches.Done()
	defer close(p.done)
	defer func() { <-f.slots }()
	t := f.targets[p.t]
	p.buf = getBuf(p.n, f.tune.chunk)
	read := f.read
	if f.ranges == nil && !t.inPack {
		read = f.readSeq
	}
	if err := read(t, p); err != nil {
		p.err = fmt.Errorf("fetching %s (object %s, bytes %d-%d): %w", t.name, t.key, t.off+p.off, t.off+p.off+p.n-1, err)
	}
}

// read fills p.buf with exactly p.n bytes of the target from p.off. An
// object of another size than expected is ErrCorrupt; a range the store
// cuts short is a transient error, never a short piece.
func (f *fetcher) read(t target, p *piece) error {
	if t.inPack {
		return f.readAt(t.key, t.off+p.off, p.buf)
	}
	obj, err := f.ranges.GetRange(f.ctx, t.key, p.off, p.n)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	return fill(obj, t, p)
}

// fill reads p's bytes from obj's body, which is at p.off.
func fill(obj *objstore.Object, t target, p *piece) error {
	if obj.Size != t.size {
		return fmt.Errorf("%w: the object is %d bytes, want %d", ErrCorrupt, obj.Size, t.size)
	}
	got, err := io.ReadFull(obj.Body, p.buf)
	return shortRead(err, got, p.n)
}

// readSeq is read for a store without ranges (none in this tree; a
// test's wrapper, say): one whole GET per target, its pieces read from
// the same body in order. newFetcher allows one fetch in flight for such
// a store, so the pieces come here one after the other.
func (f *fetcher) readSeq(t target, p *piece) error {
	if p.off == 0 {
		f.closeSeq()
		obj, err := f.store.Get(f.ctx, t.key)
		if err != nil {
			return err
		}
		f.seq = obj
	}
	if f.seq == nil {
		return errors.New("an earlier piece of the object failed")
	}
	err := fill(f.seq, t, p)
	if err != nil || p.last {
		f.closeSeq()
	}
	return err
}

func (f *fetcher) closeSeq() {
	if f.seq != nil {
		f.seq.Body.Close()
		f.seq = nil
	}
}

// hash checks each target's size and checksum as its pieces arrive. The
// first mismatch stops the downloads.
func (f *fetcher) hash() {
	defer close(f.hashed)
	var h hash.Hash
	var n int64
	broken := false // a piece of this target failed to download
	for p := range f.hashQ {
		<-p.done
		if p.off == 0 {
			h, n, broken = readSum(f.targets[p.t].entry()), 0, false
		}
		broken = broken || p.err != nil
		if !broken && f.hashErr == nil {
			h.Write(p.buf)
			n += int64(len(p.buf))
			if p.last {
				t := f.targets[p.t]
				if err := checkRead(t.entry(), n, h); err != nil {
					f.hashErr = fmt.Errorf("%s: %w", t.name, err)
					f.cancel()
				} else {
					f.verified++
				}
			}
		}
		f.unref(p)
	}
}

// unref drops one holder of p; the last gives its bytes back.
func (f *fetcher) unref(p *piece) {
	if p.refs.Add(-1) == 0 {
		putBuf(p.buf, f.tune.chunk)
		f.budget.give(p.n)
	}
}

// reader returns target i's bytes. Read the targets in order, each to
// io.EOF; a download error ends the read with that error.
func (f *fetcher) reader(i int) io.Reader { return &targetReader{f: f, t: i} }

type targetReader struct {
	f   *fetcher
	t   int
	eof bool
}

func (r *targetReader) Read(b []byte) (int, error) {
	f := r.f
	for f.cur == nil || f.pos == len(f.cur.buf) {
		if f.cur != nil {
			done := f.cur.t == r.t && f.cur.last
			f.release()
			r.eof = r.eof || done
		}
		if r.eof || f.targets[r.t].size == 0 {
			return 0, io.EOF
		}
		if err := f.next(); err != nil {
			return 0, err
		}
	}
	if f.cur.t != r.t {
		// A bug in the caller: the targets are read in order, each to
		// its end.
		return 0, fmt.Errorf("checkpoint restore: read %s while %s was due", f.targets[r.t].name, f.targets[f.cur.t].name)
	}
	n := copy(b, f.cur.buf[f.pos:])
	f.pos += n
	return n, nil
}

// next waits for the next piece in order.
func (f *fetcher) next() error {
	if f.readErr != nil {
		return f.readErr
	}
	p, ok := <-f.order
	if !ok {
		if f.readErr = f.ctx.Err(); f.readErr == nil {
			f.readErr = errors.New("checkpoint restore: read past the last piece")
		}
		return f.readErr
	}
	<-p.done
	if p.err != nil {
		f.readErr = p.err
		return p.err
	}
	f.cur, f.pos = p, 0
	return nil
}

// release is the consumer done with the current piece.
func (f *fetcher) release() {
	f.unref(f.cur)
	f.cur = nil
}

// finish stops the downloads, waits for every goroutine, and gives the
// verdict on a restore whose extraction returned err: a size or checksum
// mismatch (ErrCorrupt) first, whatever the extraction said; then the
// first download error the extraction met; then err itself (a local
// fault: the bytes it got were sound). nil means every target was read
// and matched.
func (f *fetcher) finish(err error) error {
	f.cancel()
	<-f.dispatched
	f.fetches.Wait()
	f.closeSeq()
	<-f.hashed
	switch {
	case f.hashErr != nil:
		return f.hashErr
	case f.readErr != nil:
		return f.readErr
	case err != nil:
		return err
	}
	want := 0
	for _, t := range f.targets {
		if t.size > 0 {
			want++
		}
	}
	if f.verified != want {
		return fmt.Errorf("checkpoint restore: %d of %d objects read to the end", f.verified, want)
	}
	return nil
}

// budget is a count of bytes one goroutine takes and others give back.
type budget struct {
	mu   sync.Mutex
	left int64
	more chan struct{} // signalled on give
}

func (b *budget) take(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.left >= n {
			b.left -= n
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		select {
		case <-b.more:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
	select {
	case b.more <- struct{}{}:
	default:
	}
}

// Buffers of a whole chunk are reused across pieces and restores; small
// pieces (small blobs) get buffers of their own size.
var chunkBufs sync.Pool

const pooledMin = 1 << 20

func getBuf(n, chunk int64) []byte {
	if n < pooledMin {
		return make([]byte, n)
	}
	if b, ok := chunkBufs.Get().(*[]byte); ok && int64(cap(*b)) >= n {
		return (*b)[:n]
	}
	return make([]byte, n, max(n, chunk))
}

func putBuf(b []byte, chunk int64) {
	if int64(cap(b)) >= max(chunk, pooledMin) {
		b = b[:cap(b)]
		chunkBufs.Put(&b)
	}
}
