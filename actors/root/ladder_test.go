package root_test

import (
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/internal/treetest"
	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/messages"
)

const ladderStack = `
services:
  api:
    command: ["server"]
  db:
    command: ["db"]
    x-engenho:
      backoff: {immediate: 0, delays: [13s], cap: 13s}
`

// SUP-20: the daemon's supervision.ladder paces actor restarts at every
// level under the root (a stack, a service, a replica actor), and a
// service's own x-engenho.backoff paces the actors of that service
// instead. SUP-21: while an actor waits out its backoff the tree shows it
// `restarting` with its next attempt; SUP-18: an actor.restarted event
// names it, its failure count and its next attempt. (The host and sidecar
// levels are proven in actors/activator, TestSUP20HostWaitsOnItsLadder.)
func TestSUP20LadderAtEveryLevel(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	daemonLadder := ladder.Config{Immediate: 0, Delays: []time.Duration{7 * time.Second}, Cap: 7 * time.Second, Stable: time.Minute}
	tree, err := treetest.New(treetest.Options{Clock: clk, Driver: fake.New(fake.Options{Clock: clk, Seed: 1}),
		Sweep: 30 * time.Second, Ladder: daemonLadder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tree.Stop() })
	if _, err := tree.Apply("web", ladderStack); err != nil {
		t.Fatal(err)
	}
	converged := func() bool { return tree.Converged("web") }
	advanceUntil(t, clk, tree, "converged", converged)
	cases := []struct {
		name, path string
		delay      time.Duration
	}{
		{"stack", "root/stack:web", 7 * time.Second},
		{"service", "root/stack:web/service:api", 7 * time.Second},
		{"replica", "root/stack:web/service:api/replica:1-", 7 * time.Second},
		{"service with its own backoff", "root/stack:web/service:db", 13 * time.Second},
		{"replica with its service's backoff", "root/stack:web/service:db/replica:1-", 13 * time.Second},
	}
	for _, c := range cases {
		path := nodePath(t, tree, c.path)
		before, _ := tree.Sys.Tree.Get(path)
		tree.Send(messages.Deliver{Path: path, Msg: messages.InjectPanic{Reason: "test " + c.name}})
		var n supervise.Node
		if !tree.WaitFor(10*time.Second, func() bool {
			n, _ = tree.Sys.Tree.Get(path)
			return n.State == supervise.StateRestarting
		}) {
			t.Fatalf("%s: %s not shown restarting; node %+v", c.name, path, n)
		}
		if want := clk.Now().Add(c.delay); !n.NextAttempt.Equal(want) || !strings.Contains(n.Detail, "failure 1") {
			t.Fatalf("%s: waiting node %+v, want next attempt %s", c.name, n, want)
		}
		clk.Advance(c.delay - time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		if n, _ := tree.Sys.Tree.Get(path); n.State != supervise.StateRestarting {
			t.Fatalf("%s: restarted before its %s: %+v", c.name, c.delay, n)
		}
		clk.Advance(time.Millisecond)
		if !tree.WaitFor(10*time.Second, func() bool {
			n, ok := tree.Sys.Tree.Get(path)
			return ok && n.Gen != before.Gen && n.State != supervise.StateRestarting
		}) {
			t.Fatalf("%s: %s did not start again after %s", c.name, path, c.delay)
		}
		advanceUntil(t, clk, tree, c.name+": converged again", converged)
		if !hasRestartEvent(tree.Events.All(), path) {
			t.Fatalf("%s: no actor.restarted event for %s:\n%s", c.name, path, tree.Events)
		}
	}
}

// nodePath is the path of the live actor whose path starts with prefix.
// It waits for one: a restarted service is converged on the board before
// its new incarnation has adopted its instances and spawned their actors.
func nodePath(t *testing.T, tree *treetest.Tree, prefix string) string {
	t.Helper()
	path := ""
	tree.WaitFor(10*time.Second, func() bool {
		for _, n := range tree.Sys.Tree.Snapshot() {
			if strings.HasPrefix(n.Path, prefix) && !strings.Contains(n.Path[len(prefix):], "/") {
				path = n.Path
				return true
			}
		}
		return false
	})
	if path == "" {
		t.Fatalf("no actor at %s*", prefix)
	}
	return path
}

func hasRestartEvent(evs []messages.Event, path string) bool {
	for _, ev := range evs {
		if ev.Kind == messages.KindActorRestarted && ev.Actor == path && ev.Fields["failures"] == "1" && ev.Fields["next_attempt"] != "" {
			return true
		}
	}
	return false
}

func advanceUntil(t *testing.T, clk *clock.Fake, tree *treetest.Tree, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached\nevents:\n%s", what, tree.Events)
		}
		time.Sleep(time.Millisecond)
		clk.Advance(100 * time.Millisecond)
	}
}
