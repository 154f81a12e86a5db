package root_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/internal/treetest"
	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
)

// Fail-closed recovery through the whole tree on the fake driver (issue
// 17: SVC-30..SVC-33).

const recoveryStack = `
services:
  api:
    command: ["server", "v1"]
    ports: ["18080:80"]
    healthcheck:
      test: ["CMD", "check", "v1"]
      interval: 2s
      retries: 1
    deploy:
      replicas: 2
`

const apiPort = "web/api/18080"

// setLog records every SetBackends with the start count of one instance at
// that moment.
type setLog struct {
	mu   sync.Mutex
	sets []setRecord
}

type setRecord struct {
	ids    []string
	err    error
	starts int
}

func (l *setLog) add(r setRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sets = append(l.sets, r)
}

func (l *setLog) all() []setRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]setRecord(nil), l.sets...)
}

func (e *env) watchSets(instance string) *setLog {
	log := &setLog{}
	e.tree.Ports.OnSet(func(name string, bs []service.Backend, err error) {
		if name != apiPort {
			return
		}
		var ids []string
		for _, b := range bs {
			ids = append(ids, b.ID)
		}
		log.add(setRecord{ids: ids, err: err, starts: e.drv.Starts(instance)})
	})
	return log
}

func (e *env) replica(slot int) messages.ReplicaStatus {
	for _, r := range e.tree.Service("web", "api").Replicas {
		if r.Slot == slot {
			return r
		}
	}
	return messages.ReplicaStatus{}
}

// SVC-30: a dead instance is withdrawn from the balancer before it is
// restarted, and published again only after.
func TestSVC30DeadInstanceWithdrawnBeforeRestart(t *testing.T) {
	e := newEnv(t)
	e.apply(recoveryStack)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	victim := e.replica(1)
	log := e.watchSets(victim.Instance)
	e.drv.Die(victim.Instance, 137)
	e.until("restarted and serving", func() bool {
		r := e.replica(1)
		return e.drv.Starts(victim.Instance) == 2 && r.InRotation && e.tree.Converged("web")
	})
	e.until("published again", func() bool {
		rot, _ := e.tree.Ports.Rotation(apiPort)
		return len(rot) == 2
	})
	withdrawnAt := -1
	for i, s := range log.all() {
		in := slices.Contains(s.ids, victim.ID)
		if !in && s.err == nil && withdrawnAt < 0 {
			withdrawnAt = i
			if s.starts != 1 {
				t.Fatalf("withdrawn only after the restart (starts %d)", s.starts)
			}
		}
		if in && withdrawnAt >= 0 && s.starts != 2 {
			t.Fatalf("published again before its restart: %+v", s)
		}
	}
	if withdrawnAt < 0 {
		t.Fatalf("never withdrawn: %+v", log.all())
	}
}

// SVC-30: when the balancer refuses the withdrawal, the service is
// publication-inhibited (status and event say why); the restarted instance
// is not published until a withdrawal succeeds.
func TestSVC30RefusedWithdrawalInhibitsPublication(t *testing.T) {
	e := newEnv(t)
	e.apply(recoveryStack)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	victim := e.replica(1)
	e.tree.Ports.Fail(errors.New("balancer port closed"))
	e.drv.Die(victim.Instance, 137)
	e.until("inhibited", func() bool {
		return strings.Contains(e.tree.Service("web", "api").Inhibited, "balancer port closed")
	})
	if e.tree.Events.Count(messages.KindPublicationInhibited) != 1 {
		t.Fatalf("events:\n%s", e.tree.Events)
	}
	if msg := e.tree.Service("web", "api").Message; !strings.Contains(msg, "publication inhibited") {
		t.Fatalf("status message %q", msg)
	}
	e.until("the dead instance repaired", func() bool {
		return e.drv.Starts(victim.Instance) == 2 && e.replica(1).InRotation
	})
	log := e.watchSets(victim.Instance)
	e.tree.Ports.Fail(nil)
	e.until("lifted and published", func() bool {
		rot, _ := e.tree.Ports.Rotation(apiPort)
		return e.tree.Service("web", "api").Inhibited == "" && len(rot) == 2
	})
	sets := log.all()
	if len(sets) < 2 || slices.Contains(sets[0].ids, victim.ID) || sets[0].err != nil {
		t.Fatalf("the first withdrawal that succeeded published the restarted instance: %+v", sets)
	}
	if e.tree.Events.Count(messages.KindPublicationRestored) != 1 {
		t.Fatalf("events:\n%s", e.tree.Events)
	}
}

// SVC-31: an instance whose pid changed between its ready probe and its
// publication is not published on that evidence; it is verified again.
func TestSVC31PidChangedBeforePublishing(t *testing.T) {
	e := newEnv(t)
	var once sync.Once
	var changed string
	e.drv.SetExec(func(name string, argv []string) (drivers.ExecResult, error) {
		if strings.Contains(name, "-1-") {
			once.Do(func() {
				e.drv.ChangePid(name)
				changed = name
			})
		}
		return drivers.ExecResult{}, nil
	})
	e.apply(recoveryStack)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	var stale []messages.Event
	for _, ev := range e.tree.Events.All() {
		if ev.Kind == messages.KindRecoveryStale {
			stale = append(stale, ev)
		}
	}
	if changed == "" || len(stale) != 1 || stale[0].Instance != changed || !strings.Contains(stale[0].Message, "pid changed") {
		t.Fatalf("changed %q, stale events %+v\n%s", changed, stale, e.tree.Events)
	}
}

// SVC-32: an instance found paused is neither restarted nor deleted; status
// names it and its state; once it is found running again it serves.
// starting is observed and inspected again.
func TestSVC32PausedInstanceRefused(t *testing.T) {
	e := newEnv(t)
	e.apply(webV1)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	victim := e.replica(2).Instance
	if err := e.drv.ForceState(victim, drivers.StatePaused); err != nil {
		t.Fatal(err)
	}
	want := "instance " + victim + " is in state paused: recovery refuses to restart or delete it"
	e.until("refused", func() bool { return slices.Contains(e.tree.Service("web", "api").Refused, want) })
	e.drv.Die(victim, 1) // its run ends while paused: still not touched
	e.until("seen down", func() bool { return !e.replica(2).InRotation })
	deletes := e.drv.Calls("delete")
	for range 50 {
		e.clk.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
	if n := e.drv.Starts(victim); n != 1 || e.drv.Calls("delete") != deletes {
		t.Fatalf("a refused instance was touched: starts %d, deletes %d -> %d", n, deletes, e.drv.Calls("delete"))
	}
	if e.tree.Events.Count(messages.KindRecoveryRefused) != 1 {
		t.Fatalf("events:\n%s", e.tree.Events)
	}
	if err := e.drv.ForceState(victim, drivers.StateStarting); err != nil {
		t.Fatal(err)
	}
	e.until("starting is not refused", func() bool { return len(e.tree.Service("web", "api").Refused) == 0 })
	if err := e.drv.ForceState(victim, ""); err != nil {
		t.Fatal(err)
	}
	e.until("repaired once no longer paused", func() bool { return e.drv.Starts(victim) == 2 && e.tree.Converged("web") })
}

// SVC-33: a retirement that fails is recorded, retried, survives a tree
// restart over the same journal, and keeps its slot from getting a new
// instance until the old one is gone.
func TestSVC33PendingRetirementSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	one := strings.Replace(webV1, "replicas: 3", "replicas: 1", 1)
	e.apply(one)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	old := e.replica(1)
	e.drv.FailNext("stop", 1000, drivers.ErrInvalid)
	m, err := e.tree.Apply("web", strings.ReplaceAll(one, "v1", "v2"))
	if err != nil {
		t.Fatal(err)
	}
	e.until("pending", func() bool { return len(e.tree.Service("web", "api").RetirementPending) == 1 })
	pending, _ := e.tree.Store.PendingRetirements("web", "api")
	if len(pending) != 1 || pending[0].Instance != old.Instance {
		t.Fatalf("journal %+v", pending)
	}
	if e.tree.Events.Count(messages.KindRetirementPending) != 1 {
		t.Fatalf("events:\n%s", e.tree.Events)
	}
	// Restart the tree over the same store: the old instance is adopted as
	// retiring and retried; its slot still gets nothing new.
	store := e.tree.Store
	if err := e.tree.Stop(); err != nil {
		t.Fatal(err)
	}
	stops := e.drv.Calls("stop")
	tree, err := treetest.New(treetest.Options{Clock: e.clk, Driver: e.drv, Sweep: 30 * time.Second, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	e.tree = tree
	t.Cleanup(func() { _ = tree.Stop() })
	e.tree.Send(m)
	e.until("retried after the restart", func() bool {
		return e.drv.Calls("stop") > stops+1 && len(e.tree.Service("web", "api").RetirementPending) == 1
	})
	if n := len(e.instances()); n != 1 {
		t.Fatalf("%d instances while the retirement is pending, want only the old one", n)
	}
	e.drv.ClearFaults()
	e.until("retired, slot filled", func() bool {
		st := e.tree.Service("web", "api")
		return len(st.RetirementPending) == 0 && e.tree.Converged("web") && e.replica(1).ID != old.ID
	})
	if pending, _ := store.PendingRetirements("web", "api"); len(pending) != 0 {
		t.Fatalf("journal still holds %+v", pending)
	}
}

// SVC-8, SVC-15, issue 18 (found by the chaos fault driver.fail with
// kind=not_found): an inspection that answers "not found" for an instance
// that in truth still runs makes its replica take it for missing, and the
// slot gets a fresh instance. The one left running is no replica's: the
// service's sweep (one listing every sweep interval) adopts it, and the slot, now
// with two instances of the current revision, keeps one. Before, the
// extra instances ran on for good beside the slot's own.
func TestSVC15FalseNotFoundLeavesNoExtraInstance(t *testing.T) {
	e := newEnv(t)
	e.apply(recoveryStack)
	e.until("converged", func() bool { return e.tree.Converged("web") })
	// The restart after a death inspects the run it started: the driver
	// says it is not there, though it runs.
	e.drv.FailNext("inspect", 2, drivers.ErrNotFound)
	e.drv.Die(e.replica(1).Instance, 1)
	e.until("a slot refilled beside its instance", func() bool { return len(e.instances()) > 2 })
	running := func() int {
		n := 0
		for _, st := range e.instances() {
			if st.State == drivers.StateRunning {
				n++
			}
		}
		return n
	}
	e.until("one instance per slot again", func() bool {
		return e.tree.Converged("web") && running() == 2 && len(e.instances()) == 2
	})
	slots := map[string]int{}
	for _, st := range e.instances() {
		slots[st.Labels[drivers.LabelSlot]]++
	}
	if slots["1"] != 1 || slots["2"] != 1 {
		t.Fatalf("instances per slot %v", slots)
	}
}
