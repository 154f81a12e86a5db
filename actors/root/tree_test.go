package root_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/internal/treetest"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/drivers/ports"
	"github.com/engenho/engenho/messages"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// webV1's probes never time out: the tests advance the fake clock in
// jumps (30s a pass) that would otherwise outrun a probe still in flight
// on a busy machine and fail it as "timed out".
const webV1 = `
services:
  api:
    command: ["server", "v1"]
    healthcheck:
      test: ["CMD", "check", "v1"]
      interval: 2s
      timeout: 24h
      retries: 1
    deploy:
      replicas: 3
`

type env struct {
	t    *testing.T
	clk  *clock.Fake
	drv  *fake.Driver
	tree *treetest.Tree
	// hostPorts, when set, hands out new instances' host ports (SVC-24).
	hostPorts interface {
		Take() (int, error)
		Adopt(...int)
		Release(...int)
	}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	drv := fake.New(fake.Options{Clock: clk, Seed: 1})
	e := &env{t: t, clk: clk, drv: drv}
	e.start()
	return e
}

// newEnvWith is newEnv with a host-port allocator (SVC-24).
func newEnvWith(t *testing.T, hp *ports.Allocator) *env {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := &env{t: t, clk: clk, drv: fake.New(fake.Options{Clock: clk, Seed: 1}), hostPorts: hp}
	e.start()
	return e
}

func (e *env) start() {
	tree, err := treetest.New(treetest.Options{Clock: e.clk, Driver: e.drv, Sweep: 30 * time.Second, HostPorts: e.hostPorts})
	if err != nil {
		e.t.Fatal(err)
	}
	e.tree = tree
	e.t.Cleanup(func() { _ = tree.Stop() })
}

// until advances the fake clock in small steps until cond holds.
func (e *env) until(what string, cond func() bool, show ...func() string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, f := range show {
				what += "\n" + f()
			}
			e.t.Fatalf("%s: not reached\nevents:\n%s", what, e.tree.Events)
		}
		time.Sleep(time.Millisecond)
		e.clk.Advance(100 * time.Millisecond)
	}
}

func (e *env) apply(yaml string) {
	e.t.Helper()
	if _, err := e.tree.Apply("web", yaml); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) instances() []drivers.Status {
	e.t.Helper()
	st, err := e.drv.List(e.t.Context(), drivers.Labels{drivers.LabelStack: "web"})
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) starts() map[string]int {
	out := map[string]int{}
	for _, st := range e.instances() {
		out[st.Name] = e.drv.Starts(st.Name)
	}
	return out
}

// SVC-6, SUP-1: a stack converges: every slot serves a healthy replica of
// the current revision, and the tree shows root → stack → service →
// replicas.
func TestStackConverges(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	st := e.tree.Service("web", "api")
	if st.Healthy != 3 || len(st.Replicas) != 3 {
		t.Fatalf("status %+v", st)
	}
	for i, r := range st.Replicas {
		if r.Slot != i+1 || !r.InRotation || r.Health != "healthy" {
			t.Fatalf("replica %+v", r)
		}
	}
	var paths []string
	for _, n := range e.tree.Sys.Tree.Snapshot() {
		paths = append(paths, n.Path)
	}
	got := strings.Join(paths, " ")
	if !strings.HasPrefix(got, "root root/stack:web root/stack:web/service:api root/stack:web/service:api/replica:1-") {
		t.Fatalf("tree: %s", got)
	}
}

// SUP-9, DMN-9: after the whole tree stops and a new one starts on the same
// driver, every running instance is adopted and none is restarted.
func TestTreeRestartAdoptsWithoutRestarting(t *testing.T) {
	e := newEnv(t)
	m, err := e.tree.Apply("web", webV1)
	if err != nil {
		t.Fatal(err)
	}
	e.until("converged", func() bool { return e.tree.Converged("web") })
	before := e.starts()
	if err := e.tree.Stop(); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.tree.Send(m)
	e.until("converged again", func() bool { return e.tree.Converged("web") })
	after := e.starts()
	if len(after) != 3 {
		t.Fatalf("instances after restart: %v", after)
	}
	for name, n := range before {
		if after[name] != n {
			t.Fatalf("instance %s started %d times, was %d", name, after[name], n)
		}
	}
}

// SVC-6, SUP-12: a replica whose instance dies is restarted in place and
// comes back into rotation; the others are untouched.
func TestKilledReplicaRestarted(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	before := e.starts()
	victim := e.tree.Service("web", "api").Replicas[1].Instance
	e.drv.Die(victim, 137)
	e.until("restarted", func() bool { return e.drv.Starts(victim) == 2 && e.tree.Converged("web") })
	for name, n := range e.starts() {
		if name != victim && n != before[name] {
			t.Fatalf("%s restarted although the fault was aimed at %s", name, victim)
		}
	}
	// One failure, one restart (issue 14: the kinds say what happened).
	if e.tree.Events.Count(messages.KindReplicaFailed) != 1 || e.tree.Events.Count(messages.KindReplicaRestarted) != 1 {
		t.Fatalf("events:\n%s", e.tree.Events)
	}
	// SUP-18: the failure's event names the actor, the instance, the
	// reason, the failure count and the next attempt.
	for _, ev := range e.tree.Events.All() {
		if ev.Kind != messages.KindReplicaFailed {
			continue
		}
		if ev.Instance != victim || !strings.Contains(ev.Actor, "service:api/replica:") ||
			!strings.HasPrefix(ev.Message, "exited with code 137; failure 1, next attempt ") {
			t.Fatalf("replica.failed event %+v", ev)
		}
	}
}

// SVC-13: a new revision that never turns healthy, with failure_action
// rollback, is rolled back and the old revision serves every slot again.
func TestBadRevisionRolledBack(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	e.drv.SetExec(func(name string, argv []string) (drivers.ExecResult, error) {
		if len(argv) > 1 && argv[len(argv)-1] == "v2" {
			return drivers.ExecResult{ExitCode: 1, Stdout: []byte("v2 is broken")}, nil
		}
		return drivers.ExecResult{}, nil
	})
	v1rev := e.tree.Service("web", "api").Revision
	v2 := strings.NewReplacer(`"v1"`, `"v2"`, "replicas: 3", "replicas: 3\n      update_config:\n        failure_action: rollback\n        order: start-first").Replace(webV1)
	e.apply(v2)
	e.until("rolled back", func() bool { return e.tree.Events.Count(messages.KindRolloutRolledBack) == 1 })
	e.until("converged on v1", func() bool {
		st := e.tree.Service("web", "api")
		return e.tree.Converged("web") && st.Revision == v1rev && len(st.Replicas) == 3
	})
	for _, r := range e.tree.Service("web", "api").Replicas {
		if r.Revision != v1rev {
			t.Fatalf("replica of revision %s after rollback", r.Revision)
		}
	}
}

// SVC-17: scale down retires the highest slots; remove retires everything.
func TestScaleDownAndRemove(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	e.apply(strings.Replace(webV1, "replicas: 3", "replicas: 1", 1))
	e.until("scaled to 1", func() bool { return e.tree.Converged("web") && len(e.instances()) == 1 })
	if st := e.tree.Service("web", "api"); st.Replicas[0].Slot != 1 {
		t.Fatalf("kept slot %d", st.Replicas[0].Slot)
	}
	e.tree.Send(messages.RemoveStack{Stack: "web"})
	e.until("removed", func() bool { return len(e.instances()) == 0 && len(e.tree.Board.Services("web")) == 0 })
}

// SUP-17: an operator's retry clears the backoff: a replica waiting out
// the ladder starts again at once.
func TestSUP17RetryClearsBackoff(t *testing.T) {
	e := newEnv(t)
	e.apply(strings.Replace(webV1, "replicas: 3", "replicas: 1", 1))
	e.until("converged", func() bool { return e.tree.Converged("web") })
	victim := e.tree.Service("web", "api").Replicas[0].Instance
	for i := 0; i < 4; i++ {
		n := e.drv.Starts(victim)
		e.drv.Die(victim, 1)
		if i < 3 {
			e.until("restarted at once", func() bool { return e.drv.Starts(victim) == n+1 })
		}
	}
	e.until("waiting on the ladder", func() bool {
		r := e.tree.Service("web", "api").Replicas
		return len(r) == 1 && r[0].Phase == "down" && r[0].Ledger.Failures == 4
	})
	n := e.drv.Starts(victim)
	e.tree.Send(messages.ToService{Stack: "web", Service: "api", Msg: messages.ServiceRetry{}})
	deadline := time.Now().Add(10 * time.Second)
	for e.drv.Starts(victim) == n {
		if time.Now().After(deadline) {
			t.Fatal("retry did not start the replica at once")
		}
		time.Sleep(time.Millisecond) // the fake clock stands still: no ladder delay can pass
	}
}

// SVC-10, SUP-9: a stopped intent survives a panic of the service actor
// and of the stack actor: the restarted actors keep the service stopped.
func TestSVC10StoppedIntentSurvivesActorRestarts(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	e.tree.Send(messages.ToService{Stack: "web", Service: "api", Msg: messages.ServiceIntent{Stopped: true}})
	stopped := func() bool {
		st := e.tree.Service("web", "api")
		if !st.Stopped || len(st.Replicas) != 3 {
			return false
		}
		for _, r := range st.Replicas {
			if r.Phase != "stopped" {
				return false
			}
		}
		return true
	}
	e.until("stopped", stopped)
	for _, path := range []string{"root/stack:web/service:api", "root/stack:web"} {
		starts := e.starts()
		e.tree.Send(messages.Deliver{Path: path, Msg: messages.InjectPanic{Reason: "test"}})
		time.Sleep(50 * time.Millisecond)
		e.until("still stopped after a panic of "+path, stopped)
		for i := 0; i < 20; i++ {
			e.clk.Advance(time.Second)
			time.Sleep(time.Millisecond)
		}
		for name, n := range e.starts() {
			if n != starts[name] {
				t.Fatalf("%s started again after a panic of %s", name, path)
			}
		}
	}
}

// SVC-8, SVC-9, PERF-3: the service's sweep (one listing of its instances
// each sweep interval) finds what no watch reported: an instance whose
// run began again behind engenho's back is verified before it serves
// again, and restarted by no one; an instance deleted behind its back is
// replaced in its slot. Instances as their replicas know them cost no
// inspection.
func TestSVC9SweepFindsWhatNoWatchSaw(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	inspects := e.drv.Calls(fake.OpInspect)
	e.clk.Advance(31 * time.Second) // a sweep
	e.until("a sweep listed", func() bool { return e.drv.Calls(fake.OpList) >= 2 })
	time.Sleep(20 * time.Millisecond)
	if n := e.drv.Calls(fake.OpInspect) - inspects; n != 0 {
		t.Fatalf("a sweep of unchanged instances made %d inspections", n)
	}

	reps := e.tree.Service("web", "api").Replicas
	rerun, gone := reps[0].Instance, reps[1].Instance
	starts := e.drv.Starts(rerun)
	if !e.drv.Rerun(rerun) {
		t.Fatal("rerun")
	}
	e.until("the rerun seen", func() bool {
		e.clk.Advance(time.Second)
		for _, ev := range e.tree.Events.All() {
			if ev.Kind == messages.KindReplicaRestarted && ev.Instance == rerun && ev.Level == messages.LevelWarn {
				return true
			}
		}
		return false
	})
	e.until("converged after the rerun", func() bool { return e.tree.Converged("web") })
	if n := e.drv.Starts(rerun); n != starts {
		t.Fatalf("the rerun instance was started %d more times", n-starts)
	}

	if !e.drv.Vanish(gone) {
		t.Fatal("vanish")
	}
	e.until("the missing instance replaced", func() bool {
		e.clk.Advance(time.Second)
		st := e.tree.Service("web", "api")
		if !e.tree.Converged("web") || len(st.Replicas) != 3 {
			return false
		}
		for _, r := range st.Replicas {
			if r.Instance == gone {
				return false
			}
		}
		return true
	})
	replaced := false
	for _, ev := range e.tree.Events.All() {
		if ev.Kind == messages.KindReplicaReplaced && ev.Instance == gone {
			replaced = true
		}
	}
	if !replaced {
		t.Fatalf("no replica.replaced event for %s:\n%s", gone, e.tree.Events)
	}
}

// SUP-9, SVC-6 (the soak's fault 947, seed 424242): a service actor that
// panics while one of its replicas waits to retry a create that failed
// leaves no phantom behind. That replica's actor ends with its service,
// and no instance of it exists for the restarted service to adopt: its
// entry must leave the board with it, or status shows the slot twice, the
// phantom "creating" forever.
func TestAPanicWhileACreateFailedLeavesNoPhantomReplica(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	e.drv.FailNext(fake.OpCreate, 1000, drivers.ErrTransient)
	e.apply(strings.Replace(webV1, "replicas: 3", "replicas: 4", 1))
	failed := func() bool {
		for _, r := range e.tree.Service("web", "api").Replicas {
			if r.Slot == 4 && r.Phase == "creating" && r.LastError != "" {
				return true
			}
		}
		return false
	}
	e.until("slot 4's create failed", failed)
	e.tree.Send(messages.Deliver{Path: "root/stack:web/service:api", Msg: messages.InjectPanic{Reason: "test"}})
	e.until("the service restarted", func() bool {
		for _, ev := range e.tree.Events.All() {
			if ev.Kind == messages.KindActorRestarted && ev.Actor == "root/stack:web/service:api" {
				return true
			}
		}
		return false
	})
	e.drv.ClearFaults()
	e.until("four replicas, one a slot, converged", func() bool {
		reps := e.tree.Service("web", "api").Replicas
		slots := map[int]int{}
		for _, r := range reps {
			slots[r.Slot]++
		}
		return e.tree.Converged("web") && len(reps) == 4 && len(slots) == 4
	}, func() string { return fmt.Sprintf("%+v", e.tree.Service("web", "api").Replicas) })
}
