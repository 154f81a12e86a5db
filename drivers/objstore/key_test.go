package objstore_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fake"
)

// SEC-3: keys that could escape a directory are refused.
func TestValidKey(t *testing.T) {
	good := []string{"a", "a/b", "engenho/app.example.com/lease.json", "x=1,y+2@z:3", "..."}
	bad := []string{"", "/a", "a/", "a//b", "..", "a/../b", ".", "./a", "a~b", "a b", "a\x00", "ü", strings.Repeat("a", 1025)}
	for _, k := range good {
		if err := objstore.ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q) = %v, want ok", k, err)
		}
	}
	for _, k := range bad {
		if objstore.ValidKey(k) == nil {
			t.Errorf("ValidKey(%q) = ok, want an error", k)
		}
	}
}

// SEC-3: whatever the input, a valid key never has an empty, "." or ".."
// segment, so joining it under a directory stays inside it.
func TestValidKeyProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.StringMatching(`[a-z./~_-]{0,12}`).Draw(t, "key")
		if objstore.ValidKey(key) != nil {
			return
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, "~") {
				t.Fatalf("ValidKey accepted %q", key)
			}
		}
	})
}

func TestJoin(t *testing.T) {
	k, err := objstore.Join("engenho/prod/", "app.example.com", "lease.json")
	if err != nil || k != "engenho/prod/app.example.com/lease.json" {
		t.Fatalf("Join = %q, %v", k, err)
	}
	if k, err := objstore.Join("", "h", "lease.json"); err != nil || k != "h/lease.json" {
		t.Fatalf("Join with empty prefix = %q, %v", k, err)
	}
	if _, err := objstore.Join("p", "..", "lease.json"); err == nil {
		t.Fatal("Join accepted a .. host")
	}
}

func TestCondHolds(t *testing.T) {
	cases := []struct {
		cond   objstore.Cond
		exists bool
		etag   string
		want   bool
	}{
		{objstore.Always, false, "", true},
		{objstore.Always, true, "e", true},
		{objstore.CreateOnly(), false, "", true},
		{objstore.CreateOnly(), true, "e", false},
		{objstore.IfMatch("e"), true, "e", true},
		{objstore.IfMatch("e"), true, "f", false},
		{objstore.IfMatch("e"), false, "", false},
	}
	for _, c := range cases {
		if got := c.cond.Holds(c.exists, c.etag); got != c.want {
			t.Errorf("%+v.Holds(%v, %q) = %v", c.cond, c.exists, c.etag, got)
		}
	}
}

func TestPrefixed(t *testing.T) {
	ctx := context.Background()
	base := fake.New(fake.Options{})
	view := objstore.Prefixed(base, "tenant/one")
	if _, err := view.Put(ctx, "h/lease.json", strings.NewReader("x"), objstore.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	if got := base.Keys(); len(got) != 1 || got[0] != "tenant/one/h/lease.json" {
		t.Fatalf("base keys %v", got)
	}
	list, err := view.List(ctx, "h/")
	if err != nil || len(list) != 1 || list[0].Key != "h/lease.json" {
		t.Fatalf("view list %+v %v", list, err)
	}
	obj, err := view.Get(ctx, "h/lease.json")
	if err != nil || obj.Key != "h/lease.json" {
		t.Fatalf("view get %+v %v", obj, err)
	}
	obj.Body.Close()
}

// PERF-5: a prefixed view reads ranges exactly when its store does.
func TestPrefixedRanges(t *testing.T) {
	ctx := context.Background()
	base := fake.New(fake.Options{})
	view := objstore.Prefixed(base, "tenant/one")
	if _, err := view.Put(ctx, "blob", strings.NewReader("0123456789"), objstore.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	rr, ok := view.(objstore.RangeReader)
	if !ok {
		t.Fatal("a view of a store that reads ranges does not")
	}
	obj, err := rr.GetRange(ctx, "blob", 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil || string(data) != "3456" || obj.Key != "blob" || obj.Size != 10 {
		t.Fatalf("view range: %q %+v %v", data, obj.Info, err)
	}
	if _, ok := objstore.Prefixed(plainStore{base}, "p").(objstore.RangeReader); ok {
		t.Fatal("a view of a store without ranges claims to read them")
	}
}

// plainStore hides every method beyond objstore.Store.
type plainStore struct{ objstore.Store }
