package activator

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	objfake "github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/drivers/objstore/lease"
	"github.com/engenho/engenho/messages"
)

func seeded(cmd ...string) func(*stackfile.Service) {
	return func(s *stackfile.Service) { s.Hibernate.Seed = cmd }
}

// ACT-4: a fresh first boot runs the seed before the instance; a seed that
// fails fails the wake (503 to its waiters) and nothing serves; the next
// request wakes afresh and seeds again.
func TestACT4SeedMustSucceed(t *testing.T) {
	clk := clock.NewFake(t0)
	n := newNode(t, "n1", objfake.New(objfake.Options{Seed: 1}), clk, nodeOpts{})
	n.define(hostDef("web", "notes", "notes.localhost", seeded("/bin/sh", "-c", "exit 3")))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	code, _, retry := n.get("notes.localhost", "/count")
	if code != http.StatusServiceUnavailable || retry != "5" {
		t.Fatalf("failed seed: %d retry %q", code, retry)
	}
	if c := n.app.ops("create"); len(c) != 1 || !strings.Contains(c[0], "-seed-") {
		t.Fatalf("creates %v: only the seed may run", c)
	}
	eventually(t, clk, 0, "wake_failed event", func() bool { return n.events.count(messages.KindHostWakeFailed) == 1 })
	if f, ok := n.events.last(messages.KindHostWakeFailed); !ok || !strings.Contains(f.Message, "seed") {
		t.Fatalf("wake_failed event: %+v", f)
	}
	// The next request wakes afresh: a good seed, then the instance.
	good := hostDef("web", "notes", "notes.localhost", seeded("/bin/sh", "-c", "exit 0"))
	good.Deployment = "2" // (the seed is not part of the revision)
	n.define(good)
	eventually(t, clk, 0, "asleep on the new definition", func() bool {
		r, _ := n.table.Host("notes.localhost")
		return r.Status.State == messages.HostAsleep && r.Status.Deployment == "2"
	})
	if code, body, _ := n.get("notes.localhost", "/count"); code != http.StatusOK {
		t.Fatalf("after a good seed: %d %s", code, body)
	}
	c := n.app.ops("create")
	if len(c) != 3 || !strings.Contains(c[1], "-seed-") || strings.Contains(c[2], "-seed-") {
		t.Fatalf("creates %v: seed, then the instance", c)
	}
}

// ACT-5, ACT-3: a lease held by another node is a 503 whose Retry-After
// is the time left plus a second.
func TestACT5HeldLeaseRetryAfter(t *testing.T) {
	clk := clock.NewFake(t0)
	store := objfake.New(objfake.Options{Seed: 1})
	other, err := lease.NewManager(lease.Config{Store: store, Prefix: "engenho", Node: "other", TTL: 30 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(context.Background(), "notes.localhost"); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, "n1", store, clk, nodeOpts{})
	n.define(hostDef("web", "notes", "notes.localhost"))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	code, _, retry := n.get("notes.localhost", "/count")
	if code != http.StatusServiceUnavailable || retry != "31" {
		t.Fatalf("held lease: %d retry %q, want 503 and 31", code, retry)
	}
	if len(n.app.ops("create")) != 0 {
		t.Fatal("an instance started without the lease")
	}
}

// ACT-6: a lost lease (another node took it) stands the host down; it
// never checkpoints over the new holder's state.
func TestACT6LostLeaseStandsDown(t *testing.T) {
	clk := clock.NewFake(t0)
	store := objfake.New(objfake.Options{Seed: 1})
	n := newNode(t, "n1", store, clk, nodeOpts{})
	n.define(hostDef("web", "notes", "notes.localhost", func(s *stackfile.Service) { s.Hibernate.Replication = stackfile.ReplicationStream }))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	if code, _, _ := n.get("notes.localhost", "/count"); code != 200 {
		t.Fatal(code)
	}
	// Another holder writes the lease, as a taker would.
	ctx := context.Background()
	rec := lease.Record{Version: lease.RecordVersion, Holder: "zz/other", Node: "zz", Epoch: 9, Expiry: clk.Now().Add(time.Hour), TTLMillis: 30000}
	if _, err := store.Put(ctx, "engenho/notes.localhost/lease.json", bytes.NewReader(rec.Encode()), objstore.Always); err != nil {
		t.Fatal(err)
	}
	// ... and claims the manifest, fencing out earlier holders (ACT-6).
	cps, err := checkpoint.New(checkpoint.Config{Store: store, Prefix: "engenho", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cps.Claim(ctx, "notes.localhost", checkpoint.Writer{Holder: rec.Holder, Node: rec.Node, Epoch: rec.Epoch}); err != nil {
		t.Fatal(err)
	}
	manifest := func() string {
		obj, err := store.Get(ctx, "engenho/notes.localhost/manifest.json")
		if err != nil {
			return ""
		}
		obj.Body.Close()
		return obj.ETag
	}
	before := manifest()
	eventually(t, clk, time.Second, "stood down", func() bool { return n.events.count(messages.KindHostStoodDown) == 1 })
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	if len(n.app.running("notes")) != 0 {
		t.Fatalf("still running after a lost lease: %v", n.app.running("notes"))
	}
	if n.events.count(messages.KindLeaseLost) != 1 {
		t.Fatalf("lease.lost events: %d", n.events.count(messages.KindLeaseLost))
	}
	if after := manifest(); after != before {
		t.Fatal("the manifest changed after the lease was lost (a checkpoint over the new holder's state)")
	}
	if readLease(t, store, "notes.localhost").Holder != "zz/other" {
		t.Fatal("the new holder's lease was overwritten")
	}
	// Issue 18 (found by the chaos fault daemon.stop-awake): once the
	// other holder lets the host go, this node wakes it again. Before, a
	// lease lost to a fenced checkpoint stayed "held here" in the node's
	// lease manager, and every later wake failed as busy.
	rec.Released, rec.Expiry = true, clk.Now()
	if _, err := store.Put(ctx, "engenho/notes.localhost/lease.json", bytes.NewReader(rec.Encode()), objstore.Always); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := n.get("notes.localhost", "/count"); code != 200 {
		t.Fatalf("wake after the other holder released: %d %s", code, body)
	}
}

// ACT-6: the instance dying while awake stands the host down (sidecars
// and instance stopped); the next request wakes afresh.
func TestACT6InstanceDied(t *testing.T) {
	clk := clock.NewFake(t0)
	n := newNode(t, "n1", objfake.New(objfake.Options{Seed: 1}), clk, nodeOpts{})
	n.define(hostDef("web", "notes", "notes.localhost", withSidecar("ticker", "/bin/sh", "-c", "sleep 3600")))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	n.get("notes.localhost", "/count")
	eventually(t, clk, 0, "sidecar up", func() bool { return len(n.app.running("ticker")) == 1 })
	inst := n.app.running("-notes-1-")
	var main string
	for _, name := range inst {
		if !strings.Contains(name, "ticker") {
			main = name
		}
	}
	n.app.die(main)
	eventually(t, clk, 0, "asleep after the death", func() bool {
		return n.state("notes.localhost") == messages.HostAsleep && n.events.count(messages.KindHostStoodDown) == 1
	})
	if len(n.app.running("")) != 0 {
		t.Fatalf("left running: %v", n.app.running(""))
	}
	if code, body, _ := n.get("notes.localhost", "/count"); code != 200 || body != "2" {
		t.Fatalf("woke afresh: %d %q", code, body)
	}
}

// ACT-8: an instance stop that cannot be proven keeps the stop pending with
// the lease held; the sweep retries it.
func TestACT8UnprovenStopRetriedBySweep(t *testing.T) {
	n, clk := awakeNode(t)
	store := n.store
	// Three failed stops: pending across two sweeps, long enough for renewals.
	n.app.FailNext(fake.OpStop, 3, drivers.ErrTransient)
	n.app.FailNext(fake.OpInspect, 3, drivers.ErrTransient)
	pending := func() bool { return n.events.count(messages.KindHostStopPending) >= 1 }
	if !walkUntil(clk, 16*time.Minute, pending, n) {
		eventually(t, clk, 0, "stop pending", pending)
	}
	if st := n.state("notes.localhost"); st != messages.HostStopping {
		t.Fatalf("state %s, want stopping", st)
	}
	if readLease(t, store, "notes.localhost").Released {
		t.Fatal("lease released with the stop unproven")
	}
	renews := n.metrics.count("renew/ok")
	walk(clk, 45*time.Second, n)
	eventually(t, clk, time.Second, "asleep after the sweep's retry", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	if n.metrics.count("renew/ok") <= renews {
		t.Fatal("lease not renewed while the stop was pending")
	}
	if !readLease(t, store, "notes.localhost").Released {
		t.Fatal("lease not released after the stop")
	}
}

// ACT-8: a release that fails is owed (journal) and retried until it
// lands.
func TestACT8OwedReleaseLands(t *testing.T) {
	clk := clock.NewFake(t0)
	store := &failingLease{Store: objfake.New(objfake.Options{Seed: 1})}
	n := newNode(t, "n1", store, clk, nodeOpts{})
	n.define(hostDef("web", "notes", "notes.localhost"))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	n.get("notes.localhost", "/count")
	store.fail.Store(true) // releases (puts of lease.json marking it released) fail now
	owed := func() bool { return n.journal.owes("notes.localhost") }
	if !walkUntil(clk, 17*time.Minute, owed, n) {
		eventually(t, clk, 0, "owed", owed)
	}
	if n.events.count(messages.KindLeaseReleaseOwed) != 1 {
		t.Fatalf("owed events %d", n.events.count(messages.KindLeaseReleaseOwed))
	}
	store.fail.Store(false)
	walk(clk, 11*time.Second, n)
	eventually(t, clk, time.Second, "settled", func() bool { return !n.journal.owes("notes.localhost") })
	if !readLease(t, store, "notes.localhost").Released {
		t.Fatal("the owed release did not land")
	}
}
