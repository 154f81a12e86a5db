package inject

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/drivers/objstore"
	objfake "github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/drivers/objstore/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func spec(name string) drivers.Spec {
	return drivers.Spec{Name: name, Command: []string{"run"}, Labels: drivers.Labels{drivers.LabelStack: "s"}}
}

// CHS-2: a rule parsed from the chaos op's params is validated; bad ones
// say what is wrong.
func TestParseRule(t *testing.T) {
	r, err := ParseRule(LayerDriver, map[string]string{"op": "start", "mode": "fail", "count": "2", "match": "s-web-"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != "transient" || r.Count != 2 || r.Match != "s-web-" {
		t.Fatalf("rule %+v", r)
	}
	bad := []map[string]string{
		{"op": "watch", "mode": "fail"},
		{"op": "start", "mode": "explode"},
		{"op": "start", "mode": "fail", "kind": "weird"},
		{"op": "start", "mode": "timeout"},
		{"op": "start", "mode": "latency", "delay": "soon"},
		{"op": "start", "mode": "fail", "count": "-1"},
		{"op": "start", "mode": "conflict"},
		{"op": "start", "mode": "fail", "colour": "red"},
	}
	for _, p := range bad {
		if _, err := ParseRule(LayerDriver, p); !errors.Is(err, ErrBadRule) {
			t.Errorf("%v: err %v, want ErrBadRule", p, err)
		}
	}
	if _, err := ParseRule(LayerStore, map[string]string{"op": "put", "mode": "conflict", "count": "1"}); err != nil {
		t.Errorf("store conflict: %v", err)
	}
}

// CHS-2: a driver failing N calls: exactly the next N calls of the op on
// matching instances fail with the kind; others pass.
func TestDriverFailNext(t *testing.T) {
	ctx := context.Background()
	f := NewWithPlant(nil, PlantNone)
	d := WrapDriver(fake.New(fake.Options{}), f)
	for _, n := range []string{"s-web-1-a", "s-db-1-b"} {
		if err := d.Create(ctx, spec(n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Arm(Rule{Layer: LayerDriver, Op: "start", Match: "s-web-", Mode: ModeFail, Kind: "transient", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, "s-db-1-b"); err != nil {
		t.Fatalf("unmatched instance: %v", err)
	}
	for i := range 2 {
		err := d.Start(ctx, "s-web-1-a")
		var de *drivers.Error
		if !errors.Is(err, drivers.ErrTransient) || !errors.As(err, &de) || de.Op != "start" {
			t.Fatalf("call %d: %v, want a transient *drivers.Error", i, err)
		}
	}
	if err := d.Start(ctx, "s-web-1-a"); err != nil {
		t.Fatalf("third call: %v", err)
	}
	rules := f.Rules()
	if len(rules) != 1 || rules[0].Hits != 2 || rules[0].Left != 0 {
		t.Fatalf("rules %+v", rules)
	}
	if f.Clear() != 1 || len(f.Rules()) != 0 {
		t.Fatal("clear")
	}
}

// CHS-2: a hanging call returns only when the caller's context ends, as
// a transient error wrapping the context's.
func TestDriverHangUntilCancelled(t *testing.T) {
	f := NewWithPlant(nil, PlantNone)
	d := WrapDriver(fake.New(fake.Options{}), f)
	if _, err := f.Arm(Rule{Layer: LayerDriver, Op: "inspect", Mode: ModeHang, Count: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := d.Inspect(ctx, "x")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("returned before cancel: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	err := <-done
	if !errors.Is(err, drivers.ErrTransient) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

// CHS-2: timeout and latency wait on the registry's clock (SUP-19): a
// fake clock must be advanced.
func TestDriverTimeoutAndLatencyOnFakeClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	f := NewWithPlant(clk, PlantNone)
	d := WrapDriver(fake.New(fake.Options{Clock: clk}), f)
	ctx := context.Background()
	if err := d.Create(ctx, spec("s-a-1-x")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Arm(Rule{Layer: LayerDriver, Op: "start", Mode: ModeTimeout, Delay: time.Second, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Arm(Rule{Layer: LayerDriver, Op: "inspect", Mode: ModeLatency, Delay: time.Second, Count: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Start(ctx, "s-a-1-x") }()
	if !clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no timer armed")
	}
	clk.Advance(time.Second)
	if err := <-done; !errors.Is(err, drivers.ErrTransient) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := d.Inspect(ctx, "s-a-1-x")
		got <- err
	}()
	if !clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no latency timer")
	}
	clk.Advance(time.Second)
	if err := <-got; err != nil {
		t.Fatalf("latency: the real call should run, got %v", err)
	}
}

// listCounter counts List calls on the driver it wraps.
type listCounter struct {
	drivers.Driver
	lists int
}

func (l *listCounter) List(ctx context.Context, sel drivers.Labels) ([]drivers.Status, error) {
	l.lists++
	return l.Driver.List(ctx, sel)
}

// The self-test's planted bugs: forget-adopt hides what ran when the
// driver was wrapped, and only that; stop-noop answers a stop without
// stopping.
func TestPlants(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	inner := fake.New(fake.Options{Clock: clk})
	run := func(n string) {
		t.Helper()
		if err := inner.Create(ctx, spec(n)); err != nil {
			t.Fatal(err)
		}
		if err := inner.Start(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	run("s-a-1-old")
	counted := &listCounter{Driver: inner}
	d := WrapDriver(counted, NewWithPlant(clk, PlantForgetAdopt))
	if counted.lists != 0 {
		t.Fatalf("the wrap listed the driver %d times; a boot must not wait on that", counted.lists)
	}
	clk.Advance(time.Second)
	run("s-a-1-new")
	if _, err := d.Inspect(ctx, "s-a-1-old"); !errors.Is(err, drivers.ErrNotFound) {
		t.Fatalf("hidden instance inspect: %v", err)
	}
	if st, err := d.Inspect(ctx, "s-a-1-new"); err != nil || st.State != drivers.StateRunning {
		t.Fatalf("an instance started after the wrap must be seen: %+v %v", st, err)
	}
	if all, _ := d.List(ctx, nil); len(all) != 1 || all[0].Name != "s-a-1-new" {
		t.Fatalf("List must show only the instance started after the wrap: %+v", all)
	}
	if all, _ := Unwrap(d).List(ctx, nil); len(all) != 2 {
		t.Fatalf("the unwrapped driver must still see both: %+v", all)
	}

	noop := WrapDriver(inner, NewWithPlant(nil, PlantStopNoop))
	if err := noop.Stop(ctx, "s-a-1-old", time.Second); err != nil {
		t.Fatal(err)
	}
	if st, _ := inner.Inspect(ctx, "s-a-1-old"); st.State != drivers.StateRunning {
		t.Fatalf("stop-noop stopped it: %s", st.State)
	}
	hide := WrapDriver(inner, NewWithPlant(clk, Plant("hide-exit:s-a-1-new")))
	var told int
	stop, err := hide.Watch("s-a-1-new", func(drivers.Exit) { told++ })
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := hide.Inspect(ctx, "s-a-1-new"); st.State != drivers.StateRunning {
		t.Fatalf("hide-exit before the end: %s", st.State)
	}
	inner.Die("s-a-1-new", 1)
	if st, _ := hide.Inspect(ctx, "s-a-1-new"); st.State != drivers.StateRunning {
		t.Fatalf("hide-exit must go on reporting the dead run running: %s", st.State)
	}
	if all, _ := hide.List(ctx, nil); len(all) != 2 || all[0].State != drivers.StateRunning || all[1].State != drivers.StateRunning {
		t.Fatalf("hide-exit List: %+v", all)
	}
	if st, _ := Unwrap(hide).Inspect(ctx, "s-a-1-new"); st.State == drivers.StateRunning {
		t.Fatal("the unwrapped driver must see the run ended")
	}
	stop()
	if told != 0 {
		t.Fatalf("hide-exit told the watch of the end %d times", told)
	}
	if _, err := ParsePlant("nonsense"); err == nil {
		t.Fatal("unknown plant accepted")
	}
	scoped := WrapDriver(inner, NewWithPlant(nil, Plant("stop-noop:other-")))
	if scoped.faults.Plant().Covers("s-a-1-old") {
		t.Fatal("a scoped plant covers an instance outside its prefix")
	}
	t.Setenv(PlantEnv, string(PlantStopNoop))
	f, err := New(nil)
	if err != nil || f.Plant() != PlantStopNoop {
		t.Fatalf("plant from env: %v %v", f, err)
	}
	_ = inner.Kill(ctx, "s-a-1-old")
}

// CHS-2: object store errors, latency and ETag conflicts; a conflict hits
// only conditional writes.
func TestStoreFaults(t *testing.T) {
	ctx := context.Background()
	f := NewWithPlant(nil, PlantNone)
	s := WrapStore(objfake.New(objfake.Options{}), "p", f)
	if _, err := f.Arm(Rule{Layer: LayerStore, Op: "get", Mode: ModeFail, Kind: "transient", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "p/k"); !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("get: %v", err)
	}
	if _, err := s.Get(ctx, "p/k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("second get reaches the store: %v", err)
	}
	if _, err := f.Arm(Rule{Layer: LayerStore, Op: "get", Mode: ModeFail, Kind: "transient", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRange(ctx, "p/k", 0, 10); !errors.Is(err, objstore.ErrTransient) {
		t.Fatalf("a ranged get is a get to the faults: %v", err)
	}
	if _, err := s.GetRange(ctx, "p/k", 0, 10); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("second ranged get reaches the store: %v", err)
	}
	if _, err := f.Arm(Rule{Layer: LayerStore, Op: "put", Mode: ModeConflict, Count: 1}); err != nil {
		t.Fatal(err)
	}
	etag, err := s.Put(ctx, "p/k", strings.NewReader("v1"), objstore.Always)
	if err != nil {
		t.Fatalf("unconditional put must pass a conflict rule: %v", err)
	}
	if _, err := s.Put(ctx, "p/k", strings.NewReader("v2"), objstore.IfMatch(etag)); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("conditional put: %v", err)
	}
	if _, err := s.Put(ctx, "p/k", strings.NewReader("v2"), objstore.IfMatch(etag)); err != nil {
		t.Fatalf("after the conflict: %v", err)
	}
}

// CHS-2: an expired lease: the record keeps holder and epoch, its expiry
// is in the past, and the holder's ETag no longer matches.
func TestExpireLease(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(5000, 0))
	f := NewWithPlant(clk, PlantNone)
	if _, err := f.ExpireLease(ctx, "h.example"); err == nil {
		t.Fatal("no store: want an error")
	}
	inner := objfake.New(objfake.Options{Clock: clk})
	s := WrapStore(inner, "pre", f)
	key, _ := lease.Key("pre", "h.example")
	rec := lease.Record{Version: lease.RecordVersion, Holder: "n1/x", Node: "n1", Epoch: 3, Expiry: clk.Now().Add(30 * time.Second), TTLMillis: 30000}
	etag, err := s.Put(ctx, key, bytes.NewReader(rec.Encode()), objstore.CreateOnly())
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ExpireLease(ctx, "h.example")
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != "n1/x" || got.Epoch != 3 || !got.Expiry.Before(clk.Now()) {
		t.Fatalf("record %+v", got)
	}
	obj, err := inner.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(obj.Body)
	_ = obj.Body.Close()
	if obj.ETag == etag {
		t.Fatal("ETag unchanged: the holder's renew would still win")
	}
	if stored, err := lease.Decode(data); err != nil || !stored.Expiry.Equal(got.Expiry) {
		t.Fatalf("stored %+v %v", stored, err)
	}
}

// CHS-3 no leaked goroutine: the dump is grouped by where goroutines wait
// and who made them.
func TestGroupGoroutines(t *testing.T) {
	dump := []byte(`goroutine 1 [running]:
main.main()
	/x/main.go:10 +0x1

goroutine 7 [chan receive]:
github.com/engenho/engenho/actors/replica.(*actor).probe(0xc0001)
	/x/replica.go:20 +0x2
created by github.com/engenho/engenho/actors/replica.(*actor).start in goroutine 5
	/x/replica.go:10 +0x3

goroutine 8 [chan receive]:
github.com/engenho/engenho/actors/replica.(*actor).probe(0xc0002)
	/x/replica.go:20 +0x2
created by github.com/engenho/engenho/actors/replica.(*actor).start in goroutine 6
	/x/replica.go:10 +0x3
`)
	got := GroupGoroutines(dump)
	want := "github.com/engenho/engenho/actors/replica.(*actor).probe <- github.com/engenho/engenho/actors/replica.(*actor).start"
	if got[want] != 2 || got["main.main <- ?"] != 1 || len(got) != 2 {
		t.Fatalf("groups %v", got)
	}
	if n := Goroutines(); len(n) == 0 {
		t.Fatal("no goroutines in this process")
	}
}
