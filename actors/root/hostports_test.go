package root_test

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/ports"
	"github.com/engenho/engenho/messages"
)

// webRange is a service with a published port and a healthcheck, rolled
// out start-first: a new instance runs beside the old one it replaces.
const webRange = `
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
      update_config:
        order: start-first
`

// free is a probe that finds every port free: the fake driver binds
// nothing, so only the allocator's own bookkeeping decides.
func free(int) error { return nil }

// hostPortsOf is the host port of target 80 of every instance of web, by
// revision label.
// addressed says sts are n instances that all have their address: an
// instance that was just created has none until it starts, and the
// service may still call itself converged from before a scale-up.
func addressed(sts []drivers.Status, n int) bool {
	if len(sts) != n {
		return false
	}
	for _, st := range sts {
		if st.Addresses[80] == "" {
			return false
		}
	}
	return true
}

func hostPortsOf(t *testing.T, sts []drivers.Status) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, st := range sts {
		_, p, err := net.SplitHostPort(st.Addresses[80])
		if err != nil {
			t.Fatalf("instance %s: address %q", st.Name, st.Addresses[80])
		}
		n, _ := strconv.Atoi(p)
		out[st.Labels[drivers.LabelRevision]] = append(out[st.Labels[drivers.LabelRevision]], n)
	}
	for _, ps := range out {
		sort.Ints(ps)
	}
	return out
}

// SVC-24: the instances of a service get their host ports from the node's
// range, and a start-first rollout's new instances get fresh ones after the
// newest port in use: not the ports the old instances just released.
func TestSVC24StartFirstRolloutTakesPortsFromTheRange(t *testing.T) {
	e := newEnvWith(t, ports.New(ports.Range{Low: 20000, High: 20003}, free))
	e.apply(webRange)
	e.until("converged on v1", func() bool { return e.tree.Converged("web") && addressed(e.instances(), 2) })
	v1 := e.tree.Service("web", "api").Revision
	if got := hostPortsOf(t, e.instances())[v1]; fmt.Sprint(got) != "[20000 20001]" {
		t.Fatalf("v1 host ports %v, want [20000 20001]", got)
	}
	e.apply(strings.ReplaceAll(webRange, "v1", "v2"))
	e.until("converged on v2", func() bool {
		st := e.tree.Service("web", "api")
		return e.tree.Converged("web") && st.Revision != v1 && addressed(e.instances(), 2)
	})
	got := hostPortsOf(t, e.instances())
	v2 := e.tree.Service("web", "api").Revision
	// Slot 1's new instance takes 20002 beside the two old ones; when the
	// old slot 1 is gone (20000 free again), slot 2's takes 20003, the next
	// after the newest.
	if fmt.Sprint(got[v2]) != "[20002 20003]" || len(got) != 1 {
		t.Fatalf("host ports after the rollout %v, want v2 on [20002 20003]", got)
	}
}

// SVC-24: when the range is spent, the new instance is not created and the
// service says why: "no free port left in the range LOW-HIGH".
func TestSVC24SpentRangeFailsTheSpawn(t *testing.T) {
	e := newEnvWith(t, ports.New(ports.Range{Low: 20000, High: 20001}, free))
	e.apply(webRange)
	e.until("converged on v1", func() bool { return e.tree.Converged("web") && addressed(e.instances(), 2) })
	e.apply(strings.ReplaceAll(webRange, "v1", "v2"))
	e.until("deploy.failed for the port", func() bool {
		for _, ev := range e.tree.Events.All() {
			if ev.Kind == messages.KindDeployFailed && strings.Contains(ev.Message, "no free port left in the range 20000-20001") {
				return true
			}
		}
		return false
	})
	if n := len(e.instances()); n != 2 {
		t.Fatalf("%d instances, want the 2 old ones serving", n)
	}
	// The rollout is not stuck on it: the service plans again every 5s,
	// and the batch's deadline ends it as it ends a slow instance
	// (failure_action pause: the old revision keeps serving).
	e.until("the batch fails at its deadline", func() bool {
		for _, ev := range e.tree.Events.All() {
			if ev.Kind == messages.KindDeployFailed && strings.Contains(ev.Message, "did not become healthy") {
				return true
			}
		}
		return false
	})
	e.until("the old revision serves", func() bool { return addressed(e.instances(), 2) && e.tree.Service("web", "api").Healthy == 2 })
	n := 0
	for _, ev := range e.tree.Events.All() {
		if strings.Contains(ev.Message, "no free port left") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the spent range was said %d times, want once:\n%s", n, e.tree.Events)
	}
}

// SVC-24: after the tree restarts on a fresh allocator (a daemon restart),
// the adopted instances' ports count as in use: a scale-up takes the next
// one after them.
func TestSVC24AdoptedPortsStayInUse(t *testing.T) {
	e := newEnvWith(t, ports.New(ports.Range{Low: 20000, High: 20009}, free))
	m, err := e.tree.Apply("web", webRange)
	if err != nil {
		t.Fatal(err)
	}
	e.until("converged", func() bool { return e.tree.Converged("web") && addressed(e.instances(), 2) })
	if err := e.tree.Stop(); err != nil {
		t.Fatal(err)
	}
	e.hostPorts = ports.New(ports.Range{Low: 20000, High: 20009}, free)
	e.start()
	e.tree.Send(m)
	e.until("adopted", func() bool { return e.tree.Converged("web") })
	e.apply(strings.Replace(webRange, "replicas: 2", "replicas: 3", 1))
	e.until("scaled to 3", func() bool { return e.tree.Converged("web") && addressed(e.instances(), 3) })
	var all []int
	for _, ps := range hostPortsOf(t, e.instances()) {
		all = append(all, ps...)
	}
	sort.Ints(all)
	if fmt.Sprint(all) != "[20000 20001 20002]" {
		t.Fatalf("host ports %v, want the adopted 20000, 20001 and a new 20002", all)
	}
}
