package supervise

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder collects what the test actors did, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
	pids   map[string]*actor.PID
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func (r *recorder) pid(name string) *actor.PID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pids[name]
}

type boom struct{}
type hang struct{}

// worker is a leaf actor that records its start and stop and panics on boom.
type worker struct {
	h   *Handle
	rec *recorder
}

func (w *worker) Receive(c *actor.Context) {
	switch c.Message().(type) {
	case actor.Started:
		w.rec.mu.Lock()
		w.rec.pids[w.h.Name()] = c.PID()
		w.rec.mu.Unlock()
		w.rec.add("start " + w.h.Name())
	case actor.Stopped:
		w.rec.add("stop " + w.h.Name())
	case boom:
		panic("boom in " + w.h.Name())
	case hang:
		time.Sleep(100 * time.Millisecond) // a Receive that will not finish soon
	}
}

func workerSpec(name string, rec *recorder, r RestartType) ChildSpec {
	return ChildSpec{Name: name, Restart: r, Produce: func(h *Handle) actor.Receiver { return &worker{h: h, rec: rec} }}
}

// sup is a supervisor actor that starts the given children in order.
type sup struct {
	h     *Handle
	opts  Options
	specs []ChildSpec
	kids  *Children
	rec   *recorder
}

func (s *sup) Receive(c *actor.Context) {
	switch c.Message().(type) {
	case actor.Started:
		s.kids = s.h.Supervise(s.opts)
		for _, sp := range s.specs {
			if err := s.kids.Start(sp); err != nil {
				panic(err)
			}
		}
		if s.rec != nil {
			s.rec.mu.Lock()
			s.rec.pids[s.h.Name()] = c.PID()
			s.rec.mu.Unlock()
			s.rec.add("start " + s.h.Name())
		}
	case actor.Stopped:
		if s.rec != nil {
			s.rec.add("stop " + s.h.Name())
		}
	case boom:
		panic("boom in " + s.h.Name())
	}
}

func supSpec(name string, opts Options, rec *recorder, r RestartType, specs ...ChildSpec) ChildSpec {
	return ChildSpec{Name: name, Restart: r, Produce: func(h *Handle) actor.Receiver {
		return &sup{h: h, opts: opts, specs: specs, rec: rec}
	}}
}

type harness struct {
	t      *testing.T
	engine *actor.Engine
	sys    *System
	clk    *clock.Fake
	rec    *recorder
	root   *actor.PID
	exits  chan messages.ChildExited
}

func newHarness(t *testing.T, opts Options, children ...func(*recorder) ChildSpec) *harness {
	t.Helper()
	return newHarnessInjecting(t, true, opts, children...)
}

// newHarnessInjecting is newHarness with AllowInjectPanic set to allow.
func newHarnessInjecting(t *testing.T, allow bool, opts Options, children ...func(*recorder) ChildSpec) *harness {
	t.Helper()
	return newHarnessSys(t, func(s *System) { s.AllowInjectPanic = allow }, opts, children...)
}

// newHarnessSys is newHarness with the System set up by setup first.
func newHarnessSys(t *testing.T, setup func(*System), opts Options, children ...func(*recorder) ChildSpec) *harness {
	t.Helper()
	engine, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, engine: engine, clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		rec: &recorder{pids: map[string]*actor.PID{}}, exits: make(chan messages.ChildExited, 1)}
	h.sys = NewSystem(engine, h.clk, zerolog.Nop())
	setup(h.sys)
	h.sys.OnRootExit = func(m messages.ChildExited) { h.exits <- m }
	var specs []ChildSpec
	for _, f := range children {
		specs = append(specs, f(h.rec))
	}
	h.root = h.sys.SpawnRoot(supSpec("root", opts, nil, Permanent, specs...))
	t.Cleanup(h.stop)
	return h
}

// stop shuts the tree down and waits for the root to end.
func (h *harness) stop() {
	if h.root == nil {
		return
	}
	h.engine.Send(h.root, messages.Shutdown{})
	select {
	case <-h.exits:
	case <-time.After(5 * time.Second):
		h.t.Errorf("root did not stop")
	}
	h.root = nil
}

// waitFor polls until the recorder has seen want (in order, as a tail of
// what happened since the last take) or fails.
func (h *harness) waitFor(want ...string) {
	h.t.Helper()
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		got = append(got, h.rec.take()...)
		if len(got) >= len(want) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // catch anything extra that follows
	got = append(got, h.rec.take()...)
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		h.t.Fatalf("events:\n got  %v\n want %v", got, want)
	}
}

// waitForSet is waitFor for events whose order is not fixed (siblings
// starting side by side).
func (h *harness) waitForSet(want ...string) {
	h.t.Helper()
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(got) < len(want) {
		got = append(got, h.rec.take()...)
		time.Sleep(2 * time.Millisecond)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		h.t.Fatalf("events:\n got  %v\n want %v", got, want)
	}
}

func w(name string, r RestartType) func(*recorder) ChildSpec {
	return func(rec *recorder) ChildSpec { return workerSpec(name, rec, r) }
}

func roomy() Options {
	return Options{Intensity: Intensity{MaxRestarts: 100, Period: time.Second}}
}

// SUP-7: children start in order; a shutdown stops them in reverse order.
func TestSUP7StartInOrderStopInReverse(t *testing.T) {
	h := newHarness(t, roomy(), w("a", Permanent), w("b", Permanent), w("c", Permanent))
	h.waitFor("start a", "start b", "start c")
	h.stop()
	h.waitFor("stop c", "stop b", "stop a")
}

// SUP-7: one_for_one restarts only the failed child.
func TestSUP7OneForOne(t *testing.T) {
	h := newHarness(t, roomy(), w("a", Permanent), w("b", Permanent), w("c", Permanent))
	h.waitFor("start a", "start b", "start c")
	h.engine.Send(h.rec.pid("b"), boom{})
	h.waitFor("stop b", "start b")
}

// SUP-7: one_for_all stops the others in reverse order and restarts all in
// order.
func TestSUP7OneForAll(t *testing.T) {
	o := roomy()
	o.Strategy = OneForAll
	h := newHarness(t, o, w("a", Permanent), w("b", Permanent), w("c", Permanent))
	h.waitFor("start a", "start b", "start c")
	h.engine.Send(h.rec.pid("b"), boom{})
	h.waitFor("stop b", "stop c", "stop a", "start a", "start b", "start c")
}

// SUP-7: rest_for_one restarts the failed child and those started after it.
func TestSUP7RestForOne(t *testing.T) {
	o := roomy()
	o.Strategy = RestForOne
	h := newHarness(t, o, w("a", Permanent), w("b", Permanent), w("c", Permanent), w("d", Permanent))
	h.waitFor("start a", "start b", "start c", "start d")
	h.engine.Send(h.rec.pid("b"), boom{})
	h.waitFor("stop b", "stop d", "stop c", "start b", "start c", "start d")
}

// SUP-6: transient children restart only after an abnormal end; temporary
// never.
func TestSUP6RestartTypes(t *testing.T) {
	h := newHarness(t, roomy(), w("perm", Permanent), w("trans", Transient), w("temp", Temporary))
	h.waitFor("start perm", "start trans", "start temp")
	h.engine.Send(h.rec.pid("temp"), boom{})
	h.waitFor("stop temp")
	h.engine.Send(h.rec.pid("trans"), boom{})
	h.waitFor("stop trans", "start trans")
	// A transient child that ends normally is not restarted.
	h.engine.Send(h.rec.pid("trans"), messages.ExitSelf{Reason: messages.ExitNormal})
	h.waitFor("stop trans")
	h.engine.Send(h.rec.pid("perm"), messages.ExitSelf{Reason: messages.ExitNormal})
	h.waitFor("stop perm", "start perm")
}

// SUP-8: more than 3 restarts in 5s ends the supervisor; its parent is told
// and applies its own strategy (here: restarts the supervisor subtree).
func TestSUP8IntensityEscalatesToParent(t *testing.T) {
	inner := Options{} // defaults: 3 in 5s
	h := newHarness(t, roomy(), func(rec *recorder) ChildSpec {
		return supSpec("mid", inner, rec, Permanent, workerSpec("x", rec, Permanent))
	})
	h.waitFor("start x", "start mid")
	for i := 0; i < 3; i++ {
		h.engine.Send(h.rec.pid("x"), boom{})
		h.waitFor("stop x", "start x")
	}
	h.engine.Send(h.rec.pid("x"), boom{})
	// mid gives up: the dead x releases, mid stops, the root restarts it
	// and with it a fresh x.
	h.waitFor("stop x", "stop mid", "start x", "start mid")
}

// SUP-8: when the root gives up, OnRootExit gets the chain of reasons.
func TestSUP8RootGivesUpWithChain(t *testing.T) {
	h := newHarness(t, Options{}, func(rec *recorder) ChildSpec {
		return supSpec("mid", Options{}, rec, Permanent, workerSpec("x", rec, Permanent))
	})
	h.waitFor("start x", "start mid")
	// Each round: x fails 4 times, mid escalates; the root restarts mid.
	for round := 0; round < 4; round++ {
		for i := 0; i < 4; i++ {
			h.engine.Send(h.rec.pid("x"), boom{})
			if i < 3 {
				h.waitFor("stop x", "start x")
			}
		}
		if round < 3 {
			h.waitFor("stop x", "stop mid", "start x", "start mid")
		}
	}
	select {
	case m := <-h.exits:
		h.root = nil
		if m.Reason != messages.ExitEscalated || len(m.Chain) != 2 {
			t.Fatalf("root exit %+v, want escalated with a 2-link chain", m)
		}
		if !strings.HasPrefix(m.Chain[0], "root:") || !strings.HasPrefix(m.Chain[1], "root/mid:") {
			t.Fatalf("chain %q", m.Chain)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("root did not give up")
	}
	h.rec.take()
}

// SUP-10, SUP-19: actor restarts are paced by the same ladder: 3 at once,
// the 4th after 1m of the fake clock, not before.
func TestSUP10LadderPacesActorRestarts(t *testing.T) {
	h := newHarness(t, roomy(), w("x", Permanent))
	h.waitFor("start x")
	for i := 0; i < 3; i++ {
		h.engine.Send(h.rec.pid("x"), boom{})
		h.waitFor("stop x", "start x")
	}
	h.engine.Send(h.rec.pid("x"), boom{})
	if !h.clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no restart timer armed")
	}
	h.clk.Advance(59 * time.Second)
	h.waitFor("stop x") // the dead incarnation released what it held; no start yet
	h.clk.Advance(time.Second)
	h.waitFor("start x")
}

// SUP-20: the System's ladder (the daemon's supervision.ladder) paces the
// restarts under every supervisor whose Options name none, at any depth,
// and a supervisor's own ladder (a service's x-engenho.backoff) wins.
// SUP-21: while a child waits out its backoff, the tree shows it as
// restarting with its next attempt; the next incarnation replaces that.
func TestSUP20ConfiguredLadderAtEveryLevel(t *testing.T) {
	short := ladder.Config{Immediate: 1, Delays: []time.Duration{10 * time.Second}, Cap: 10 * time.Second, Stable: time.Minute}
	own := ladder.Config{Immediate: 1, Delays: []time.Duration{30 * time.Second}, Cap: 30 * time.Second, Stable: time.Minute}
	mid := roomy()
	svc := roomy()
	svc.Ladder = own
	h := newHarnessSys(t, func(s *System) { s.Ladder = short }, roomy(), func(rec *recorder) ChildSpec {
		return supSpec("mid", mid, rec, Permanent,
			workerSpec("x", rec, Permanent),
			supSpec("svc", svc, rec, Permanent, workerSpec("y", rec, Permanent)))
	})
	h.waitForSet("start x", "start y", "start svc", "start mid")
	crash := func(name string, timers int) {
		h.t.Helper()
		h.engine.Send(h.rec.pid(name), boom{})
		h.waitFor("stop "+name, "start "+name) // the first failure: at once
		h.engine.Send(h.rec.pid(name), boom{})
		if !h.clk.WaitForTimers(timers, 5*time.Second) {
			t.Fatalf("%s: no restart timer armed", name)
		}
		h.waitFor("stop " + name)
	}
	crash("x", 1)
	n, ok := h.sys.Tree.Get("root/mid/x")
	if !ok || n.State != StateRestarting || !n.NextAttempt.Equal(h.clk.Now().Add(10*time.Second)) ||
		!strings.Contains(n.Detail, "failure 2") {
		t.Fatalf("node of x while it waits: %+v, %v", n, ok)
	}
	h.clk.Advance(9 * time.Second)
	h.clk.Advance(time.Second) // the configured 10s, not the default 1m
	h.waitFor("start x")
	if n, _ := h.sys.Tree.Get("root/mid/x"); n.State == StateRestarting {
		t.Fatalf("still shown waiting after its restart: %+v", n)
	}
	crash("y", 1)
	h.clk.Advance(10 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if got := h.rec.take(); len(got) != 0 {
		t.Fatalf("y restarted on the daemon's ladder: %v", got)
	}
	h.clk.Advance(20 * time.Second) // its own 30s
	h.waitFor("start y")
}

// SUP-21: a child removed while it waits out its backoff leaves no
// restarting node behind, and neither does its supervisor's stop.
func TestSUP21WaitingNodeGoesWithTheRestart(t *testing.T) {
	short := ladder.Config{Immediate: 0, Delays: []time.Duration{time.Minute}, Cap: time.Minute, Stable: time.Minute}
	h := newHarnessSys(t, func(s *System) { s.Ladder = short }, roomy(), w("x", Permanent))
	h.waitFor("start x")
	h.engine.Send(h.rec.pid("x"), boom{})
	if !h.clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no restart timer armed")
	}
	h.waitFor("stop x")
	if n, ok := h.sys.Tree.Get("root/x"); !ok || n.State != StateRestarting {
		t.Fatalf("node %+v %v", n, ok)
	}
	h.stop()
	if n, ok := h.sys.Tree.Get("root/x"); ok {
		t.Fatalf("restarting node outlived its supervisor: %+v", n)
	}
}

// SUP-11 for actors: a child that ran stable for the whole window starts
// its ladder afresh.
func TestSUP11StableActorResetsLadder(t *testing.T) {
	h := newHarness(t, roomy(), w("x", Permanent))
	h.waitFor("start x")
	for i := 0; i < 3; i++ {
		h.engine.Send(h.rec.pid("x"), boom{})
		h.waitFor("stop x", "start x")
	}
	h.clk.Advance(5 * time.Minute)
	h.engine.Send(h.rec.pid("x"), boom{})
	h.waitFor("stop x", "start x") // at once: the ledger was reset
}

// SUP-6: a child that does not stop within its shutdown budget is killed.
func TestSUP6ShutdownBudgetKills(t *testing.T) {
	h := newHarness(t, roomy(), func(rec *recorder) ChildSpec {
		s := workerSpec("slow", rec, Permanent)
		s.Shutdown = time.Second
		return s
	})
	h.waitFor("start slow")
	pid := h.rec.pid("slow")
	// Fill the child's inbox so the Shutdown waits behind slow messages.
	for i := 0; i < 3; i++ {
		h.engine.Send(pid, hang{})
	}
	h.engine.Send(h.root, messages.Shutdown{})
	if !h.clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no budget timer armed")
	}
	h.clk.Advance(time.Second)
	select {
	case m := <-h.exits:
		h.root = nil
		if m.Reason != messages.ExitShutdown {
			t.Fatalf("root ended %s", m.Reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("root did not end after the budget")
	}
	// The killed child ends once its slow Receive returns.
	h.waitFor("stop slow")
}

// SUP-1: the tree publishes every live actor; restart-child restarts one
// subtree by path.
func TestSUP1TreeAndRestartChild(t *testing.T) {
	h := newHarness(t, roomy(), func(rec *recorder) ChildSpec {
		return supSpec("mid", roomy(), rec, Permanent, workerSpec("x", rec, Permanent), workerSpec("y", rec, Permanent))
	})
	h.waitFor("start x", "start y", "start mid")
	var paths []string
	for _, n := range h.sys.Tree.Snapshot() {
		paths = append(paths, n.Path+"="+n.State)
	}
	if got := strings.Join(paths, " "); got != "root=running root/mid=running root/mid/x=running root/mid/y=running" {
		t.Fatalf("tree: %s", got)
	}
	res, err := h.engine.Request(h.root, messages.RestartChild{Path: "root/mid/y"}, 5*time.Second).Result()
	if err != nil || res.(messages.RestartChildResult).Err != "" {
		t.Fatalf("restart-child: %v %+v", err, res)
	}
	h.waitFor("stop y", "start y")
	res, _ = h.engine.Request(h.root, messages.RestartChild{Path: "root/nope"}, 5*time.Second).Result()
	if res.(messages.RestartChildResult).Err == "" {
		t.Fatal("restart-child of a missing path succeeded")
	}
	if n, _ := h.sys.Tree.Get("root/mid/y"); n.Gen == 0 {
		t.Fatal("restarted child not in the tree")
	}
}

// SUP-9's precondition: a restart decision is reported with actor, reason,
// failure count and next attempt (SUP-18).
func TestSUP18RestartDecisionReported(t *testing.T) {
	var mu sync.Mutex
	var got []Decision
	o := roomy()
	o.OnRestart = func(d Decision) { mu.Lock(); got = append(got, d); mu.Unlock() }
	h := newHarness(t, o, w("x", Permanent))
	h.waitFor("start x")
	h.engine.Send(h.rec.pid("x"), boom{})
	h.waitFor("stop x", "start x")
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Actor != "root/x" || got[0].Reason != messages.ExitPanic || got[0].Failures != 1 || !strings.Contains(got[0].Err, "boom") {
		t.Fatalf("decisions %+v", got)
	}
	if !got[0].At.Equal(h.clk.Now()) {
		t.Fatalf("next attempt %s, want now", got[0].At)
	}
}

// SUP-20: a child's own ladder (the x-engenho.backoff of the service the
// actor belongs to) wins over its supervisor's and the System's, and
// SetLadder changes it for the next failures without losing its history.
func TestSUP20ChildLadderWins(t *testing.T) {
	sys := ladder.Config{Immediate: 0, Delays: []time.Duration{10 * time.Second}, Cap: 10 * time.Second, Stable: time.Minute}
	own := ladder.Config{Immediate: 0, Delays: []time.Duration{3 * time.Second, 6 * time.Second}, Cap: 6 * time.Second, Stable: time.Minute}
	var mu sync.Mutex
	var got []Decision
	h := newHarnessSys(t, func(s *System) {
		s.Ladder = sys
		s.OnRestart = func(d Decision) { mu.Lock(); got = append(got, d); mu.Unlock() }
	}, roomy(), func(rec *recorder) ChildSpec {
		sp := workerSpec("x", rec, Permanent)
		sp.Ladder = own
		return sp
	})
	h.waitFor("start x")
	h.engine.Send(h.rec.pid("x"), boom{})
	if !h.clk.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no restart timer armed")
	}
	h.waitFor("stop x")
	h.clk.Advance(3 * time.Second) // its own first delay, not the System's 10s
	h.waitFor("start x")
	mu.Lock()
	if len(got) != 1 || !got[0].At.Equal(h.clk.Now()) || got[0].Failures != 1 {
		t.Fatalf("decisions seen by the System hook: %+v", got)
	}
	mu.Unlock()
}

// SUP-18: the System's hook hears every supervisor's decisions, and an
// escalation as one that names the supervisor that gave up; RestartEvent
// makes each an event naming the actor, reason, failures and next attempt.
func TestSUP18SystemHookHearsEveryLevel(t *testing.T) {
	var mu sync.Mutex
	var got []Decision
	in := roomy()
	in.Intensity = Intensity{MaxRestarts: 1, Period: time.Minute}
	h := newHarnessSys(t, func(s *System) {
		s.OnRestart = func(d Decision) { mu.Lock(); got = append(got, d); mu.Unlock() }
	}, roomy(), func(rec *recorder) ChildSpec {
		return supSpec("mid", in, rec, Permanent, workerSpec("x", rec, Permanent))
	})
	h.waitForSet("start x", "start mid")
	h.engine.Send(h.rec.pid("x"), boom{})
	h.waitFor("stop x", "start x")
	h.engine.Send(h.rec.pid("x"), boom{}) // the second in the window: mid gives up
	h.waitFor("stop x", "stop mid", "start x", "start mid")
	mu.Lock()
	defer mu.Unlock()
	var paths []string
	for _, d := range got {
		paths = append(paths, fmt.Sprintf("%s esc=%v", d.Actor, d.Escalated))
	}
	want := []string{"root/mid/x esc=false", "root/mid esc=true", "root/mid esc=false"}
	if !slices.Equal(paths, want) {
		t.Fatalf("decisions %v, want %v", paths, want)
	}
	ev := RestartEvent(got[0], h.clk.Now())
	if ev.Kind != messages.KindActorRestarted || ev.Actor != "root/mid/x" || ev.Fields["failures"] != "1" ||
		ev.Fields["reason"] != string(messages.ExitPanic) || !strings.Contains(ev.Message, "restarting at once") {
		t.Fatalf("restart event %+v", ev)
	}
	if ev := RestartEvent(got[1], h.clk.Now()); ev.Kind != messages.KindActorEscalated || ev.Level != messages.LevelError ||
		!strings.Contains(ev.Message, "more than 1 restarts") {
		t.Fatalf("escalation event %+v", ev)
	}
}

func TestPathSubject(t *testing.T) {
	for path, want := range map[string][3]string{
		"root/stack:shop/service:web/replica:1-ab12": {"shop", "web", ""},
		"root/activator/host:notes.localhost":        {"", "", "notes.localhost"},
		"root/activator/host:n.x/sidecar:ticker":     {"", "", "n.x"},
		"root":                                       {"", "", ""},
	} {
		st, sv, h := PathSubject(path)
		if [3]string{st, sv, h} != want {
			t.Errorf("%s: %q %q %q, want %v", path, st, sv, h, want)
		}
	}
}

func TestRestartPlan(t *testing.T) {
	order := []string{"a", "b", "c", "d"}
	cases := []struct {
		s           Strategy
		failed      string
		stop, start string
	}{
		{OneForOne, "b", "", "b"},
		{OneForAll, "b", "d c a", "a b c d"},
		{RestForOne, "b", "d c", "b c d"},
		{RestForOne, "d", "", "d"},
		{OneForAll, "zz", "", ""},
	}
	for _, c := range cases {
		stop, start := restartPlan(c.s, order, c.failed)
		if strings.Join(stop, " ") != c.stop || strings.Join(start, " ") != c.start {
			t.Errorf("%s %s: stop %v start %v, want %q %q", c.s, c.failed, stop, start, c.stop, c.start)
		}
	}
}

func TestIntensityWindow(t *testing.T) {
	in := Intensity{MaxRestarts: 3, Period: 5 * time.Second}
	var w window
	s := int64(time.Second)
	for i, c := range []struct {
		at   int64
		over bool
	}{{0, false}, {1 * s, false}, {2 * s, false}, {6 * s, false}, {6 * s, false}, {6 * s, true}} {
		if got := w.add(in, c.at); got != c.over {
			t.Fatalf("restart %d at %ds: over %v, want %v", i, c.at/s, got, c.over)
		}
	}
}

func TestParseStrategy(t *testing.T) {
	for _, s := range []Strategy{OneForOne, OneForAll, RestForOne} {
		got, err := ParseStrategy(s.String())
		if err != nil || got != s {
			t.Fatalf("%s: %v %v", s, got, err)
		}
	}
	if _, err := ParseStrategy("one-for-one"); err == nil {
		t.Fatal("bad name accepted")
	}
	_ = fmt.Sprint(Transient)
}

// CHS-2: a panic injected by path is handled like any panic: the actor is
// restarted by its parent.
func TestInjectPanicByPath(t *testing.T) {
	h := newHarness(t, roomy(), func(rec *recorder) ChildSpec {
		return supSpec("mid", roomy(), rec, Permanent, workerSpec("x", rec, Permanent))
	})
	h.waitFor("start x", "start mid")
	h.engine.Send(h.root, messages.Deliver{Path: "root/mid/x", Msg: messages.InjectPanic{Reason: "test"}})
	h.waitFor("stop x", "start x")
	res, err := h.engine.Request(h.root, messages.Deliver{Path: "root/none", Msg: messages.InjectPanic{}}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := res.(messages.DeliverFailed); !ok || f.Path != "root/none" {
		t.Fatalf("answer %#v", res)
	}
}

// CHS-2: only a system built to allow fault injection (the chaos build)
// panics on messages.InjectPanic; any other drops it and the actor goes on.
func TestInjectPanicNeedsAllowInjectPanic(t *testing.T) {
	h := newHarnessInjecting(t, false, roomy(), func(rec *recorder) ChildSpec {
		return supSpec("mid", roomy(), rec, Permanent, workerSpec("x", rec, Permanent))
	})
	h.waitFor("start x", "start mid")
	before, _ := h.sys.Tree.Get("root/mid/x")
	h.engine.Send(h.root, messages.Deliver{Path: "root/mid/x", Msg: messages.InjectPanic{Reason: "test"}})
	h.engine.Send(h.rec.pid("x"), messages.InjectPanic{Reason: "direct"})
	time.Sleep(100 * time.Millisecond)
	h.waitFor() // no stop, no restart
	if n, ok := h.sys.Tree.Get("root/mid/x"); !ok || n.Restarts != 0 || n.Gen != before.Gen {
		t.Fatalf("root/mid/x after an ignored panic: %+v %v (was %+v)", n, ok, before)
	}
	h.engine.Send(h.rec.pid("x"), boom{})
	h.waitFor("stop x", "start x") // a real panic is still handled
}

// SVC-11, SUP-4: Bounded returns what the call returns; a call that
// ignores its context is given up AbandonGrace after the context ended,
// on the clock, and its late result is dropped.
func TestBounded(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	if v, ok := Bounded(context.Background(), clk, func(context.Context) int { return 7 }); !ok || v != 7 {
		t.Fatalf("a call that answers: %d %v", v, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	polite, _ := Bounded(ctx, clk, func(ctx context.Context) error { cancel(); <-ctx.Done(); return ctx.Err() })
	if polite != context.Canceled {
		t.Fatalf("a call that honours its context: %v", polite)
	}

	release := make(chan struct{})
	defer close(release)
	ctx, cancel = context.WithCancel(context.Background())
	got := make(chan bool, 1)
	go func() {
		_, ok := Bounded(ctx, clk, func(context.Context) int { <-release; return 1 })
		got <- ok
	}()
	cancel()
	if !clk.WaitForTimers(1, 10*time.Second) { // Bounded has armed its grace
		t.Fatal("Bounded armed no grace")
	}
	clk.Advance(AbandonGrace - time.Millisecond)
	select {
	case <-got:
		t.Fatal("gave up before the grace")
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(time.Millisecond)
	if ok := <-got; ok {
		t.Fatal("a deaf call was reported answered")
	}
}

// SVC-11, SUP-4, PERF-3: BoundedThen hands on what the call returns, once;
// a call that ignores its context is given up AbandonGrace after the
// context ended, on the clock, and its late result is dropped.
func TestBoundedThen(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	type res struct {
		v  int
		ok bool
	}
	got := make(chan res, 2)
	done := func(v int, ok bool) { got <- res{v, ok} }
	BoundedThen(context.Background(), clk, func(context.Context) int { return 7 }, done)
	if r := <-got; !r.ok || r.v != 7 {
		t.Fatalf("a call that answers: %+v", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	BoundedThen(ctx, clk, func(ctx context.Context) int { cancel(); <-ctx.Done(); return 8 }, done)
	if r := <-got; !r.ok || r.v != 8 {
		t.Fatalf("a call that honours its context: %+v", r)
	}

	release := make(chan struct{})
	ctx, cancel = context.WithCancel(context.Background())
	BoundedThen(ctx, clk, func(context.Context) int { <-release; return 1 }, done)
	cancel()
	if !clk.WaitForTimers(1, 10*time.Second) { // the grace is armed
		t.Fatal("BoundedThen armed no grace")
	}
	clk.Advance(AbandonGrace - time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("gave up before the grace: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(time.Millisecond)
	if r := <-got; r.ok {
		t.Fatal("a deaf call was reported answered")
	}
	close(release) // its late answer is dropped
	select {
	case r := <-got:
		t.Fatalf("a late answer was handed on: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
}

// SUP-1, PERF-3: an ending incarnation's last node (or a dead one's
// waiting node) never covers the node of a later incarnation of the same
// path, which publishes only when its state changes.
func TestTreeKeepsTheLaterIncarnation(t *testing.T) {
	tr := NewTree()
	tr.publish(Node{Path: "root/a", Gen: 2, State: "running"})
	tr.publish(Node{Path: "root/a", Gen: 1, State: "stopping"})
	tr.remove("root/a", 1)
	if n, ok := tr.Get("root/a"); !ok || n.Gen != 2 || n.State != "running" {
		t.Fatalf("node %+v %v, want gen 2 running", n, ok)
	}
	tr.publish(Node{Path: "root/a", Gen: 3, State: "starting"})
	if n, _ := tr.Get("root/a"); n.Gen != 3 {
		t.Fatalf("a later incarnation did not replace the node: %+v", n)
	}
}
