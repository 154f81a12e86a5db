package fake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
)

const storeName = "fake"

// Op names an operation for fault hooks.
type Op string

// The operations. GetRange is faulted and counted apart from Get.
const (
	OpGet      Op = "get"
	OpGetRange Op = "getrange"
	OpPut      Op = "put"
	OpDelete   Op = "delete"
	OpList     Op = "list"
)

// Options configure New. The zero value is fine.
type Options struct {
	// Clock measures injected latency and dates objects; default real.
	Clock clock.Clock
	// Seed makes ETags and random faults repeatable.
	Seed uint64
}

// Store is the in-memory store. Safe for concurrent use.
type Store struct {
	clock clock.Clock

	mu        sync.Mutex
	etags     *rand.Rand
	chance    *rand.Rand
	objects   map[string]object
	faults    map[Op]*fault
	conflicts int // conditional writes still to lose
	calls     map[Op]int
}

type object struct {
	data     []byte
	etag     string
	modified time.Time
}

// fault is the misbehaviour armed for one operation.
type fault struct {
	failN    int   // fail this many more calls
	failKind error // with this kind
	rate     float64
	rateKind error
	latency  time.Duration
	hangN    int   // hang this many more calls until cancelled
	cutAfter int64 // put only: fail after reading this many bytes; <0 off
	cutKind  error
}

var (
	_ objstore.Store       = (*Store)(nil)
	_ objstore.RangeReader = (*Store)(nil)
)

// New returns an empty store.
func New(opts Options) *Store {
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	return &Store{
		clock:   opts.Clock,
		etags:   rand.New(rand.NewPCG(opts.Seed, 0x6574616773)),
		chance:  rand.New(rand.NewPCG(opts.Seed, 0x6661756c74)),
		objects: map[string]object{},
		faults:  map[Op]*fault{},
		calls:   map[Op]int{},
	}
}

func (s *Store) faultFor(op Op) *fault {
	f := s.faults[op]
	if f == nil {
		f = &fault{cutAfter: -1}
		s.faults[op] = f
	}
	return f
}

// FailNext makes the next n calls of op fail with kind (an objstore.Err*).
func (s *Store) FailNext(op Op, n int, kind error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faultFor(op)
	f.failN, f.failKind = n, kind
}

// FailRate makes each call of op fail with kind with probability p, drawn
// from the seeded generator. p = 0 turns it off.
func (s *Store) FailRate(op Op, p float64, kind error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faultFor(op)
	f.rate, f.rateKind = p, kind
}

// SetLatency delays every call of op by d on the store's clock (a fake
// clock must be advanced for the call to go on). d = 0 turns it off.
func (s *Store) SetLatency(op Op, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultFor(op).latency = d
}

// HangNext makes the next n calls of op block until their context is done.
func (s *Store) HangNext(op Op, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultFor(op).hangN = n
}

// ConflictNext makes the next n conditional puts or deletes fail with
// ErrPreconditionFailed whatever the stored ETag, as if another writer had
// just won.
func (s *Store) ConflictNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflicts = n
}

// CutNextPut makes the next put fail with kind after reading n bytes of
// its body, storing nothing: an upload interrupted midway.
func (s *Store) CutNextPut(n int64, kind error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faultFor(OpPut)
	f.cutAfter, f.cutKind = n, kind
}

// Reset disarms every fault.
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[Op]*fault{}
	s.conflicts = 0
}

// Calls reports how many calls of op were made (including failed ones).
func (s *Store) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// Tamper replaces key's stored body with fn(body) but keeps its ETag, as
// bit rot or a broken server would. It reports whether key existed.
func (s *Store) Tamper(key string, fn func([]byte) []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return false
	}
	o.data = fn(bytes.Clone(o.data))
	s.objects[key] = o
	return true
}

// Keys lists every stored key, sorted.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// enter counts the call and applies the armed faults in order: hang,
// latency, then failures. It returns the put cut-off (-1 for none).
func (s *Store) enter(ctx context.Context, op Op, key string) (cut int64, cutKind error, err error) {
	s.mu.Lock()
	s.calls[op]++
	f := s.faultFor(op)
	hang := f.hangN > 0
	if hang {
		f.hangN--
	}
	latency := f.latency
	fail := s.pickFailure(f)
	cut, cutKind = f.cutAfter, f.cutKind
	f.cutAfter = -1
	s.mu.Unlock()

	if err := objstore.ContextError(storeName, string(op), key, ctx); err != nil {
		return -1, nil, err
	}
	if hang {
		<-ctx.Done()
		return -1, nil, objstore.ContextError(storeName, string(op), key, ctx)
	}
	if latency > 0 {
		t := s.clock.NewTimer(latency)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return -1, nil, objstore.ContextError(storeName, string(op), key, ctx)
		}
	}
	if fail != nil {
		return -1, nil, objstore.Errorf(storeName, string(op), key, fail, "injected fault")
	}
	return cut, cutKind, nil
}

// pickFailure decides whether this call fails; s.mu must be held.
func (s *Store) pickFailure(f *fault) error {
	if f.failN > 0 {
		f.failN--
		return f.failKind
	}
	if f.rate > 0 && s.chance.Float64() < f.rate {
		return f.rateKind
	}
	return nil
}

// Get returns a copy of key's object.
func (s *Store) Get(ctx context.Context, key string) (*objstore.Object, error) {
	if err := objstore.ValidKey(key); err != nil {
		return nil, objstore.Wrap(storeName, "get", key, objstore.ErrInvalid, err)
	}
	if _, _, err := s.enter(ctx, OpGet, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	o, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return nil, objstore.Errorf(storeName, "get", key, objstore.ErrNotFound, "")
	}
	return &objstore.Object{
		Body: io.NopCloser(bytes.NewReader(o.data)),
		Info: objstore.Info{Key: key, ETag: o.etag, Size: int64(len(o.data)), Modified: o.modified},
	}, nil
}

// GetRange returns a copy of at most n bytes of key's object from off.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (*objstore.Object, error) {
	if err := objstore.ValidKey(key); err != nil {
		return nil, objstore.Wrap(storeName, "getrange", key, objstore.ErrInvalid, err)
	}
	if err := objstore.CheckRange(off, n); err != nil {
		return nil, objstore.Wrap(storeName, "getrange", key, objstore.ErrInvalid, err)
	}
	if _, _, err := s.enter(ctx, OpGetRange, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	o, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return nil, objstore.Errorf(storeName, "getrange", key, objstore.ErrNotFound, "")
	}
	size := int64(len(o.data))
	start := min(off, size)
	part := o.data[start : start+objstore.RangeLen(size, off, n)]
	return &objstore.Object{
		Body: io.NopCloser(bytes.NewReader(part)),
		Info: objstore.Info{Key: key, ETag: o.etag, Size: size, Modified: o.modified},
	}, nil
}

// Put stores body under key when cond holds.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if err := objstore.ValidKey(key); err != nil {
		return "", objstore.Wrap(storeName, "put", key, objstore.ErrInvalid, err)
	}
	if err := cond.Check(); err != nil {
		return "", objstore.Wrap(storeName, "put", key, objstore.ErrInvalid, err)
	}
	cut, cutKind, err := s.enter(ctx, OpPut, key)
	if err != nil {
		return "", err
	}
	data, err := readBody(ctx, body, cut)
	if err != nil {
		if cut >= 0 && err == errCut {
			return "", objstore.Errorf(storeName, "put", key, cutKind, "injected fault: upload cut after %d bytes", cut)
		}
		if ctx.Err() != nil {
			return "", objstore.ContextError(storeName, "put", key, ctx)
		}
		return "", objstore.Wrap(storeName, "put", key, objstore.ErrTransient, fmt.Errorf("reading body: %w", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkCond(key, "put", cond); err != nil {
		return "", err
	}
	etag := fmt.Sprintf("%016x", s.etags.Uint64())
	s.objects[key] = object{data: data, etag: etag, modified: s.clock.Now()}
	return etag, nil
}

var errCut = fmt.Errorf("cut")

// readBody reads body whole, stopping with errCut after cut bytes (cut >= 0).
func readBody(ctx context.Context, body io.Reader, cut int64) ([]byte, error) {
	var buf bytes.Buffer
	r := body
	if cut >= 0 {
		r = io.LimitReader(body, cut)
	}
	chunk := make([]byte, 32<<10)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := r.Read(chunk)
		buf.Write(chunk[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if cut >= 0 {
		return nil, errCut
	}
	return buf.Bytes(), nil
}

// checkCond evaluates cond, including forced conflicts; s.mu must be held.
func (s *Store) checkCond(key, op string, cond objstore.Cond) error {
	if cond == objstore.Always {
		return nil
	}
	if s.conflicts > 0 {
		s.conflicts--
		return objstore.Errorf(storeName, op, key, objstore.ErrPreconditionFailed, "injected conflict")
	}
	o, exists := s.objects[key]
	if !cond.Holds(exists, o.etag) {
		return objstore.Errorf(storeName, op, key, objstore.ErrPreconditionFailed, "condition does not hold")
	}
	return nil
}

// Delete removes key; with cond.IfMatch only when its ETag matches.
func (s *Store) Delete(ctx context.Context, key string, cond objstore.Cond) error {
	if err := objstore.ValidKey(key); err != nil {
		return objstore.Wrap(storeName, "delete", key, objstore.ErrInvalid, err)
	}
	if cond.IfNoneMatch {
		return objstore.Errorf(storeName, "delete", key, objstore.ErrInvalid, "If-None-Match makes no sense on delete")
	}
	if _, _, err := s.enter(ctx, OpDelete, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkCond(key, "delete", cond); err != nil {
		return err
	}
	delete(s.objects, key)
	return nil
}

// List returns the objects whose key starts with prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	if err := objstore.ValidPrefix(prefix); err != nil {
		return nil, objstore.Wrap(storeName, "list", prefix, objstore.ErrInvalid, err)
	}
	if _, _, err := s.enter(ctx, OpList, prefix); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []objstore.Info
	for k, o := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, objstore.Info{Key: k, ETag: o.etag, Size: int64(len(o.data)), Modified: o.modified})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}
