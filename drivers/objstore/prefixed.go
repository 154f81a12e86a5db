package objstore

import (
	"context"
	"io"
	"strings"
)

// Prefixed returns a view of s in which every key lives under prefix (a
// valid key, without a trailing '/'). Keys passed in and returned are
// relative to it. Tests use it to share one bucket; a daemon may use it for
// its configured prefix.
// The view reads ranges when s does.
func Prefixed(s Store, prefix string) Store {
	v := prefixed{s: s, p: strings.Trim(prefix, "/") + "/"}
	if rr, ok := s.(RangeReader); ok {
		return prefixedRanges{v, rr}
	}
	return v
}

type prefixed struct {
	s Store
	p string
}

func (v prefixed) Get(ctx context.Context, key string) (*Object, error) {
	obj, err := v.s.Get(ctx, v.p+key)
	if err != nil {
		return nil, err
	}
	obj.Key = key
	return obj, nil
}

func (v prefixed) Put(ctx context.Context, key string, body io.Reader, cond Cond) (string, error) {
	return v.s.Put(ctx, v.p+key, body, cond)
}

func (v prefixed) Delete(ctx context.Context, key string, cond Cond) error {
	return v.s.Delete(ctx, v.p+key, cond)
}

func (v prefixed) List(ctx context.Context, prefix string) ([]Info, error) {
	infos, err := v.s.List(ctx, v.p+prefix)
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, v.p)
	}
	return infos, err
}

// prefixedRanges is the view of a store that reads ranges.
type prefixedRanges struct {
	prefixed
	rr RangeReader
}

func (v prefixedRanges) GetRange(ctx context.Context, key string, off, n int64) (*Object, error) {
	obj, err := v.rr.GetRange(ctx, v.p+key, off, n)
	if err != nil {
		return nil, err
	}
	obj.Key = key
	return obj, nil
}
