package invariant

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/messages"
)

var t0 = time.Unix(1_000_000, 0).UTC()

func want() Want {
	return Want{Services: []ServiceWant{
		{Service: "shop/web", Replicas: 2, Probe: true, Revision: "r1"},
		{Service: "jobs/worker", Replicas: 1, Stopped: true, StoppedAt: t0},
	}}
}

func replica(slot int, phase, health string) messages.ReplicaStatus {
	return messages.ReplicaStatus{Stack: "shop", Service: "web", Slot: slot, Instance: "shop-web-" + strconv.Itoa(slot) + "-x",
		Revision: "r1", Phase: phase, Health: health, InRotation: phase == "serving"}
}

func goodStatus() []messages.ServiceStatus {
	return []messages.ServiceStatus{
		{Stack: "shop", Service: "web", State: messages.ServiceConverged, Revision: "r1", Desired: 2, Running: 2, Healthy: 2,
			Replicas: []messages.ReplicaStatus{replica(1, "serving", "healthy"), replica(2, "serving", "healthy")}},
		{Stack: "jobs", Service: "worker", State: messages.ServiceConverged, Stopped: true, Desired: 1},
	}
}

func inst(stack, service string, slot int, name string, pid int, rev string, started time.Time) inject.Instance {
	return inject.Instance{Driver: "process", Status: drivers.Status{Name: name, State: drivers.StateRunning, Pid: pid, StartedAt: started,
		Labels: drivers.Labels{drivers.LabelStack: stack, drivers.LabelService: service, drivers.LabelSlot: strconv.Itoa(slot), drivers.LabelRevision: rev}}}
}

func goodInstances() []inject.Instance {
	return []inject.Instance{
		inst("shop", "web", 1, "shop-web-1-x", 101, "r1", t0),
		inst("shop", "web", 2, "shop-web-2-x", 102, "r1", t0),
	}
}

func only(t *testing.T, vs []Violation, invariant, evidence string) {
	t.Helper()
	if len(vs) == 0 {
		t.Fatalf("no violation, want %s (%s)", invariant, evidence)
	}
	for _, v := range vs {
		if v.Invariant != invariant {
			t.Fatalf("violation %s, want only %s", v, invariant)
		}
	}
	for _, v := range vs {
		if strings.Contains(v.Evidence, evidence) {
			return
		}
	}
	t.Fatalf("no evidence %q in %v", evidence, vs)
}

// A converged node violates nothing: the checkers are not always red.
func TestGoodStateHoldsEverything(t *testing.T) {
	w, st, in := want(), goodStatus(), goodInstances()
	procs := []Proc{{Pid: 101, Pgid: 101, Service: "shop/web"}, {Pid: 150, Pgid: 102, Service: "shop/web"}}
	for name, vs := range map[string][]Violation{
		"converged":    CheckConverged(w, st),
		"one-per-slot": CheckOnePerSlot(w, st, in),
		"stopped":      CheckStopped(w, in, procs),
		"orphans":      CheckOrphans(w, in, procs),
		"untouched":    CheckUntouched(in, in, map[string]bool{"shop-web-1-x": true, "shop-web-2-x": true}, func(string, int) bool { return false }),
		"acked":        CheckAcknowledged([]Ack{{Service: "shop/web", What: "replicas", Value: "2"}, {Service: "jobs/worker", What: "stopped", Value: "true"}, {Service: "shop/web", What: "revision", Value: "r1"}}, st),
		"awake":        CheckSingleAwake([]HostView{{Node: "a", Host: "h", State: messages.HostAwake}, {Node: "b", Host: "h", State: messages.HostAsleep}}),
		"checkpoint":   CheckCheckpoint("h", "abc", "abc"),
		"goroutines":   CheckGoroutines(map[string]int{"a": 10}, map[string]int{"a": 12}, 5),
		"serving":      CheckServingIsRunning(st, in),
	} {
		if len(vs) != 0 {
			t.Errorf("%s: %v", name, vs)
		}
	}
}

// Issue 18: a replica status calls serving is a running instance in the
// driver's own list, of the run status describes; a dead workload never
// passes for a live one.
func TestServingIsRunningCatches(t *testing.T) {
	cases := map[string]struct {
		edit     func([]inject.Instance) []inject.Instance
		evidence string
	}{
		"gone from the driver": {func(in []inject.Instance) []inject.Instance { return in[:1] },
			"shop-web-2-x serving (in rotation true) but the driver has no such instance"},
		"exited in the driver": {func(in []inject.Instance) []inject.Instance { in[1].State = drivers.StateStopped; return in },
			"shop-web-2-x serving (in rotation true) but the driver has it stopped"},
		"another run": {func(in []inject.Instance) []inject.Instance { in[1].StartedAt = t0.Add(time.Second); return in },
			"the driver runs one started"},
	}
	for name, c := range cases {
		st := goodStatus()
		for i := range st[0].Replicas {
			st[0].Replicas[i].StartedAt = t0
		}
		vs := CheckServingIsRunning(st, c.edit(goodInstances()))
		if len(vs) != 1 || vs[0].Invariant != ServingIsRunning || vs[0].Subject != "shop/web/2" || !strings.Contains(vs[0].Evidence, c.evidence) {
			t.Errorf("%s: %v", name, vs)
		}
	}
	st := goodStatus()
	st[0].Replicas[1].Phase, st[0].Replicas[1].InRotation = "down", false
	if vs := CheckServingIsRunning(st, goodInstances()[:1]); len(vs) != 0 {
		t.Errorf("a replica status calls down needs no running instance: %v", vs)
	}
}

// CHS-3 every service reaches its declared replicas, healthy.
func TestCHS3ConvergedCatches(t *testing.T) {
	cases := map[string]struct {
		edit     func([]messages.ServiceStatus) []messages.ServiceStatus
		evidence string
	}{
		"too few": {func(s []messages.ServiceStatus) []messages.ServiceStatus {
			s[0].Running, s[0].Replicas = 1, s[0].Replicas[:1]
			return s
		}, "no replica in the slot"},
		"unhealthy": {func(s []messages.ServiceStatus) []messages.ServiceStatus {
			s[0].Replicas[1].Health = "unhealthy"
			return s
		}, "health unhealthy"},
		"not serving": {func(s []messages.ServiceStatus) []messages.ServiceStatus {
			s[0].Replicas[0].Phase = "starting"
			return s
		}, "phase starting"},
		"state": {func(s []messages.ServiceStatus) []messages.ServiceStatus {
			s[0].State = messages.ServiceFailing
			return s
		}, "state failing"},
		"revision": {func(s []messages.ServiceStatus) []messages.ServiceStatus { s[0].Revision = "r0"; return s }, "want the acknowledged r1"},
		"missing":  {func(s []messages.ServiceStatus) []messages.ServiceStatus { return s[1:] }, "missing from status"},
		"undeployed": {func(s []messages.ServiceStatus) []messages.ServiceStatus {
			return append(s, messages.ServiceStatus{Stack: "x", Service: "y"})
		}, "not deployed"},
		"stopped runs":  {func(s []messages.ServiceStatus) []messages.ServiceStatus { s[1].Running = 1; return s }, "stopped intent"},
		"double slot":   {func(s []messages.ServiceStatus) []messages.ServiceStatus { s[0].Replicas[1].Slot = 1; return s }, "2 replicas in the slot"},
		"desired wrong": {func(s []messages.ServiceStatus) []messages.ServiceStatus { s[0].Desired = 3; return s }, "desired 3"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			only(t, CheckConverged(want(), tc.edit(goodStatus())), Converged, tc.evidence)
		})
	}
}

// CHS-3 after convergence no slot serves two instances (from what the
// drivers really run, not from status).
func TestCHS3OnePerSlotCatches(t *testing.T) {
	two := append(goodInstances(), inst("shop", "web", 1, "shop-web-1-y", 201, "r1", t0))
	only(t, CheckOnePerSlot(want(), goodStatus(), two), OnePerSlot, "2 instances run in the slot")
	above := append(goodInstances(), inst("shop", "web", 3, "shop-web-3-z", 301, "r1", t0))
	only(t, CheckOnePerSlot(want(), goodStatus(), above), OnePerSlot, "slot above the 2 declared")
	stale := goodInstances()
	stale[0].Labels[drivers.LabelRevision] = "r0"
	only(t, CheckOnePerSlot(want(), goodStatus(), stale), OnePerSlot, "runs revision r0")
}

// CHS-3 a stopped intent is never violated: a start after the stop is a
// safety violation; an instance or process still running is liveness.
func TestCHS3StoppedIntentCatches(t *testing.T) {
	late := append(goodInstances(), inst("jobs", "worker", 1, "jobs-worker-1-a", 401, "w", t0.Add(StartGrace+time.Millisecond)))
	vs := CheckStopped(want(), late, nil)
	only(t, vs, StoppedIntent, "after the stop acknowledged")
	if len(Safety(vs)) != 1 {
		t.Fatalf("a start after the stop must be a safety violation: %v", vs)
	}
	early := append(goodInstances(), inst("jobs", "worker", 1, "jobs-worker-1-a", 401, "w", t0.Add(-time.Second)))
	vs = CheckStopped(want(), early, nil)
	only(t, vs, StoppedIntent, "still runs")
	if len(Safety(vs)) != 0 {
		t.Fatalf("an instance still stopping is liveness: %v", vs)
	}
	only(t, CheckStopped(want(), nil, []Proc{{Pid: 9, Pgid: 9, Service: "jobs/worker"}}), StoppedIntent, "process 9")
}

// CHS-3 no orphan process: a marked process outside every running
// instance's group, or an instance of an undeployed service.
func TestCHS3OrphansCatch(t *testing.T) {
	only(t, CheckOrphans(want(), goodInstances(), []Proc{{Pid: 77, Pgid: 77, Service: "shop/web"}}), NoOrphans, "process 77")
	gone := append(goodInstances(), inst("old", "svc", 1, "old-svc-1-q", 501, "r", t0))
	only(t, CheckOrphans(want(), gone, nil), NoOrphans, "not deployed")
}

// CHS-3 healthy replicas untouched by faults aimed elsewhere are not
// restarted; the touched slot may change.
func TestCHS3UntouchedCatches(t *testing.T) {
	before := goodInstances()
	healthy := map[string]bool{"shop-web-1-x": true, "shop-web-2-x": true}
	restarted := goodInstances()
	restarted[1].Pid, restarted[1].StartedAt = 999, t0.Add(time.Second)
	touchedSlot1 := func(svc string, slot int) bool { return svc == "shop/web" && slot == 1 }
	vs := CheckUntouched(before, restarted, healthy, touchedSlot1)
	only(t, vs, Untouched, "was restarted")
	if vs[0].Subject != "shop/web/2" || len(Safety(vs)) != 1 {
		t.Fatalf("%v", vs)
	}
	if vs := CheckUntouched(before, restarted, healthy, func(svc string, slot int) bool { return slot == 2 }); len(vs) != 0 {
		t.Fatalf("the touched slot may restart: %v", vs)
	}
	only(t, CheckUntouched(before, before[:1], healthy, touchedSlot1), Untouched, "was replaced")
	// An instance that was not healthy before the fault is not protected.
	if vs := CheckUntouched(before, restarted, map[string]bool{"shop-web-1-x": true}, touchedSlot1); len(vs) != 0 {
		t.Fatalf("%v", vs)
	}
}

// CHS-3, REL-3 every intent acknowledged before a daemon SIGKILL is in
// the journal after it: the last acknowledged value is what status shows.
func TestCHS3AcknowledgedCatches(t *testing.T) {
	acks := []Ack{{Service: "shop/web", What: "replicas", Value: "3", At: t0}, {Service: "shop/web", What: "replicas", Value: "2", At: t0}}
	if vs := CheckAcknowledged(acks, goodStatus()); len(vs) != 0 {
		t.Fatalf("the last ack wins: %v", vs)
	}
	lost := []Ack{{Service: "shop/web", What: "replicas", Value: "3", At: t0}}
	only(t, CheckAcknowledged(lost, goodStatus()), Acknowledged, "the daemon has 2")
	only(t, CheckAcknowledged([]Ack{{Service: "jobs/worker", What: "stopped", Value: "false"}}, goodStatus()), Acknowledged, "the daemon has true")
	only(t, CheckAcknowledged([]Ack{{Service: "shop/web", What: "revision", Value: "r2"}}, goodStatus()), Acknowledged, "has r1")
	only(t, CheckAcknowledged([]Ack{{Service: "gone/svc", What: "replicas", Value: "1"}}, goodStatus()), Acknowledged, "no such service")
}

// CHS-3 no host is awake on two nodes at once.
func TestCHS3SingleAwakeCatches(t *testing.T) {
	vs := CheckSingleAwake([]HostView{{Node: "a", Host: "h", State: messages.HostAwake}, {Node: "b", Host: "h", State: messages.HostStopping},
		{Node: "a", Host: "g", State: messages.HostAwake}})
	only(t, vs, SingleAwake, "awake on a (awake) and b (stopping)")
	if vs[0].Subject != "h" || !vs[0].Safety {
		t.Fatalf("%v", vs)
	}
	// ACT-14: a node fenced by its own lease clock does not serve, so it
	// does not count as awake beside the node that took the host over.
	if vs := CheckSingleAwake([]HostView{{Node: "a", Host: "h", State: messages.HostAwake, Fenced: true},
		{Node: "b", Host: "h", State: messages.HostAwake}}); len(vs) != 0 {
		t.Fatalf("a fenced node counted as awake: %v", vs)
	}
}

// CHS-3 no checkpoint lost or corrupted.
func TestCHS3CheckpointCatches(t *testing.T) {
	only(t, CheckCheckpoint("h", "aaa", "bbb"), CheckpointIntact, "restored data has checksum bbb")
}

// CHS-3 no leaked goroutine after a stop.
func TestCHS3GoroutinesCatch(t *testing.T) {
	fresh := map[string]int{"badger <- x": 20, "accept <- y": 1}
	after := map[string]int{"badger <- x": 20, "accept <- y": 1, "probe <- replica": 30, "watch <- driver": 3}
	only(t, CheckGoroutines(fresh, after, 10), NoLeaks, "+30 probe <- replica; +3 watch <- driver")
}
