package lease

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
)

// DefaultTTL is the lease TTL when Config leaves it zero (ACT-5).
const DefaultTTL = 30 * time.Second

// maxAttempts bounds Acquire's read-decide-write rounds when it keeps
// losing races or hitting ambiguous writes.
const maxAttempts = 4

// Errors, matched with errors.Is.
var (
	// ErrHeld: someone else holds the lease; the error is a *HeldError.
	ErrHeld = errors.New("lease held by another holder")
	// ErrLost: the lease is no longer ours (a renew failed or came too
	// late, or another holder took it). Stand down; do not checkpoint.
	ErrLost = errors.New("lease lost")
	// ErrBusy: this Manager already holds, or is acquiring, that host.
	ErrBusy = errors.New("lease already held or being acquired here")
	// ErrReleased: the lease was released; it cannot be renewed.
	ErrReleased = errors.New("lease released")
)

// HeldError says who holds a lease and how long until a takeover is
// allowed.
type HeldError struct {
	Host, Holder, Node string
	Epoch              uint64
	Left               time.Duration
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %s held by %s on node %s (epoch %d), takeover allowed in %s", e.Host, e.Holder, e.Node, e.Epoch, e.Left)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// RetryAfter is the Retry-After header value in whole seconds: the time
// left, rounded up, plus one second (ACT-5).
func (e *HeldError) RetryAfter() int {
	return int(math.Ceil(e.Left.Seconds())) + 1
}

// Config configures a Manager.
type Config struct {
	Store objstore.Store
	// Prefix is the key prefix (may be empty or contain '/').
	Prefix string
	// Node is this node's name (a key segment).
	Node string
	// Holder identifies this daemon run; default Node plus a random
	// suffix, so each run is a distinct holder. Reuse one across restarts
	// only if the previous run is known to be gone.
	Holder string
	// TTL, default 30s.
	TTL   time.Duration
	Clock clock.Clock
}

// Manager acquires leases for one daemon run. Safe for concurrent use.
type Manager struct {
	store  objstore.Store
	prefix string
	self   Identity
	ttl    time.Duration
	clock  clock.Clock

	mu     sync.Mutex
	seen   map[string]Sighting // host -> what we saw of another's lease
	active map[string]bool     // hosts held or being acquired here
}

// NewManager checks cfg and returns a Manager.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("lease: no store")
	}
	if err := objstore.ValidName(cfg.Node); err != nil {
		return nil, fmt.Errorf("lease: node: %w", err)
	}
	if cfg.Holder == "" {
		var b [8]byte
		rand.Read(b[:])
		cfg.Holder = cfg.Node + "/" + hex.EncodeToString(b[:])
	}
	if err := validHolder(cfg.Holder); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < 3*time.Millisecond || cfg.TTL > maxTTL {
		return nil, fmt.Errorf("lease: ttl %s out of range", cfg.TTL)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if _, err := objstore.Join(cfg.Prefix, "h", "lease.json"); err != nil {
		return nil, fmt.Errorf("lease: prefix: %w", err)
	}
	return &Manager{
		store: cfg.Store, prefix: cfg.Prefix, ttl: cfg.TTL, clock: cfg.Clock,
		self: Identity{Holder: cfg.Holder, Node: cfg.Node},
		seen: map[string]Sighting{}, active: map[string]bool{},
	}, nil
}

// Holder is this Manager's holder id.
func (m *Manager) Holder() string { return m.self.Holder }

// Holds reports whether r was written by this manager's holder and node.
func (m *Manager) Holds(r Record) bool { return m.self.Holds(r) }

// TTL is the lease TTL.
func (m *Manager) TTL() time.Duration { return m.ttl }

// Key is the object key of host's lease.
func Key(prefix, host string) (string, error) {
	if err := objstore.ValidName(host); err != nil {
		return "", fmt.Errorf("lease: host: %w", err)
	}
	return objstore.Join(prefix, host, "lease.json")
}

// Acquire takes host's lease, or fails with a *HeldError (ErrHeld) when
// someone else holds it, ErrBusy when this Manager already has it, or a
// store error.
func (m *Manager) Acquire(ctx context.Context, host string) (*Lease, error) {
	key, err := Key(m.prefix, host)
	if err != nil {
		return nil, err
	}
	if !m.claim(host) {
		return nil, fmt.Errorf("lease %s: %w", host, ErrBusy)
	}
	l, err := m.acquire(ctx, host, key)
	if err != nil {
		m.forget(host)
		return nil, err
	}
	return l, nil
}

func (m *Manager) acquire(ctx context.Context, host, key string) (*Lease, error) {
	var lastErr error
	var last Current
	for range maxAttempts {
		cur, err := read(ctx, m.store, key)
		if err != nil {
			return nil, fmt.Errorf("lease %s: reading: %w", host, err)
		}
		last = cur
		now := m.clock.Now()
		d := Decide(now, m.self, m.ttl, cur, m.sighting(host))
		m.remember(host, d.Sighting)
		if d.Action == Wait {
			return nil, &HeldError{Host: host, Holder: cur.Record.Holder, Node: cur.Record.Node, Epoch: cur.Record.Epoch, Left: d.Left}
		}
		etag, err := m.store.Put(ctx, key, bytes.NewReader(d.Next.Encode()), d.Cond)
		if err == nil {
			return &Lease{m: m, host: host, key: key, rec: d.Next, etag: etag, validUntil: now.Add(m.ttl)}, nil
		}
		// Lost a race, or a write whose outcome is unknown: read again.
		if !errors.Is(err, objstore.ErrPreconditionFailed) && !errors.Is(err, objstore.ErrTransient) {
			return nil, fmt.Errorf("lease %s: %s: %w", host, d.Action, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lease %s: %s: %w", host, d.Action, err)
		}
		lastErr = err
	}
	if errors.Is(lastErr, objstore.ErrPreconditionFailed) {
		// Others keep winning the race: as good as held, try again soon.
		return nil, &HeldError{Host: host, Holder: last.Record.Holder, Node: last.Record.Node, Epoch: last.Record.Epoch}
	}
	return nil, fmt.Errorf("lease %s: gave up after %d attempts: %w", host, maxAttempts, lastErr)
}

// read fetches and decodes the lease object.
func read(ctx context.Context, store objstore.Store, key string) (Current, error) {
	obj, err := store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return Current{}, nil
	}
	if err != nil {
		return Current{}, err
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(io.LimitReader(obj.Body, maxRecordBytes+1))
	if err != nil {
		return Current{}, objstore.Wrap("lease", "read", key, objstore.ErrTransient, err)
	}
	rec, err := Decode(data)
	return Current{Exists: true, ETag: obj.ETag, Record: rec, Corrupt: err != nil}, nil
}

func (m *Manager) claim(host string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active[host] {
		return false
	}
	m.active[host] = true
	return true
}

func (m *Manager) forget(host string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.active, host)
}

func (m *Manager) sighting(host string) Sighting {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[host]
}

func (m *Manager) remember(host string, s Sighting) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s == (Sighting{}) {
		delete(m.seen, host)
	} else {
		m.seen[host] = s
	}
}

// Inspect reads host's lease without changing anything (status, tools).
// ok is false when there is no lease object.
func (m *Manager) Inspect(ctx context.Context, host string) (rec Record, ok bool, err error) {
	key, err := Key(m.prefix, host)
	if err != nil {
		return Record{}, false, err
	}
	cur, err := read(ctx, m.store, key)
	if err != nil || !cur.Exists {
		return Record{}, false, err
	}
	if cur.Corrupt {
		return Record{}, true, fmt.Errorf("lease %s: object is not a valid record", host)
	}
	return cur.Record, true, nil
}

// Lease is a held lease. Safe for concurrent use, though one owner (the
// host actor) normally drives it.
type Lease struct {
	m    *Manager
	host string
	key  string

	op sync.Mutex // serialises Renew and Release (held across I/O)
	mu sync.Mutex // guards the fields below (never held across I/O)

	rec        Record
	etag       string
	validUntil time.Time
	lost       bool
	released   bool
}

// Host is the leased host.
func (l *Lease) Host() string { return l.host }

// Epoch is the lease epoch; it grows by one on every change of holder.
func (l *Lease) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.Epoch
}

// Record is the record last written.
func (l *Lease) Record() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

// ETag is the store's ETag of the record last written. A release that
// failed is owed by it (ACT-8): retried later, even by another daemon run,
// as a put conditional on this ETag, it can only land on the very record
// this holder wrote, never on a lease renewed or taken since.
func (l *Lease) ETag() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.etag
}

// ValidUntil is when the lease must be considered gone if not renewed: the
// start of the last successful write plus TTL, on this node's clock.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// RenewEvery is how often the caller renews: TTL/3.
func (l *Lease) RenewEvery() time.Duration { return l.m.ttl / 3 }

// Valid reports whether the lease may still be acted on now: not lost, not
// released and before ValidUntil.
func (l *Lease) Valid() bool {
	now := l.m.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && !l.released && now.Before(l.validUntil)
}

// Lost reports whether the lease was lost.
func (l *Lease) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Renew extends the lease with a put conditional on the last ETag. Any
// failure loses the lease: the result is an error matching ErrLost (and
// wrapping the cause). A renew attempted at or after ValidUntil is lost
// without writing.
func (l *Lease) Renew(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	rec, etag, validUntil, lost, released := l.rec, l.etag, l.validUntil, l.lost, l.released
	l.mu.Unlock()
	switch {
	case released:
		return fmt.Errorf("lease %s: %w", l.host, ErrReleased)
	case lost:
		return fmt.Errorf("lease %s: %w", l.host, ErrLost)
	}
	now := l.m.clock.Now()
	if !now.Before(validUntil) {
		l.lose()
		return fmt.Errorf("lease %s: renew at %s, valid only until %s: %w", l.host, now.Format(time.RFC3339Nano), validUntil.Format(time.RFC3339Nano), ErrLost)
	}
	next := Renewed(rec, now, l.m.ttl)
	newETag, err := l.m.store.Put(ctx, l.key, bytes.NewReader(next.Encode()), objstore.IfMatch(etag))
	if err != nil {
		l.lose()
		return fmt.Errorf("lease %s: renew: %w: %w", l.host, ErrLost, err)
	}
	l.mu.Lock()
	l.rec, l.etag, l.validUntil = next, newETag, now.Add(l.m.ttl)
	l.mu.Unlock()
	return nil
}

// Abandon marks the lease lost without writing anything: the caller
// learned another holder has the host (a checkpoint or restore fenced by
// the manifest's claim). The Manager may then acquire the host again;
// without this it would refuse every later Acquire of it as busy.
func (l *Lease) Abandon() { l.lose() }

// lose marks the lease lost and frees the host in the Manager.
func (l *Lease) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked()
}

// loseLocked marks the lease lost and frees the host in the Manager.
func (l *Lease) loseLocked() {
	if !l.lost {
		l.lost = true
		l.m.forget(l.host)
	}
}

// Release marks the lease released with a put conditional on its ETag, so
// any node may take it at once. It is safe to retry after an error (a
// release owed, ACT-8): a release that landed but whose answer was lost is
// recognised. If another holder has the lease the result matches ErrLost:
// there is nothing left to release. Release after a lost renew is allowed
// and frees the lease if nobody took it meanwhile.
func (l *Lease) Release(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	rec, etag, released := l.rec, l.etag, l.released
	l.mu.Unlock()
	if released {
		return nil
	}
	for range maxAttempts {
		next := ReleasedRecord(rec, l.m.clock.Now())
		newETag, err := l.m.store.Put(ctx, l.key, bytes.NewReader(next.Encode()), objstore.IfMatch(etag))
		if err == nil {
			l.settle(next, newETag, true)
			return nil
		}
		if !errors.Is(err, objstore.ErrPreconditionFailed) {
			return fmt.Errorf("lease %s: release: %w", l.host, err)
		}
		// Our ETag is stale: either an earlier write of ours landed
		// unanswered, or someone else has the lease.
		cur, rerr := read(ctx, l.m.store, l.key)
		if rerr != nil {
			return fmt.Errorf("lease %s: release: reading after a conflict: %w", l.host, rerr)
		}
		if !cur.Exists || cur.Corrupt || cur.Record.Holder != rec.Holder || cur.Record.Epoch != rec.Epoch {
			l.lose()
			return fmt.Errorf("lease %s: release: %w (now held by %q)", l.host, ErrLost, cur.Record.Holder)
		}
		rec, etag = cur.Record, cur.ETag
		if cur.Record.Released {
			l.settle(rec, etag, true)
			return nil
		}
		l.settle(rec, etag, false)
	}
	return fmt.Errorf("lease %s: release: gave up after %d attempts", l.host, maxAttempts)
}

// settle records the latest record and ETag; a release frees the host.
func (l *Lease) settle(rec Record, etag string, released bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec, l.etag = rec, etag
	if released {
		l.released = true
		l.loseLocked()
	}
}
