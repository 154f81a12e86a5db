package root_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/treetest"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/runtime/clock"
)

// oneReplica is a service with an exec healthcheck and one replica.
const oneReplica = `
services:
  api:
    command: ["server"]
    healthcheck:
      test: ["CMD", "check"]
      interval: 2s
      retries: 1
`

// stepBound is the default step bound (SVC-11), which treetest sets.
const stepBound = 2 * time.Minute

// perStack is the fake driver, counting the list, create and start calls
// made for each stack (instance names begin with the stack's). With deaf
// set, the first deafOp call for stack "hung" ignores its context and
// blocks until release is closed, as a driver stuck in the kernel or on a
// server that never answers would.
type perStack struct {
	*fake.Driver
	deafOp  string
	release chan struct{}

	mu    sync.Mutex
	calls map[string]int // "STACK op"
}

// enter counts a call and reports whether it is the one to go deaf.
func (d *perStack) enter(stack, op string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[stack+" "+op]++
	return stack == "hung" && op == d.deafOp && d.calls[stack+" "+op] == 1
}

// Calls is how many op calls were made for stack.
func (d *perStack) Calls(stack, op string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[stack+" "+op]
}

func stackOf(name string) string { s, _, _ := strings.Cut(name, "-"); return s }

// deafen is ctx as the driver sees it: for the deaf call, a context that
// never ends, once release is closed (the call then answers, too late).
func (d *perStack) deafen(ctx context.Context, deaf bool) context.Context {
	if !deaf {
		return ctx
	}
	<-d.release
	return context.Background()
}

func (d *perStack) List(ctx context.Context, sel drivers.Labels) ([]drivers.Status, error) {
	deaf := d.enter(sel[drivers.LabelStack], fake.OpList)
	return d.Driver.List(d.deafen(ctx, deaf), sel)
}

func (d *perStack) Create(ctx context.Context, spec drivers.Spec) error {
	deaf := d.enter(stackOf(spec.Name), fake.OpCreate)
	return d.Driver.Create(d.deafen(ctx, deaf), spec)
}

func (d *perStack) Start(ctx context.Context, name string) error {
	deaf := d.enter(stackOf(name), fake.OpStart)
	return d.Driver.Start(d.deafen(ctx, deaf), name)
}

// advanceUntil moves the fake clock in 100ms steps until cond holds or the
// clock reaches limit; it reports whether cond held.
func (e *env) advanceUntil(limit time.Time, cond func() bool) bool {
	for !cond() {
		if !e.clk.Now().Before(limit) {
			return cond()
		}
		time.Sleep(time.Millisecond)
		e.clk.Advance(100 * time.Millisecond)
	}
	return true
}

// SVC-11, SUP-4, SUP-5: a driver call that never answers is bounded by
// the service's step bound, 2m by default. While it hangs, another service
// on the same driver is created, started, probed and converges: the hung
// one holds nothing that stops it (no lock across the call). At 2m, and
// not before, the call times out, the hung service's step is released
// (its next call is made) and it converges too. Run for each call a
// service makes before it serves (the list that adopts, a replica's
// create and start), and for two kinds of silence: the fake's hang hook,
// which answers once its context ends, and a driver that ignores its
// context altogether (before the fix that one held the replica in
// `starting` for good). The fake clock is advanced; nothing sleeps
// through the 2 minutes.
func TestSVC11HungDriverCallIsBoundedAndStarvesNoOne(t *testing.T) {
	for _, deaf := range []bool{false, true} {
		for _, op := range []string{fake.OpList, fake.OpCreate, fake.OpStart} {
			name := "hang/" + op
			if deaf {
				name = "deaf/" + op
			}
			t.Run(name, func(t *testing.T) { hungCall(t, op, deaf) })
		}
	}
}

func hungCall(t *testing.T, op string, deaf bool) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	drv := &perStack{Driver: fake.New(fake.Options{Clock: clk, Seed: 1}), release: make(chan struct{}), calls: map[string]int{}}
	if deaf {
		drv.deafOp = op
	} else {
		drv.HangNext(op, 1) // the first call is the hung stack's: it is applied first
	}
	tree, err := treetest.New(treetest.Options{Clock: clk, Driver: drv, Sweep: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(drv.release); _ = tree.Stop() })
	e := &env{t: t, clk: clk, drv: drv.Driver, tree: tree}

	if _, err := tree.Apply("hung", oneReplica); err != nil {
		t.Fatal(err)
	}
	if !tree.WaitFor(10*time.Second, func() bool { return drv.Calls("hung", op) == 1 }) {
		t.Fatalf("the service never called %s", op)
	}
	hungAt := clk.Now()

	// The next service is not starved: it converges well inside the bound,
	// and is probed all the while the other call hangs.
	if _, err := tree.Apply("ok", oneReplica); err != nil {
		t.Fatal(err)
	}
	if !e.advanceUntil(hungAt.Add(stepBound/2), func() bool { return tree.Converged("ok") }) {
		t.Fatalf("the healthy service did not converge while %s hung; events:\n%s", op, tree.Events)
	}
	probes := drv.Driver.Calls(fake.OpExec)
	if e.advanceUntil(hungAt.Add(stepBound-time.Second), func() bool { return tree.Converged("hung") }) {
		t.Fatalf("the hung service converged before its %s timed out", op)
	}
	if n := drv.Calls("hung", op); n != 1 {
		t.Fatalf("%d %s calls for the hung service before the first timed out", n, op)
	}
	if n := drv.Driver.Calls(fake.OpExec) - probes; n < 10 {
		t.Errorf("the healthy service was probed %d times in ~1m while %s hung", n, op)
	}
	if !tree.Converged("ok") {
		t.Errorf("the healthy service left converged while %s hung: %+v", op, tree.Service("ok", "api"))
	}

	// At the bound the call times out and the service carries on.
	if !e.advanceUntil(hungAt.Add(stepBound+time.Minute), func() bool { return drv.Calls("hung", op) > 1 }) {
		t.Fatalf("%s was not tried again within 1m after its 2m bound; events:\n%s", op, tree.Events)
	}
	retried := clk.Now().Sub(hungAt)
	if retried < stepBound {
		t.Fatalf("%s tried again after %s, before the bound", op, retried)
	}
	serving := func() bool { s := tree.Service("hung", "api"); return tree.Converged("hung") && s.Healthy == 1 }
	if !e.advanceUntil(hungAt.Add(stepBound+5*time.Minute), serving) {
		t.Fatalf("the service whose %s hung did not converge after the timeout: %+v\nevents:\n%s", op, tree.Service("hung", "api"), tree.Events)
	}
	t.Logf("%s hung; tried again at +%s; serving at +%s", op, retried, clk.Now().Sub(hungAt))
}
