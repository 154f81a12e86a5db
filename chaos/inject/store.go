package inject

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/lease"
)

// Store wraps an objstore.Store with the registry's faults.
type Store struct {
	inner  objstore.Store
	prefix string
	faults *Faults
}

var (
	_ objstore.Store       = (*Store)(nil)
	_ objstore.RangeReader = (*Store)(nil)
)

// WrapStore returns s seen through f's faults. prefix is the key prefix
// the daemon uses on s (objstore.prefix), so ExpireLease finds a host's
// lease. The newest wrapped store is the one ExpireLease acts on.
func WrapStore(s objstore.Store, prefix string, f *Faults) *Store {
	w := &Store{inner: s, prefix: prefix, faults: f}
	f.mu.Lock()
	f.stores = append(f.stores[:0], w)
	f.mu.Unlock()
	return w
}

func (w *Store) hit(ctx context.Context, op, key string, conditional bool) error {
	return w.faults.hit(ctx, LayerStore, "", op, key, conditional, func(kind, cause error) error {
		return objstore.Wrap("chaos", op, key, kind, cause)
	})
}

func conditional(c objstore.Cond) bool { return c.IfNoneMatch || c.IfMatch != "" }

func (w *Store) Get(ctx context.Context, key string) (*objstore.Object, error) {
	if err := w.hit(ctx, "get", key, false); err != nil {
		return nil, err
	}
	return w.inner.Get(ctx, key)
}

// GetRange is a get to the faults. The daemon's stores (fs, s3) all read
// ranges; a wrapped store that does not is refused.
func (w *Store) GetRange(ctx context.Context, key string, off, n int64) (*objstore.Object, error) {
	if err := w.hit(ctx, "get", key, false); err != nil {
		return nil, err
	}
	rr, ok := w.inner.(objstore.RangeReader)
	if !ok {
		return nil, objstore.Errorf("chaos", "get", key, objstore.ErrInvalid, "the wrapped store (%T) does not read ranges", w.inner)
	}
	return rr.GetRange(ctx, key, off, n)
}

func (w *Store) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if err := w.hit(ctx, "put", key, conditional(cond)); err != nil {
		return "", err
	}
	return w.inner.Put(ctx, key, body, cond)
}

func (w *Store) Delete(ctx context.Context, key string, cond objstore.Cond) error {
	if err := w.hit(ctx, "delete", key, conditional(cond)); err != nil {
		return err
	}
	return w.inner.Delete(ctx, key, cond)
}

func (w *Store) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	if err := w.hit(ctx, "list", prefix, false); err != nil {
		return nil, err
	}
	return w.inner.List(ctx, prefix)
}

// ExpireLease rewrites host's lease record on the newest wrapped store so
// that it expired a moment ago, holder and epoch unchanged. The ETag
// changes, so the holder's next renew fails as if its lease had run out
// while it was not looking (ACT-5, ACT-6), and another node may take it.
func (f *Faults) ExpireLease(ctx context.Context, host string) (lease.Record, error) {
	f.mu.Lock()
	var w *Store
	if len(f.stores) > 0 {
		w = f.stores[len(f.stores)-1]
	}
	f.mu.Unlock()
	if w == nil {
		return lease.Record{}, fmt.Errorf("expire lease %s: this daemon has no object store open", host)
	}
	key, err := lease.Key(w.prefix, host)
	if err != nil {
		return lease.Record{}, err
	}
	obj, err := w.inner.Get(ctx, key)
	if err != nil {
		return lease.Record{}, fmt.Errorf("expire lease %s: %w", host, err)
	}
	data, err := io.ReadAll(io.LimitReader(obj.Body, 1<<16))
	_ = obj.Body.Close()
	if err != nil {
		return lease.Record{}, fmt.Errorf("expire lease %s: reading: %w", host, err)
	}
	rec, err := lease.Decode(data)
	if err != nil {
		return lease.Record{}, fmt.Errorf("expire lease %s: %w", host, err)
	}
	rec.Expiry = f.clk.Now().Add(-rec.TTL())
	if _, err := w.inner.Put(ctx, key, bytes.NewReader(rec.Encode()), objstore.IfMatch(obj.ETag)); err != nil {
		return lease.Record{}, fmt.Errorf("expire lease %s: %w", host, err)
	}
	return rec, nil
}
