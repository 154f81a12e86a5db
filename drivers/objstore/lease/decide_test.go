package lease

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/engenho/engenho/drivers/objstore"
)

var (
	t0   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ttl  = 30 * time.Second
	me   = Identity{Holder: "node-a/1", Node: "node-a"}
	them = Identity{Holder: "node-b/1", Node: "node-b"}
)

func held(by Identity, epoch uint64, expiry time.Time) Record {
	return Record{Version: RecordVersion, Holder: by.Holder, Node: by.Node, Epoch: epoch, Expiry: expiry, TTLMillis: ttl.Milliseconds()}
}

func cur(etag string, r Record) Current { return Current{Exists: true, ETag: etag, Record: r} }

// ACT-5: every acquire rule, one row each.
func TestDecide(t *testing.T) {
	released := held(them, 4, t0.Add(time.Hour))
	released.Released = true
	selfReleased := held(me, 4, t0)
	selfReleased.Released = true
	longTTL := held(them, 2, t0.Add(-time.Hour))
	longTTL.TTLMillis = (60 * time.Second).Milliseconds()
	seenAt := func(d time.Duration) Sighting { return Sighting{ETag: "e1", Since: t0.Add(-d)} }

	cases := []struct {
		name  string
		cur   Current
		seen  Sighting
		act   Action
		epoch uint64
		cond  objstore.Cond
		left  time.Duration
	}{
		{"absent: create-only, epoch 1", Current{}, Sighting{}, Create, 1, objstore.CreateOnly(), 0},
		{"released by another: take at once on its ETag", cur("e1", released), Sighting{}, Take, 5, objstore.IfMatch("e1"), 0},
		{"released by me: take again, new epoch", cur("e1", selfReleased), Sighting{}, Take, 5, objstore.IfMatch("e1"), 0},
		{"held by me: resume, same epoch", cur("e1", held(me, 3, t0.Add(-time.Hour))), Sighting{}, Resume, 3, objstore.IfMatch("e1"), 0},
		{"first sight, expired by its clock: still wait a full TTL", cur("e1", held(them, 3, t0.Add(-time.Hour))), Sighting{}, Wait, 0, objstore.Cond{}, ttl},
		{"unchanged for TTL minus 1ns: wait 1ns", cur("e1", held(them, 3, t0.Add(-time.Hour))), seenAt(ttl - 1), Wait, 0, objstore.Cond{}, 1},
		{"unchanged for a full TTL and expired: take", cur("e1", held(them, 3, t0.Add(-time.Hour))), seenAt(ttl), Take, 4, objstore.IfMatch("e1"), 0},
		{"unchanged for TTL but its expiry is 5s ahead: wait 5s", cur("e1", held(them, 3, t0.Add(5*time.Second))), seenAt(ttl), Wait, 0, objstore.Cond{}, 5 * time.Second},
		{"its clock an hour ahead: believed for one more TTL only", cur("e1", held(them, 3, t0.Add(time.Hour))), seenAt(ttl), Wait, 0, objstore.Cond{}, ttl},
		{"its clock an hour ahead, unchanged 2 TTL: take", cur("e1", held(them, 3, t0.Add(time.Hour))), seenAt(2 * ttl), Take, 4, objstore.IfMatch("e1"), 0},
		{"ETag changed since the sighting: start over", cur("e2", held(them, 3, t0.Add(-time.Hour))), seenAt(time.Hour), Wait, 0, objstore.Cond{}, ttl},
		{"holder's TTL longer than mine: wait its TTL", cur("e1", longTTL), seenAt(ttl), Wait, 0, objstore.Cond{}, 30 * time.Second},
		{"corrupt record: wait a TTL", Current{Exists: true, ETag: "e1", Corrupt: true}, Sighting{}, Wait, 0, objstore.Cond{}, ttl},
		{"corrupt record unchanged for a TTL: take, epoch 1", Current{Exists: true, ETag: "e1", Corrupt: true}, seenAt(ttl), Take, 1, objstore.IfMatch("e1"), 0},
		{"same holder id on another node is someone else", cur("e1", held(Identity{Holder: me.Holder, Node: "node-x"}, 3, t0)), Sighting{}, Wait, 0, objstore.Cond{}, ttl},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(t0, me, ttl, c.cur, c.seen)
			if d.Action != c.act {
				t.Fatalf("action %s, want %s", d.Action, c.act)
			}
			if d.Action == Wait {
				if d.Left != c.left {
					t.Fatalf("left %s, want %s", d.Left, c.left)
				}
				if d.Sighting.ETag != c.cur.ETag {
					t.Fatalf("sighting %+v does not track ETag %q", d.Sighting, c.cur.ETag)
				}
				return
			}
			if d.Next.Epoch != c.epoch || d.Cond != c.cond {
				t.Fatalf("epoch %d cond %+v, want %d %+v", d.Next.Epoch, d.Cond, c.epoch, c.cond)
			}
			if d.Next.Holder != me.Holder || d.Next.Node != me.Node || d.Next.Released || !d.Next.Expiry.Equal(t0.Add(ttl)) {
				t.Fatalf("next record %+v", d.Next)
			}
			if err := d.Next.validate(); err != nil {
				t.Fatalf("next record invalid: %v", err)
			}
		})
	}
}

// ACT-5: whatever the record and history, a lease held by someone else is
// taken only after the taker saw the same ETag for a full TTL on its own
// clock, and a wait is never longer than two TTLs.
func TestDecideNeverTrustsHolderClockAlone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := t0.Add(time.Duration(rapid.Int64Range(0, int64(10*time.Minute)).Draw(t, "now")))
		myTTL := time.Duration(rapid.Int64Range(int64(time.Second), int64(time.Minute)).Draw(t, "ttl"))
		recTTL := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(2*time.Minute)).Draw(t, "recTTL")).Truncate(time.Millisecond)
		expiry := t0.Add(time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(t, "expiry")))
		etag := rapid.SampledFrom([]string{"e1", "e2"}).Draw(t, "etag")
		seen := Sighting{}
		if rapid.Bool().Draw(t, "seenBefore") {
			seen = Sighting{ETag: rapid.SampledFrom([]string{"e1", "e2"}).Draw(t, "seenETag"),
				Since: now.Add(-time.Duration(rapid.Int64Range(0, int64(5*time.Minute)).Draw(t, "seenAgo")))}
		}
		rec := Record{Version: RecordVersion, Holder: them.Holder, Node: them.Node, Epoch: 7, Expiry: expiry, TTLMillis: recTTL.Milliseconds()}
		d := Decide(now, me, myTTL, cur(etag, rec), seen)
		eff := max(myTTL, recTTL)
		switch d.Action {
		case Take:
			if seen.ETag != etag || now.Sub(seen.Since) < eff {
				t.Fatalf("took over after seeing %q for %s (ETag now %q), TTL %s", seen.ETag, now.Sub(seen.Since), etag, eff)
			}
			if now.Before(expiry) && now.Sub(seen.Since) < 2*eff {
				t.Fatalf("took over before its expiry within the second TTL")
			}
			if d.Next.Epoch != 8 || d.Cond != objstore.IfMatch(etag) {
				t.Fatalf("take %+v", d)
			}
		case Wait:
			if d.Left <= 0 || d.Left > 2*eff {
				t.Fatalf("wait %s with TTL %s", d.Left, eff)
			}
			if d.Sighting.ETag != etag || d.Sighting.Since.After(now) {
				t.Fatalf("sighting %+v", d.Sighting)
			}
		default:
			t.Fatalf("action %s for a lease held by someone else", d.Action)
		}
	})
}

func TestRenewedAndReleased(t *testing.T) {
	r := held(me, 3, t0)
	n := Renewed(r, t0.Add(time.Minute), ttl)
	if n.Epoch != 3 || n.Holder != me.Holder || !n.Expiry.Equal(t0.Add(time.Minute+ttl)) || n.Released {
		t.Fatalf("renewed %+v", n)
	}
	rel := ReleasedRecord(r, t0.Add(time.Minute))
	if !rel.Released || rel.Epoch != 3 || !rel.Expiry.Equal(t0.Add(time.Minute)) {
		t.Fatalf("released %+v", rel)
	}
}
