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
func Prefixed(s Store, prefix string) Store {
	return prefixed{s: s, p: strings.Trim(prefix, "/") + "/"}
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
