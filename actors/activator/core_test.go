package activator

import (
	"reflect"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

var coreCfg = Config{Sweep: DefaultSweep, Shutdown: DefaultShutdown}

// sim drives the core as the actor does, one event at a time, checking on
// every step that Step leaves the state it was given unchanged.
type sim struct {
	t   *testing.T
	s   State
	now time.Time
}

func newSim(t *testing.T, started Started) (*sim, []step.Effect) {
	t.Helper()
	m := &sim{t: t, now: t0}
	return m, m.step(started)
}

func (m *sim) step(e Event) []step.Effect {
	m.t.Helper()
	before := m.s.clone()
	next, fx := Step(coreCfg, m.s, e, m.now)
	if !reflect.DeepEqual(before, m.s.clone()) {
		m.t.Fatalf("Step(%T) changed the state it was given", e)
	}
	m.s = next
	return fx
}

func wantFx(t *testing.T, what string, got []step.Effect, want ...step.Effect) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %#v\n want %#v", what, got, want)
	}
}

const (
	keyNotes = "host:notes.localhost"
	keyBlog  = "host:blog.localhost"
)

// SUP-1: a (re)started activator rebuilds its hosts from the memo, in key
// order; a host inherits the owed release the journal keeps for it, due
// times are loaded, the sweep is armed and the actor reports running.
func TestCoreStartedRebuildsFromMemo(t *testing.T) {
	notes, blog := hostDef("web", "notes", "notes.localhost"), hostDef("web", "blog", "blog.localhost")
	owed := messages.OwedRelease{Host: "notes.localhost", Epoch: "e1"}
	gone := messages.OwedRelease{Host: "gone.localhost", Epoch: "e2"}
	due := t0.Add(time.Hour)
	m, fx := newSim(t, Started{
		Defs: map[string]messages.HostDefinition{keyNotes: notes, keyBlog: blog},
		Dues: []messages.DueTime{{Host: "blog.localhost", At: due}},
		Owed: []messages.OwedRelease{owed, gone},
	})
	wantFx(t, "started", fx,
		Remember{Key: keyBlog, Def: blog}, Spawn{Key: keyBlog}, step.Arm{Timer: TimerSweep, At: t0.Add(DefaultSweep)},
		Remember{Key: keyNotes, Def: notes}, Spawn{Key: keyNotes, Owed: &owed},
		SetState{State: "running"})
	if want := []string{keyBlog, keyNotes}; !reflect.DeepEqual(m.s.Children, want) {
		t.Fatalf("children %v, want %v", m.s.Children, want)
	}
	if e := m.s.Hosts[keyNotes]; e != (Entry{Stack: "web", Service: "notes", Host: "notes.localhost", State: messages.HostAsleep}) {
		t.Fatalf("entry %+v", e)
	}
	if _, ok := m.s.Orphans["notes.localhost"]; ok || len(m.s.Orphans) != 1 {
		t.Fatalf("orphans %v: notes' release goes to its actor, gone's stays", m.s.Orphans)
	}
	if !m.s.Dues["blog.localhost"].Equal(due) {
		t.Fatalf("dues %v", m.s.Dues)
	}
}

// A definition of a known host updates the memo (read at every wake,
// ACT-4) and is routed to its actor; a service that changes host retires
// the old one (it sleeps and goes) and starts the new one.
func TestCoreDefineRoutesAndMoves(t *testing.T) {
	m, fx := newSim(t, Started{})
	wantFx(t, "started with no host: no sweep (PERF-3)", fx, SetState{State: "running"})
	notes := hostDef("web", "notes", "notes.localhost")
	wantFx(t, "first definition", m.step(notes), Remember{Key: keyNotes, Def: notes}, Spawn{Key: keyNotes},
		step.Arm{Timer: TimerSweep, At: t0.Add(DefaultSweep)})
	notes2 := notes
	notes2.Deployment = "2"
	wantFx(t, "new deployment", m.step(notes2), Remember{Key: keyNotes, Def: notes2}, Tell{Key: keyNotes, Msg: notes2})

	m.s.Dues["notes.localhost"] = t0.Add(time.Hour)
	moved := hostDef("web", "notes", "notes2.localhost")
	wantFx(t, "moved", m.step(moved),
		Forget{Key: keyNotes}, Retire{Key: keyNotes},
		Remember{Key: "host:notes2.localhost", Def: moved}, Spawn{Key: "host:notes2.localhost"})
	if e := m.s.Hosts[keyNotes]; !e.Retired {
		t.Fatalf("old host not retired: %+v", e)
	}
	if _, ok := m.s.Dues["notes.localhost"]; ok {
		t.Fatal("the retired host keeps its due time")
	}
	if _, ok := m.s.Defs[keyNotes]; ok {
		t.Fatal("the retired host stays in the memo")
	}
	// Moved back while the old incarnation still ends: remembered, started
	// once it has ended.
	back := notes
	fx = m.step(back)
	wantFx(t, "moved back", fx, Forget{Key: "host:notes2.localhost"}, Retire{Key: "host:notes2.localhost"},
		Remember{Key: keyNotes, Def: back})
	m.s.Children = []string{"host:notes2.localhost"} // the supervisor took the old child away
	wantFx(t, "old incarnation ended", m.step(messages.ChildExited{Name: keyNotes}), Remember{Key: keyNotes, Def: back}, Spawn{Key: keyNotes})
}

// A host served by one service cannot be taken by another: the
// definition is ignored and nothing changes.
func TestCoreDefineConflict(t *testing.T) {
	m, _ := newSim(t, Started{})
	m.step(hostDef("web", "notes", "notes.localhost"))
	before := m.s.clone()
	fx := m.step(hostDef("other", "thief", "notes.localhost"))
	wantFx(t, "conflict", fx, Conflict{Host: "notes.localhost", Stack: "other", Service: "thief", Owner: "web/notes"})
	if !reflect.DeepEqual(m.s, before) {
		t.Fatal("a conflicting definition changed the state")
	}
}

// ACT-12: a hibernating worker with no due time runs at its first sight in
// this run; not with a due time, not when stopped, not at a later sight.
func TestCoreWorkerFirstSight(t *testing.T) {
	job := sc("report", false, 0, "/bin/sh", "-c", "exit 0")
	nightly := workerDef("jobs", "nightly", "nightly.localhost", job)
	key := "host:nightly.localhost"
	m, _ := newSim(t, Started{})
	wantFx(t, "first sight", m.step(nightly), Remember{Key: key, Def: nightly}, Spawn{Key: key},
		step.Arm{Timer: TimerSweep, At: t0.Add(DefaultSweep)},
		Tell{Key: key, Msg: messages.HostWake{Host: "nightly.localhost", Reason: messages.WakeDeploy}})
	m.s.Children = nil // the worker ended for good
	wantFx(t, "seen before", m.step(messages.ChildExited{Name: key}), Remember{Key: key, Def: nightly}, Spawn{Key: key})

	due, _ := newSim(t, Started{Dues: []messages.DueTime{{Host: "nightly.localhost", At: t0.Add(time.Hour)}}})
	wantFx(t, "with a due time", due.step(nightly), Remember{Key: key, Def: nightly}, Spawn{Key: key},
		step.Arm{Timer: TimerSweep, At: t0.Add(DefaultSweep)})

	stopped := nightly
	stopped.Stopped = true
	st, _ := newSim(t, Started{})
	wantFx(t, "stopped", st.step(stopped), Remember{Key: key, Def: stopped}, Spawn{Key: key},
		step.Arm{Timer: TimerSweep, At: t0.Add(DefaultSweep)})

	plain := workerDef("jobs", "pump", "", sc("pump", true, 0, "/bin/sh"))
	pl, _ := newSim(t, Started{})
	wantFx(t, "plain worker", pl.step(plain), Remember{Key: "worker:jobs.pump", Def: plain}, Spawn{Key: "worker:jobs.pump"},
		step.Arm{Timer: TimerSweep, At: t0.Add(DefaultSweep)})
}

// A removed service's host is retired: forgotten, its due time cleared,
// told to sleep and end; with no incarnation running the shell stops the
// child (Retire covers both).
func TestCoreRemove(t *testing.T) {
	m, _ := newSim(t, Started{})
	m.step(hostDef("web", "notes", "notes.localhost"))
	m.step(hostDef("web", "blog", "blog.localhost"))
	m.s.Dues["notes.localhost"] = t0.Add(time.Hour)
	wantFx(t, "remove", m.step(messages.HostRemove{Stack: "web", Service: "notes"}), Forget{Key: keyNotes}, Retire{Key: keyNotes})
	wantFx(t, "remove again", m.step(messages.HostRemove{Stack: "web", Service: "notes"}))
	if _, ok := m.s.Dues["notes.localhost"]; ok || m.s.Hosts[keyBlog].Retired {
		t.Fatalf("state after remove: %+v", m.s)
	}
}

// ACT-10: reports keep the due times; a zero due time clears one; a
// retired host's report does not bring its due time back; an unknown
// key's report is ignored.
func TestCoreReportKeepsDueTimes(t *testing.T) {
	m, _ := newSim(t, Started{})
	m.step(hostDef("web", "notes", "notes.localhost"))
	due := t0.Add(time.Hour)
	wantFx(t, "report", m.step(messages.HostReport{Key: keyNotes, State: messages.HostAwake, Due: due}))
	if e := m.s.Hosts[keyNotes]; e.State != messages.HostAwake || !m.s.Dues["notes.localhost"].Equal(due) {
		t.Fatalf("after a report: %+v %v", e, m.s.Dues)
	}
	m.step(messages.HostReport{Key: keyNotes, State: messages.HostAsleep})
	if _, ok := m.s.Dues["notes.localhost"]; ok {
		t.Fatal("a zero due time did not clear")
	}
	m.step(messages.HostRemove{Stack: "web", Service: "notes"})
	m.step(messages.HostReport{Key: keyNotes, State: messages.HostAsleep, Due: due})
	if _, ok := m.s.Dues["notes.localhost"]; ok {
		t.Fatal("a retired host's due time came back")
	}
	before := m.s.clone()
	wantFx(t, "unknown key", m.step(messages.HostReport{Key: "host:nobody", State: messages.HostAwake}))
	if !reflect.DeepEqual(before, m.s) {
		t.Fatal("an unknown key's report changed the state")
	}
}

// ACT-8, ACT-10: the sweep nudges every live host, wakes the sleeping ones
// whose due time came (not before it, not an awake one, not a retired
// one), retries each orphan's owed release once at a time, and re-arms.
func TestCoreSweep(t *testing.T) {
	orphan := messages.OwedRelease{Host: "gone.localhost", Epoch: "e"}
	m, _ := newSim(t, Started{Owed: []messages.OwedRelease{orphan}})
	for _, h := range []string{"a", "b", "c", "d"} {
		m.step(hostDef("web", h, h+".localhost"))
	}
	m.now = t0.Add(time.Hour)
	m.s.Dues["a.localhost"] = m.now                   // due now: woken
	m.s.Dues["b.localhost"] = m.now.Add(time.Second)  // not yet
	m.s.Dues["c.localhost"] = m.now.Add(-time.Minute) // due, but awake
	m.step(messages.HostReport{Key: "host:c.localhost", State: messages.HostAwake, Due: m.now.Add(-time.Minute)})
	m.step(messages.HostRemove{Stack: "web", Service: "d"})
	fx := m.step(messages.Timer{Name: TimerSweep})
	wantFx(t, "sweep", fx,
		Tell{Key: "host:a.localhost", Msg: messages.HostSweep{}},
		Tell{Key: "host:a.localhost", Msg: messages.HostWake{Host: "a.localhost", Reason: messages.WakeDue}},
		Tell{Key: "host:b.localhost", Msg: messages.HostSweep{}},
		Tell{Key: "host:c.localhost", Msg: messages.HostSweep{}},
		ReleaseOwed{Owed: orphan},
		step.Arm{Timer: TimerSweep, At: m.now.Add(DefaultSweep)})
	fx = m.step(messages.Timer{Name: TimerSweep})
	for _, f := range fx {
		if _, ok := f.(ReleaseOwed); ok {
			t.Fatal("an owed release retried while the last try runs")
		}
	}
	// A host waiting to be restarted is not a child the sweep can reach
	// once the supervisor gave it up.
	m.s.Children = []string{"host:b.localhost"}
	fx = m.step(messages.Timer{Name: TimerSweep})
	wantFx(t, "sweep with one child", fx[:1], Tell{Key: "host:b.localhost", Msg: messages.HostSweep{}})
}

// ACT-8: a settled owed release of a host without an actor is forgotten
// and is an event about that host; an unsettled one is retried at the
// next sweep.
func TestCoreOwedDone(t *testing.T) {
	orphan := messages.OwedRelease{Host: "gone.localhost", Epoch: "e"}
	m, _ := newSim(t, Started{Owed: []messages.OwedRelease{orphan}})
	m.step(messages.Timer{Name: TimerSweep})
	wantFx(t, "not settled", m.step(messages.ActivatorOwedDone{Host: "gone.localhost", Err: "timeout"}))
	fx := m.step(messages.Timer{Name: TimerSweep})
	wantFx(t, "retried", fx, ReleaseOwed{Owed: orphan}, step.Arm{Timer: TimerSweep, At: t0.Add(DefaultSweep)})
	wantFx(t, "settled", m.step(messages.ActivatorOwedDone{Host: "gone.localhost", Settled: true}),
		step.Emit{Kind: messages.KindLeaseReleaseSettled, Level: messages.LevelInfo, Host: "gone.localhost",
			Message: "owed lease release settled"})
	if len(m.s.Orphans) != 0 || len(m.s.Releasing) != 0 {
		t.Fatalf("orphans %v releasing %v", m.s.Orphans, m.s.Releasing)
	}
}

// SUP-9: a host actor that ends and is being restarted stays, no longer
// drained; one that ended for good is forgotten, and started again when
// its definition is still in the memo (a crash of a transient host that
// the supervisor gave up on).
func TestCoreChildExited(t *testing.T) {
	m, _ := newSim(t, Started{})
	notes := hostDef("web", "notes", "notes.localhost")
	m.step(notes)
	m.step(messages.HostReport{Key: keyNotes, State: messages.HostAsleep, Drained: true})
	wantFx(t, "restarting", m.step(messages.ChildExited{Name: keyNotes}))
	if e, ok := m.s.Hosts[keyNotes]; !ok || e.Drained {
		t.Fatalf("restarting entry %+v", e)
	}
	m.s.Children = nil
	wantFx(t, "ended, still defined", m.step(messages.ChildExited{Name: keyNotes}), Remember{Key: keyNotes, Def: notes}, Spawn{Key: keyNotes})
	m.step(messages.HostRemove{Stack: "web", Service: "notes"})
	m.s.Children = nil
	wantFx(t, "retired and ended", m.step(messages.ChildExited{Name: keyNotes}))
	if _, ok := m.s.Hosts[keyNotes]; ok {
		t.Fatal("an ended retired host is still known")
	}
	wantFx(t, "unknown child", m.step(messages.ChildExited{Name: "host:nobody"}))
}

// ACT-13: shutdown stops the sweep, tells every host to drain and arms
// the drain budget; the activator ends once every child is drained; a
// host that restarts meanwhile hears the drain again; nothing is
// redefined; a second shutdown changes nothing.
func TestCoreDrain(t *testing.T) {
	m, _ := newSim(t, Started{})
	notes := hostDef("web", "notes", "notes.localhost")
	m.step(notes)
	m.step(hostDef("web", "blog", "blog.localhost"))
	wantFx(t, "shutdown", m.step(messages.Shutdown{}),
		SetState{State: "draining"}, step.Cancel{Timer: TimerSweep},
		Tell{Key: keyNotes, Msg: messages.HostDrain{}}, Tell{Key: keyBlog, Msg: messages.HostDrain{}},
		step.Arm{Timer: TimerDrain, At: t0.Add(DefaultShutdown - 3*time.Second)})
	wantFx(t, "shutdown again", m.step(messages.Shutdown{}))
	wantFx(t, "sweep while draining", m.step(messages.Timer{Name: TimerSweep}))
	wantFx(t, "notes drained", m.step(messages.HostReport{Key: keyNotes, State: messages.HostAsleep, Drained: true}))
	wantFx(t, "blog restarted", m.step(messages.HostReport{Key: keyBlog, State: messages.HostAsleep}), Tell{Key: keyBlog, Msg: messages.HostDrain{}})
	m.s.Children = []string{keyNotes}
	wantFx(t, "blog gone, not redefined", m.step(messages.ChildExited{Name: keyBlog}),
		step.Cancel{Timer: TimerDrain}, step.End{Reason: messages.ExitShutdown})
	wantFx(t, "ended once", m.step(messages.HostReport{Key: keyNotes, State: messages.HostAsleep, Drained: true}))

	empty, _ := newSim(t, Started{})
	wantFx(t, "no hosts", empty.step(messages.Shutdown{}), SetState{State: "draining"}, step.Cancel{Timer: TimerSweep},
		step.Arm{Timer: TimerDrain, At: t0.Add(DefaultShutdown - 3*time.Second)},
		step.Cancel{Timer: TimerDrain}, step.End{Reason: messages.ExitShutdown})
}

// ACT-13: a host that did not sleep within the drain budget is killed (its
// lease expires) and the activator ends; a budget of 3s or less waits half
// of it.
func TestCoreDrainTimeout(t *testing.T) {
	m, _ := newSim(t, Started{})
	m.step(hostDef("web", "notes", "notes.localhost"))
	m.step(hostDef("web", "blog", "blog.localhost"))
	wantFx(t, "drain timer before shutdown", m.step(messages.Timer{Name: TimerDrain}))
	m.step(messages.HostReport{Key: keyNotes, State: messages.HostStopping})
	m.step(messages.Shutdown{})
	m.step(messages.HostReport{Key: keyBlog, State: messages.HostAsleep, Drained: true})
	wantFx(t, "timeout", m.step(messages.Timer{Name: TimerDrain}),
		Kill{Key: keyNotes, Host: "notes.localhost", State: messages.HostStopping},
		step.Cancel{Timer: TimerDrain}, step.End{Reason: messages.ExitShutdown})
	if got := (Config{Shutdown: 2 * time.Second}).drainWait(); got != time.Second {
		t.Fatalf("drain wait of a 2s budget: %s", got)
	}
}

// A host actor the supervisor would not start is forgotten; events the
// core does not know are refused with the state unchanged.
func TestCoreSpawnFailedAndRefusals(t *testing.T) {
	m, _ := newSim(t, Started{})
	m.step(hostDef("web", "notes", "notes.localhost"))
	wantFx(t, "spawn failed", m.step(SpawnFailed{Key: keyNotes}))
	if _, ok := m.s.Hosts[keyNotes]; ok || len(m.s.Children) != 0 {
		t.Fatalf("after a failed spawn: %+v", m.s)
	}
	for _, e := range []Event{nil, "what", messages.Timer{Name: "nope"}} {
		before := m.s.clone()
		next, fx := Step(coreCfg, m.s, e, t0)
		if len(fx) != 1 || !reflect.DeepEqual(next, before) {
			t.Fatalf("%#v: %#v", e, fx)
		}
		if r, ok := fx[0].(step.Refuse); !ok || r.Reason == "" {
			t.Fatalf("%#v: not refused: %#v", e, fx)
		}
	}
}
