package root_test

import (
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/internal/treetest"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
)

// passes runs n reconcile passes: the fake clock moves a sweep (30s) at a
// time, so every replica inspects its instance and every service plans.
func (e *env) passes(n int) {
	for i := 0; i < n; i++ {
		e.clk.Advance(30 * time.Second)
		time.Sleep(3 * time.Millisecond)
	}
}

// restartTree stops the tree and starts a new one on the same driver,
// event log and store, as a daemon restart does, and sends it m.
func (e *env) restartTree(m messages.ApplyStack) {
	e.t.Helper()
	events, store := e.tree.Events, e.tree.Store
	if err := e.tree.Stop(); err != nil {
		e.t.Fatal(err)
	}
	tree, err := treetest.New(treetest.Options{Clock: e.clk, Driver: e.drv, Sweep: 30 * time.Second, Events: events, Store: store})
	if err != nil {
		e.t.Fatal(err)
	}
	e.tree = tree
	e.t.Cleanup(func() { _ = tree.Stop() })
	tree.Send(m)
}

func (e *env) count(prefix string) int {
	n := 0
	for _, ev := range e.tree.Events.All() {
		if strings.HasPrefix(ev.Kind, prefix) {
			n++
		}
	}
	return n
}

// SVC-26: a reconcile pass that finds the stack as last announced emits no
// event: N idle passes, N restarts of the tree (every instance adopted
// again) and panics of the service and stack actors add 0 events, in a
// stack that serves and in one left failed (restart policy none). Before
// SVC-26 each restart and each panic said replica.restart_limit again.
// A flip serving -> failed -> serving adds exactly one stack phase event
// each way.
func TestSVC26QuietReconcile(t *testing.T) {
	e := newEnv(t)
	one := strings.Replace(webV1, "replicas: 3", "replicas: 1\n      restart_policy: {condition: none}", 1)
	m, err := e.tree.Apply("web", one)
	if err != nil {
		t.Fatal(err)
	}
	e.until("converged", func() bool { return e.tree.Converged("web") && e.count(messages.KindStackServing) == 1 })
	quiet := func(what string) {
		t.Helper()
		before := len(e.tree.Events.All())
		e.passes(20)
		for i := 0; i < 3; i++ {
			e.restartTree(m)
			e.passes(5)
		}
		for _, p := range []string{"root/stack:web/service:api", "root/stack:web"} {
			e.tree.Send(messages.Deliver{Path: p, Msg: messages.InjectPanic{Reason: "test"}})
			e.passes(5)
		}
		if got := besideRestarts(t, e.tree.Events.All()[before:], 2); len(got) != 0 {
			t.Fatalf("%s: idle passes, restarts and panics added %d events:\n%s", what, len(got), e.tree.Events)
		}
	}
	quiet("serving")

	// serving -> failed: one stack.failed (beside the replica's own
	// restart_limit and, 20s on, the service's health.unhealthy).
	e.drv.Die(e.tree.Service("web", "api").Replicas[0].Instance, 1)
	e.until("failed", func() bool { return e.count(messages.KindStackFailed) >= 1 })
	e.passes(3)
	if n := e.count("stack."); n != 2 {
		t.Fatalf("%d stack phase events after one flip, want serving then failed:\n%s", n, e.tree.Events)
	}
	quiet("failed")

	// failed -> serving: the operator retries; one stack.serving more.
	e.tree.Send(messages.ToService{Stack: "web", Service: "api", Msg: messages.ServiceRetry{}})
	e.until("serving again", func() bool { return e.count(messages.KindStackServing) == 2 })
	e.passes(3)
	if n := e.count("stack."); n != 3 {
		t.Fatalf("%d stack phase events after two flips, want 3:\n%s", n, e.tree.Events)
	}
	quiet("serving again")
}

// SVC-26: a rolled-back service is said to be rolled back once, not again
// by each restart of its actor or of the tree.
func TestSVC26RollbackAnnouncedOnce(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	e.drv.SetExec(func(name string, argv []string) (drivers.ExecResult, error) {
		if argv[len(argv)-1] == "v2" {
			return drivers.ExecResult{ExitCode: 1}, nil
		}
		return drivers.ExecResult{}, nil
	})
	v2 := strings.NewReplacer(`"v1"`, `"v2"`, "replicas: 3", "replicas: 3\n      update_config:\n        failure_action: rollback\n        order: start-first").Replace(webV1)
	m, err := e.tree.Apply("web", v2)
	if err != nil {
		t.Fatal(err)
	}
	e.until("rolled back", func() bool { return e.tree.Converged("web") && e.count(messages.KindRolloutRolledBack) == 1 })
	e.passes(3)
	before := len(e.tree.Events.All())
	for i := 0; i < 2; i++ {
		e.tree.Send(messages.Deliver{Path: "root/stack:web/service:api", Msg: messages.InjectPanic{Reason: "test"}})
		e.passes(5)
		e.restartTree(m)
		e.passes(5)
	}
	if got := besideRestarts(t, e.tree.Events.All()[before:], 2); len(got) != 0 {
		t.Fatalf("restarts added %d events:\n%s", len(got), e.tree.Events)
	}
}

// besideRestarts is evs without the actor.restarted events of the
// injected panics, of which there must be exactly panics: an actor
// restart is an action, announced each time (SUP-18), not a state.
func besideRestarts(t *testing.T, evs []messages.Event, panics int) []messages.Event {
	t.Helper()
	var rest []messages.Event
	n := 0
	for _, ev := range evs {
		if ev.Kind == messages.KindActorRestarted {
			n++
			continue
		}
		rest = append(rest, ev)
	}
	if n != panics {
		t.Fatalf("%d actor.restarted events for %d panics", n, panics)
	}
	return rest
}
