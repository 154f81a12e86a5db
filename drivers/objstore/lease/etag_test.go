package lease_test

import (
	"testing"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore/fake"
)

// ACT-8: ETag is the ETag of the record the holder last wrote, so an owed
// release can be made conditional on exactly that record.
func TestETagFollowsEveryWrite(t *testing.T) {
	store := fake.New(fake.Options{Seed: 1})
	clk := clock.NewFake(start)
	l := acquire(t, manager(t, store, clk, "n1"), "h")
	obj, err := store.Get(ctx, "engenho/h/lease.json")
	if err != nil {
		t.Fatal(err)
	}
	obj.Body.Close()
	if l.ETag() == "" || l.ETag() != obj.ETag {
		t.Fatalf("after acquire: ETag %q, stored %q", l.ETag(), obj.ETag)
	}
	before := l.ETag()
	clk.Advance(ttl / 3)
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	obj, err = store.Get(ctx, "engenho/h/lease.json")
	if err != nil {
		t.Fatal(err)
	}
	obj.Body.Close()
	if l.ETag() == before || l.ETag() != obj.ETag {
		t.Fatalf("after renew: ETag %q (was %q), stored %q", l.ETag(), before, obj.ETag)
	}
}
