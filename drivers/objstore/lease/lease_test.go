package lease_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/drivers/objstore/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	ctx   = context.Background()
	start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ttl   = 30 * time.Second
)

func manager(t *testing.T, store objstore.Store, clk clock.Clock, node string) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(lease.Config{Store: store, Prefix: "engenho", Node: node, TTL: ttl, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func acquire(t *testing.T, m *lease.Manager, host string) *lease.Lease {
	t.Helper()
	l, err := m.Acquire(ctx, host)
	if err != nil {
		t.Fatalf("acquire %s: %v", host, err)
	}
	return l
}

func wantHeld(t *testing.T, m *lease.Manager, host string, left time.Duration) *lease.HeldError {
	t.Helper()
	_, err := m.Acquire(ctx, host)
	var held *lease.HeldError
	if !errors.As(err, &held) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire %s: %v, want a HeldError", host, err)
	}
	if held.Left != left {
		t.Fatalf("left %s, want %s", held.Left, left)
	}
	return held
}

func record(t *testing.T, store objstore.Store, host string) lease.Record {
	t.Helper()
	obj, err := store.Get(ctx, "engenho/"+host+"/lease.json")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	data, _ := io.ReadAll(obj.Body)
	r, err := lease.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ACT-5: an absent lease is created (epoch 1); someone else then gets a
// HeldError with the time left and Retry-After = left + 1s.
func TestAcquireAbsentThenHeld(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	a, b := manager(t, store, clk, "node-a"), manager(t, store, clk, "node-b")
	l := acquire(t, a, "app.example.com")
	if l.Epoch() != 1 || !l.ValidUntil().Equal(start.Add(ttl)) || !l.Valid() {
		t.Fatalf("epoch %d valid until %s", l.Epoch(), l.ValidUntil())
	}
	if r := record(t, store, "app.example.com"); r.Holder != a.Holder() || r.Node != "node-a" || r.Released {
		t.Fatalf("record %+v", r)
	}
	held := wantHeld(t, b, "app.example.com", ttl)
	if held.Holder != a.Holder() || held.Node != "node-a" || held.RetryAfter() != 31 {
		t.Fatalf("held %+v retry-after %d", held, held.RetryAfter())
	}
	clk.Advance(10*time.Second + 500*time.Millisecond)
	if got := wantHeld(t, b, "app.example.com", 19500*time.Millisecond).RetryAfter(); got != 21 {
		t.Fatalf("retry-after %d, want 21", got)
	}
}

// ACT-5: renewing every TTL/3 keeps the lease: each renew changes the ETag,
// so a taker's wait starts over and it never takes a live lease.
func TestRenewKeepsTakerWaiting(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	a, b := manager(t, store, clk, "node-a"), manager(t, store, clk, "node-b")
	l := acquire(t, a, "h")
	if l.RenewEvery() != 10*time.Second {
		t.Fatalf("renew every %s", l.RenewEvery())
	}
	for range 12 {
		wantHeld(t, b, "h", ttl)
		clk.Advance(l.RenewEvery())
		if err := l.Renew(ctx); err != nil {
			t.Fatalf("renew: %v", err)
		}
		if !l.ValidUntil().Equal(clk.Now().Add(ttl)) || l.Epoch() != 1 {
			t.Fatalf("after renew: valid until %s epoch %d", l.ValidUntil(), l.Epoch())
		}
	}
}

// ACT-5, ACT-14: a holder that stops renewing (its node died) loses the
// lease a full TTL after the taker first saw it unchanged, not before; the
// old holder's next renew is lost, and its ValidUntil had passed before
// the takeover.
func TestTakeoverAfterFullTTL(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	a, b := manager(t, store, clk, "node-a"), manager(t, store, clk, "node-b")
	old := acquire(t, a, "h")
	clk.Advance(20 * time.Second)
	wantHeld(t, b, "h", ttl) // first sighting at start+20s, though expiry is at +30s
	clk.Advance(ttl - time.Millisecond)
	wantHeld(t, b, "h", time.Millisecond)
	clk.Advance(time.Millisecond)
	taken := acquire(t, b, "h")
	if taken.Epoch() != 2 {
		t.Fatalf("takeover epoch %d, want 2", taken.Epoch())
	}
	if old.ValidUntil().After(clk.Now()) {
		t.Fatalf("old holder valid until %s, after the takeover at %s", old.ValidUntil(), clk.Now())
	}
	if err := old.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("old holder renew: %v, want ErrLost", err)
	}
	if !old.Lost() || old.Valid() {
		t.Fatal("old holder not marked lost")
	}
}

// ACT-5: the holder's clock is never trusted alone. Behind: its expiry
// looks long past, yet the taker waits a full TTL. Ahead: its expiry delays
// the takeover, but by at most one more TTL.
func TestHolderClockSkew(t *testing.T) {
	for _, c := range []struct {
		name string
		skew time.Duration
		wait time.Duration
	}{
		{"holder an hour behind", -time.Hour, ttl},
		{"holder 10s ahead", 10 * time.Second, ttl + 10*time.Second},
		{"holder an hour ahead", time.Hour, 2 * ttl},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			store := fake.New(fake.Options{Clock: clk})
			a := manager(t, store, skewed{clk, c.skew}, "node-a")
			b := manager(t, store, clk, "node-b")
			acquire(t, a, "h")
			wantHeld(t, b, "h", c.wait)
			clk.Advance(c.wait - time.Millisecond)
			wantHeld(t, b, "h", time.Millisecond)
			clk.Advance(time.Millisecond)
			acquire(t, b, "h")
		})
	}
}

// skewed is a clock off by a fixed amount (another node's wall clock).
type skewed struct {
	clock.Clock
	off time.Duration
}

func (s skewed) Now() time.Time { return s.Clock.Now().Add(s.off) }

// ACT-5: a renew after ValidUntil is lost without writing: by then a taker
// may already be running the host.
func TestRenewTooLateIsLost(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	l := acquire(t, manager(t, store, clk, "node-a"), "h")
	puts := store.Calls(fake.OpPut)
	clk.Advance(ttl)
	if l.Valid() {
		t.Fatal("lease valid at ValidUntil")
	}
	if err := l.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("late renew: %v", err)
	}
	if store.Calls(fake.OpPut) != puts {
		t.Fatal("late renew wrote to the store")
	}
}

// ACT-5: a failed renew (any error) is a lost lease; the Manager may then
// acquire the host afresh, and since nobody took it, resumes it (same
// epoch).
func TestFailedRenewIsLost(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	m := manager(t, store, clk, "node-a")
	l := acquire(t, m, "h")
	store.FailNext(fake.OpPut, 1, objstore.ErrTransient)
	err := l.Renew(ctx)
	if !errors.Is(err, lease.ErrLost) || !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("failed renew: %v, want ErrLost wrapping the cause", err)
	}
	if err := l.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew after lost: %v", err)
	}
	again := acquire(t, m, "h")
	if again.Epoch() != 1 {
		t.Fatalf("resumed epoch %d, want 1", again.Epoch())
	}
}

// ACT-5: release is a conditional put marking the record released (never
// a DELETE); another node then takes it at once with the next epoch.
func TestReleaseThenTakeAtOnce(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	a, b := manager(t, store, clk, "node-a"), manager(t, store, clk, "node-b")
	l := acquire(t, a, "h")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if store.Calls(fake.OpDelete) != 0 {
		t.Fatal("release used DELETE")
	}
	if r := record(t, store, "h"); !r.Released || r.Epoch != 1 {
		t.Fatalf("record after release %+v", r)
	}
	if err := l.Renew(ctx); !errors.Is(err, lease.ErrReleased) {
		t.Fatalf("renew after release: %v", err)
	}
	if got := acquire(t, b, "h"); got.Epoch() != 2 {
		t.Fatalf("epoch after release %d", got.Epoch())
	}
}

// ACT-8: a release whose write landed but whose answer was lost is
// recognised when retried.
func TestReleaseRetryAfterLostAnswer(t *testing.T) {
	clk := clock.NewFake(start)
	store := &lostAnswers{Store: fake.New(fake.Options{Clock: clk})}
	l := acquire(t, manager(t, store, clk, "node-a"), "h")
	store.next = 1
	if err := l.Release(ctx); !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("release with a lost answer: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("retried release: %v", err)
	}
	if r := record(t, store, "h"); !r.Released {
		t.Fatalf("record %+v", r)
	}
}

// ACT-5: a create whose answer was lost is recognised as ours.
func TestAcquireAfterLostAnswer(t *testing.T) {
	clk := clock.NewFake(start)
	store := &lostAnswers{Store: fake.New(fake.Options{Clock: clk}), next: 1}
	l := acquire(t, manager(t, store, clk, "node-a"), "h")
	if l.Epoch() != 1 {
		t.Fatalf("epoch %d", l.Epoch())
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("renew after the resumed acquire: %v", err)
	}
}

// lostAnswers performs the next n puts but answers them with a transient
// error, as when a connection drops after the server committed.
type lostAnswers struct {
	objstore.Store
	next int
}

func (s *lostAnswers) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	etag, err := s.Store.Put(ctx, key, body, cond)
	if err == nil && s.next > 0 {
		s.next--
		return "", objstore.Errorf("test", "put", key, objstore.ErrTransient, "answer lost")
	}
	return etag, err
}

// ACT-5: releasing a lease someone else took is ErrLost, and changes
// nothing.
func TestReleaseAfterTakeoverIsLost(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	a, b := manager(t, store, clk, "node-a"), manager(t, store, clk, "node-b")
	old := acquire(t, a, "h")
	wantHeld(t, b, "h", ttl)
	clk.Advance(ttl)
	acquire(t, b, "h")
	if err := old.Release(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("release after takeover: %v", err)
	}
	if r := record(t, store, "h"); r.Released || r.Node != "node-b" {
		t.Fatalf("record changed: %+v", r)
	}
}

// A Manager does not hand out the same host twice.
func TestBusy(t *testing.T) {
	clk := clock.NewFake(start)
	m := manager(t, fake.New(fake.Options{Clock: clk}), clk, "node-a")
	l := acquire(t, m, "h")
	if _, err := m.Acquire(ctx, "h"); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("second acquire: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	acquire(t, m, "h")
}

// ACT-6: a lease abandoned (its holder learned of another's claim, a fenced
// checkpoint) is no longer busy here: the manager may acquire it again.
func TestAbandonFreesTheHost(t *testing.T) {
	clk := clock.NewFake(start)
	m := manager(t, fake.New(fake.Options{Clock: clk}), clk, "node-a")
	l := acquire(t, m, "h")
	l.Abandon()
	if !l.Lost() || l.Valid() {
		t.Fatal("an abandoned lease is still valid")
	}
	acquire(t, m, "h") // ours (the record names this holder): taken again
}

// ACT-5: a corrupt lease object is not a free lease: it is taken only
// after a full TTL unchanged.
func TestCorruptRecord(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	store.Put(ctx, "engenho/h/lease.json", stringReader("garbage"), objstore.Always)
	m := manager(t, store, clk, "node-a")
	wantHeld(t, m, "h", ttl)
	clk.Advance(ttl)
	if l := acquire(t, m, "h"); l.Epoch() != 1 {
		t.Fatalf("epoch %d", l.Epoch())
	}
}

// SEC-3: a host name cannot walk out of the prefix.
func TestBadHost(t *testing.T) {
	m := manager(t, fake.New(fake.Options{}), clock.NewFake(start), "node-a")
	for _, h := range []string{"", "..", "a/b", "x~y"} {
		if _, err := m.Acquire(ctx, h); err == nil {
			t.Errorf("acquired host %q", h)
		}
	}
	if _, err := lease.NewManager(lease.Config{Store: fake.New(fake.Options{}), Node: "../n"}); err == nil {
		t.Error("accepted node ../n")
	}
}

// Transient store errors on Acquire come back as such, no lease.
func TestAcquireStoreDown(t *testing.T) {
	clk := clock.NewFake(start)
	store := fake.New(fake.Options{Clock: clk})
	m := manager(t, store, clk, "node-a")
	store.FailNext(fake.OpGet, 1, objstore.ErrTransient)
	if _, err := m.Acquire(ctx, "h"); !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("acquire with the store down: %v", err)
	}
	acquire(t, m, "h")
}
