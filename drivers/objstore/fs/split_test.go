package fs_test

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/engenho/engenho/drivers/objstore"
)

// split sends alternate calls to two stores on the same directory, so
// every read-modify-write in the suite crosses between them.
type split struct {
	a, b objstore.Store
	n    *atomic.Uint64
}

func (s split) pick() objstore.Store {
	if s.n == nil {
		return s.a
	}
	if s.n.Add(1)%2 == 0 {
		return s.a
	}
	return s.b
}

func (s split) Get(ctx context.Context, key string) (*objstore.Object, error) {
	return s.pick().Get(ctx, key)
}

func (s split) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	return s.pick().Put(ctx, key, body, cond)
}

func (s split) Delete(ctx context.Context, key string, cond objstore.Cond) error {
	return s.pick().Delete(ctx, key, cond)
}

func (s split) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	return s.pick().List(ctx, prefix)
}

func (s split) GetRange(ctx context.Context, key string, off, n int64) (*objstore.Object, error) {
	return s.pick().(objstore.RangeReader).GetRange(ctx, key, off, n)
}
