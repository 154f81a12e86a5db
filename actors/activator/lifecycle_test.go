package activator

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	objfake "github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/messages"
)

// SUP-9 for hosts: a host actor that crashes is restarted; the new
// incarnation stops what the old one left running and, holding the same
// lease identity, wakes again at once by itself (reason resume, no wait for
// its own lease to expire) with the local state.
func TestHostActorRestartResumes(t *testing.T) {
	n, clk := awakeNode(t)
	route, _ := n.table.Host("notes.localhost")
	if !route.Gate.IsOpen() {
		t.Fatal("the awake host's gate is closed")
	}
	left := n.app.running("")
	panicHost(t, n, clk)
	// The dead incarnation seals its gate: no request reaches the instance
	// it left behind, which no actor manages now.
	if route.Gate.IsOpen() {
		t.Fatal("the old incarnation's gate is still open")
	}
	eventually(t, clk, 0, "leftover stopped, awake again", func() bool {
		now := n.app.running("")
		return n.state("notes.localhost") == messages.HostAwake && len(now) == 1 && !slices.Contains(left, now[0])
	})
	code, body, _ := n.get("notes.localhost", "/count")
	if code != http.StatusOK || body != "2" {
		t.Fatalf("after the restart: %d %q", code, body)
	}
}

// SEC-2: secret env values never appear in events or host status.
func TestSEC2SecretsStayOut(t *testing.T) {
	const secret = "s3cr3t-VALUE-42"
	n, clk := awakeNode(t, func(s *stackfile.Service) {
		s.Env = stackfile.Env{"DB_PASSWORD": stackfile.Secret(secret)}
	})
	walk(clk, 16*time.Minute, n)
	eventually(t, clk, time.Second, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	for _, e := range n.events.all() {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), secret) {
			t.Fatalf("secret in event %s", b)
		}
	}
	b, _ := json.Marshal(n.table.Hosts())
	if strings.Contains(string(b), secret) {
		t.Fatal("secret in the host status")
	}
}

// A removed service's host sleeps (final checkpoint, release), clears its
// due time, leaves the edge (404) and its actor ends.
func TestHostRemoved(t *testing.T) {
	n, clk := awakeNode(t)
	n.app.ctl.nextDue.Store(t0.Add(time.Hour).Unix())
	n.journal.SetDue("notes.localhost", t0.Add(time.Hour))
	n.eng.Send(n.pid, messages.HostRemove{Stack: "web", Service: "notes"})
	eventually(t, clk, 0, "slept", func() bool { return n.events.count(messages.KindHostSlept) == 1 })
	eventually(t, clk, 0, "route gone", func() bool { _, ok := n.table.Host("notes.localhost"); return !ok })
	if code, _, _ := n.get("notes.localhost", "/count"); code != http.StatusNotFound {
		t.Fatalf("removed host: %d", code)
	}
	if _, ok := n.journal.dueOf("notes.localhost"); ok {
		t.Fatal("due time kept for a removed host")
	}
	if len(n.app.running("")) != 0 {
		t.Fatal("left running")
	}
}

// parent supervises the activator as the root does.
type parent struct {
	h    *supervise.Handle
	spec supervise.ChildSpec
}

func (p *parent) Receive(c *actor.Context) {
	if _, ok := c.Message().(actor.Started); ok {
		kids := p.h.Supervise(supervise.Options{Intensity: supervise.Intensity{MaxRestarts: 10, Period: time.Minute}})
		if err := kids.Start(p.spec); err != nil {
			panic(err)
		}
	}
}

// SUP-1: a restarted activator rebuilds its hosts from the definitions it
// had, without waiting for the next deployment.
func TestActivatorRestartRebuildsHosts(t *testing.T) {
	clk := clock.NewFake(t0)
	n := newNode(t, "n1", objfake.New(objfake.Options{Seed: 1}), clk, nodeOpts{})
	n.define(hostDef("web", "notes", "notes.localhost"))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	// Stand the same activator spec under a supervisor in a second tree.
	sys := supervise.NewSystem(n.eng, clk, n.sys.Log)
	sys.AllowInjectPanic = true
	exited := make(chan messages.ChildExited, 1)
	sys.OnRootExit = func(m messages.ChildExited) { exited <- m }
	spec := Spec(Env{Drivers: n.env.Drivers, Store: n.env.Store, Prefix: "engenho", NodeName: "n2", NodeID: "x",
		Journal: newMemJournal(), Routes: n.table2, HostsDir: t.TempDir()})
	root := sys.SpawnRoot(supervise.ChildSpec{Name: "root", Produce: func(h *supervise.Handle) actor.Receiver { return &parent{h: h, spec: spec} }})
	t.Cleanup(func() {
		n.eng.Send(root, messages.Shutdown{})
		<-exited
	})
	eventually(t, clk, 0, "activator up", func() bool { _, ok := sys.Tree.Get("root/activator"); return ok })
	act, _ := sys.Tree.Get("root/activator")
	n.eng.Send(root, messages.Deliver{Path: "root/activator", Msg: hostDef("web", "blog", "blog.localhost")})
	eventually(t, clk, 0, "host up", func() bool { _, ok := n.table2.Host("blog.localhost"); return ok })
	n.eng.Send(root, messages.Deliver{Path: "root/activator", Msg: messages.InjectPanic{Reason: "test"}})
	eventually(t, clk, time.Second, "activator restarted with its host", func() bool {
		a, ok := sys.Tree.Get("root/activator")
		_, hostUp := sys.Tree.Get("root/activator/host:blog.localhost")
		return ok && a.Gen != act.Gen && hostUp
	})
}

// ACT-9 after a crash: a host actor that panics while awake leaves writes
// that no checkpoint holds yet. The next incarnation wakes on the local copy
// and must upload it at sleep, even when no request changes it again: a
// second node restoring from the store sees every acknowledged write.
func TestHostActorRestartCheckpointsLocalWrites(t *testing.T) {
	// Woken with count 1; sleep (checkpoint 1 holds it), wake and write 2.
	n, clk := awakeNode(t)
	walk(clk, 16*time.Minute, n)
	eventually(t, clk, time.Second, "first sleep", func() bool { return n.events.count(messages.KindHostSlept) == 1 })
	if code, body, _ := n.get("notes.localhost", "/count"); code != http.StatusOK || body != "2" {
		t.Fatalf("second wake: %d %q", code, body)
	}
	panicHost(t, n, clk)
	// A read-only wake, then sleep: the upload must still happen.
	if _, body, _ := n.get("notes.localhost", "/read"); body != "2|" {
		t.Fatalf("local copy after the restart: %q", body)
	}
	walk(clk, 16*time.Minute, n)
	eventually(t, clk, time.Second, "asleep again", func() bool {
		return n.state("notes.localhost") == messages.HostAsleep && n.events.count(messages.KindHostSlept) == 2
	})
	if body := readOnSecondNode(t, n.store, clk); body != "2|" {
		t.Fatalf("n2 restored %q, want the acknowledged count 2", body)
	}
}

// ACT-9 after a crash, with no request after it: a host actor that panics
// while awake still holds the lease under this node's holder id, and
// its last writes are only in the local copy. The next incarnation resumes
// the lease at once and wakes on the local copy, so its next sleep
// checkpoints those writes and releases the lease; a second node then
// restores every acknowledged write (the chaos campaign's panic.host
// finding, docs/chaos.md).
func TestHostActorRestartResumesHeldLease(t *testing.T) {
	n, clk := awakeNode(t)
	if code, body, _ := n.get("notes.localhost", "/count"); code != http.StatusOK || body != "2" {
		t.Fatalf("second request: %d %q", code, body)
	}
	panicHost(t, n, clk)
	eventually(t, clk, 0, "the new incarnation wakes again", func() bool { return n.state("notes.localhost") == messages.HostAwake })
	resumed := false
	for _, e := range n.events.all() {
		resumed = resumed || e.Kind == messages.KindHostState && strings.Contains(e.Message, "(resume)")
	}
	if !resumed {
		t.Fatal("no wake with reason resume")
	}
	walk(clk, 16*time.Minute, n)
	eventually(t, clk, time.Second, "asleep after the idle window", func() bool {
		return n.state("notes.localhost") == messages.HostAsleep && n.events.count(messages.KindHostSlept) == 1
	})
	if body := readOnSecondNode(t, n.store, clk); body != "2|" {
		t.Fatalf("n2 restored %q, want the acknowledged count 2", body)
	}
}

// panicHost panics the host actor of notes.localhost and waits for its next
// incarnation.
func panicHost(t *testing.T, n *node, clk *clock.Fake) {
	t.Helper()
	route, _ := n.table.Host("notes.localhost")
	n.eng.Send(route.PID, messages.InjectPanic{Reason: "test"})
	eventually(t, clk, 0, "a new incarnation", func() bool {
		r, ok := n.table.Host("notes.localhost")
		return ok && r.PID != nil && !r.PID.Equals(route.PID)
	})
}

// SUP-20, SUP-21 for hosts: a host actor that ended waits out the daemon's
// supervision.ladder (or its service's own x-engenho.backoff once the file
// declares one); meanwhile the host stays in status as `restarting` with
// its next attempt and the edge answers 503 with Retry-After, not 404;
// then it comes back and resumes awake. A sidecar actor waits out the
// same ladder, shown restarting in the tree.
func TestSUP20HostWaitsOnItsLadder(t *testing.T) {
	clk := clock.NewFake(t0)
	n := newNode(t, "n1", objfake.New(objfake.Options{Seed: 1}), clk, nodeOpts{
		ladder: ladder.Config{Immediate: 0, Delays: []time.Duration{9 * time.Second}, Cap: 9 * time.Second, Stable: time.Hour}})
	n.define(hostDef("web", "notes", "notes.localhost", withSidecar("ticker", "/bin/sh", "-c", "sleep 3600")))
	eventually(t, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	if code, _, _ := n.get("notes.localhost", "/count"); code != http.StatusOK {
		t.Fatalf("wake: %d", code)
	}
	waitsAndReturns := func(what string, delay time.Duration) {
		t.Helper()
		route, _ := n.table.Host("notes.localhost")
		n.eng.Send(route.PID, messages.InjectPanic{Reason: "test"})
		eventually(t, clk, 0, what+": restarting", func() bool { return n.state("notes.localhost") == messages.HostRestarting })
		r, _ := n.table.Host("notes.localhost")
		if want := clk.Now().Add(delay); !r.Status.NextAttempt.Equal(want) || r.Status.Stack != "web" || r.Status.Service != "notes" ||
			!strings.Contains(r.Status.LastError, "panic") {
			t.Fatalf("%s: status while waiting %+v, want next attempt %s", what, r.Status, want)
		}
		code, body, retry := n.get("notes.localhost", "/count")
		if code != http.StatusServiceUnavailable || retry != strconv.Itoa(int(delay/time.Second)) || !strings.Contains(body, "restarting") {
			t.Fatalf("%s: edge while waiting: %d %q Retry-After %q", what, code, body, retry)
		}
		clk.Advance(delay - time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		if st := n.state("notes.localhost"); st != messages.HostRestarting {
			t.Fatalf("%s: back before its %s: %s", what, delay, st)
		}
		clk.Advance(time.Millisecond)
		eventually(t, clk, 0, what+": awake again", func() bool { return n.state("notes.localhost") == messages.HostAwake })
	}
	waitsAndReturns("on the daemon's ladder", 9*time.Second)
	own := hostDef("web", "notes", "notes.localhost", withSidecar("ticker", "/bin/sh", "-c", "sleep 3600"), func(s *stackfile.Service) {
		s.Engenho.Backoff = stackfile.Backoff{Immediate: 0, Delays: []time.Duration{4 * time.Second}, Cap: 4 * time.Second, Declared: true}
	})
	n.define(own)
	waitsAndReturns("on its service's backoff", 4*time.Second)
	if ev, ok := n.events.last(messages.KindActorRestarted); !ok || ev.Host != "notes.localhost" || ev.Fields["failures"] != "2" {
		t.Fatalf("actor.restarted event %+v %v", ev, ok)
	}

	var sidecar string
	eventually(t, clk, 0, "sidecar running", func() bool {
		for _, nd := range n.sys.Tree.Snapshot() {
			if strings.HasSuffix(nd.Path, "/sidecar:ticker") && nd.State == "running" {
				sidecar = nd.Path
				return true
			}
		}
		return false
	})
	n.eng.Send(n.pid, messages.Deliver{Path: sidecar, Msg: messages.InjectPanic{Reason: "test"}})
	eventually(t, clk, 0, "sidecar restarting", func() bool {
		nd, _ := n.sys.Tree.Get(sidecar)
		return nd.State == "restarting" && nd.NextAttempt.Equal(clk.Now().Add(4*time.Second))
	})
}
