package activator

import (
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	objfake "github.com/engenho/engenho/drivers/objstore/fake"
	"github.com/engenho/engenho/messages"
)

// workerDef is a standalone worker: sidecars only. hostName "" makes a
// plain (non-hibernating) one.
func workerDef(stack, name, hostName string, scs ...stackfile.Sidecar) messages.HostDefinition {
	svc := stackfile.NewService(name)
	if hostName != "" {
		svc.Hibernate = &stackfile.Hibernate{Host: hostName, Idle: 15 * time.Minute, Replication: stackfile.ReplicationBatched, WakeTimeout: 30 * time.Second}
	}
	svc.Sidecars = scs
	return messages.HostDefinition{Stack: stack, Service: name, Deployment: "1", Revision: svc.Revision(), Definition: svc}
}

func sc(name string, alwaysOn bool, maxRun time.Duration, command ...string) stackfile.Sidecar {
	return stackfile.Sidecar{Name: name, Command: command, AlwaysOn: alwaysOn, MaxRun: maxRun, StopGracePeriod: 5 * time.Second,
		Backoff: stackfile.SidecarBackoff{Initial: 2 * time.Second, Cap: time.Minute, ResetAfter: time.Minute}}
}

// ACT-12: a hibernating standalone worker with no due time runs at first
// sight; exit 0 is its work done: it sleeps (checkpoint, lease released)
// and is not restarted.
func TestACT12HibernatingWorkerParksWhenDone(t *testing.T) {
	clk := clock.NewFake(t0)
	store := objfake.New(objfake.Options{Seed: 1})
	n := newNode(t, "n1", store, clk, nodeOpts{})
	n.define(workerDef("jobs", "nightly", "nightly.jobs.localhost", sc("report", false, 0, "/bin/sh", "-c", "sleep 30; exit 0")))
	eventually(t, clk, 0, "worker started", func() bool { return len(n.app.running("report")) == 1 })
	if !walkUntil(clk, 2*time.Minute, func() bool { return n.events.count(messages.KindHostSlept) == 1 }, n) {
		t.Fatal("the worker did not sleep after its work was done")
	}
	eventually(t, clk, 0, "lease released", func() bool { return readLease(t, store, "nightly.jobs.localhost").Released })
	walk(clk, 5*time.Minute, n)
	if starts := n.app.ops("start"); len(starts) != 1 {
		t.Fatalf("a finished worker was restarted: %v", starts)
	}
	if n.events.count(messages.KindSidecarDone) != 1 {
		t.Fatalf("sidecar.done events: %d", n.events.count(messages.KindSidecarDone))
	}
}

// ACT-12: a crash (non-zero exit) of a hibernating worker is restarted.
func TestACT12WorkerCrashRestarted(t *testing.T) {
	clk := clock.NewFake(t0)
	n := newNode(t, "n1", objfake.New(objfake.Options{Seed: 1}), clk, nodeOpts{})
	n.define(workerDef("jobs", "nightly", "nightly.jobs.localhost", sc("report", false, 0, "/bin/sh", "-c", "sleep 10; exit 2")))
	if !walkUntil(clk, time.Minute, func() bool { return len(n.app.ops("start")) >= 3 }, n) {
		t.Fatalf("crashed worker not restarted: %v", n.app.ops("start"))
	}
	if n.events.count(messages.KindHostSlept) != 0 {
		t.Fatal("a crashing worker was put to sleep")
	}
}

// ACT-12: an always_on worker is restarted after any exit, 0 included;
// max_run recycles a run that lasts too long.
func TestACT12AlwaysOnAndMaxRun(t *testing.T) {
	clk := clock.NewFake(t0)
	n := newNode(t, "n1", objfake.New(objfake.Options{Seed: 1}), clk, nodeOpts{})
	n.define(workerDef("jobs", "pump", "", sc("pump", true, 0, "/bin/sh", "-c", "sleep 5; exit 0")))
	n.define(workerDef("jobs", "long", "", sc("long", false, time.Minute, "/bin/sh", "-c", "sleep 3600")))
	if !walkUntil(clk, 2*time.Minute, func() bool {
		return countWith(n.app.ops("start"), "pump") >= 3 && n.events.count(messages.KindSidecarRecycled) >= 1
	}, n) {
		t.Fatalf("starts %v, recycled %d", n.app.ops("start"), n.events.count(messages.KindSidecarRecycled))
	}
	eventually(t, clk, 0, "recycled worker started again", func() bool { return countWith(n.app.ops("start"), "long") >= 2 })
}

func countWith(xs []string, part string) int {
	c := 0
	for _, x := range xs {
		if strings.Contains(x, part) {
			c++
		}
	}
	return c
}
