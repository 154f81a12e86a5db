package root_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/messages"
)

const webPorts = `
services:
  api:
    command: ["server", "v1"]
    ports: ["18080:80"]
    deploy:
      replicas: 2
`

// SVC-22: a service listens on its published port through the node's
// Ports and puts exactly its serving replicas in rotation; a removed
// service closes the port (SVC-16: its replicas leave the rotation first).
func TestSVC22PublishedPortRotation(t *testing.T) {
	e := newEnv(t)
	e.apply(webPorts)
	const port = "web/api/18080"
	e.until("converged with 2 in rotation", func() bool {
		rot, ok := e.tree.Ports.Rotation(port)
		return ok && e.tree.Converged("web") && len(rot) == 2
	})
	rot, _ := e.tree.Ports.Rotation(port)
	var ids []string
	for _, b := range rot {
		if b.Addr == "" {
			t.Fatalf("backend %s has no address", b.ID)
		}
		ids = append(ids, b.ID)
	}
	var want []string
	for _, r := range e.tree.Service("web", "api").Replicas {
		if r.InRotation {
			want = append(want, r.ID)
		}
	}
	sort.Strings(ids)
	sort.Strings(want)
	if len(want) != 2 || ids[0] != want[0] || ids[1] != want[1] {
		t.Fatalf("rotation %v, replicas in rotation %v", ids, want)
	}
	e.tree.Send(messages.RemoveStack{Stack: "web"})
	e.until("port closed", func() bool {
		_, ok := e.tree.Ports.Rotation(port)
		return !ok
	})
}

// SVC-22, SVC-2: a redeploy that changes the published port listens on the
// new one, with the new replicas in rotation, and frees the old one.
func TestSVC22ARedeployMovesThePublishedPort(t *testing.T) {
	e := newEnv(t)
	e.apply(webPorts)
	e.until("converged on 18080", func() bool {
		rot, ok := e.tree.Ports.Rotation("web/api/18080")
		return ok && e.tree.Converged("web") && len(rot) == 2
	})
	e.apply(strings.ReplaceAll(strings.ReplaceAll(webPorts, "18080:80", "18081:80"), `"v1"`, `"v2"`))
	e.until("converged on 18081, 18080 closed", func() bool {
		rot, ok := e.tree.Ports.Rotation("web/api/18081")
		_, old := e.tree.Ports.Rotation("web/api/18080")
		return ok && !old && e.tree.Converged("web") && len(rot) == 2
	})
}

// SVC-22, SVC-2: a port moved from one service to another of the same
// stack is had by the new one, whichever service hears of the change
// first: a listen refused while the old one holds the address is tried
// again at the next pass, and the status says why meanwhile.
func TestSVC22APortMovedToAnotherServiceIsTakenOver(t *testing.T) {
	const before = `
services:
  api:
    command: ["server", "v1"]
    ports: ["18080:80"]
  admin:
    command: ["server", "v1"]
`
	const after = `
services:
  api:
    command: ["server", "v1"]
  admin:
    command: ["server", "v1"]
    ports: ["18080:80"]
`
	e := newEnv(t)
	e.apply(before)
	e.until("api converged on 18080", func() bool {
		rot, ok := e.tree.Ports.Rotation("web/api/18080")
		return ok && e.tree.Converged("web") && len(rot) == 1
	})
	e.apply(after)
	e.until("admin serves 18080, api's port closed", func() bool {
		rot, ok := e.tree.Ports.Rotation("web/admin/18080")
		_, old := e.tree.Ports.Rotation("web/api/18080")
		return ok && !old && e.tree.Converged("web") && len(rot) == 1
	})
}

// SVC-22, SVC-19: a published port whose address another holder has is
// not listened on; the service is failing and its status says which port,
// why and what to do; it takes the port once it is free (tried every 5s).
func TestSVC22APortTakenByAnotherIsTriedAgain(t *testing.T) {
	e := newEnv(t)
	if err := e.tree.Ports.Listen("squatter", "0.0.0.0:18080"); err != nil {
		t.Fatal(err)
	}
	e.apply(webPorts)
	e.until("status names the port", func() bool {
		st := e.tree.Service("web", "api")
		return st.State == messages.ServiceFailing && strings.Contains(st.Message, "published port 0.0.0.0:18080 not listening") &&
			strings.Contains(st.Message, "address in use") && strings.Contains(st.Message, "free the address")
	}, func() string { return e.tree.Service("web", "api").Message })
	if err := e.tree.Ports.Close("squatter"); err != nil {
		t.Fatal(err)
	}
	e.until("converged on 18080", func() bool {
		rot, ok := e.tree.Ports.Rotation("web/api/18080")
		return ok && e.tree.Converged("web") && len(rot) == 2
	})
}

// SVC-22: a listener of this service's name that its definition does not
// publish (left by an earlier incarnation of the actor) is closed when the
// service opens its ports.
func TestSVC22AStaleListenerOfTheServiceIsClosed(t *testing.T) {
	e := newEnv(t)
	if err := e.tree.Ports.Listen("web/api/19999", "0.0.0.0:19999"); err != nil {
		t.Fatal(err)
	}
	e.apply(webPorts)
	e.until("converged on 18080, 19999 closed", func() bool {
		rot, ok := e.tree.Ports.Rotation("web/api/18080")
		_, stale := e.tree.Ports.Rotation("web/api/19999")
		return ok && !stale && e.tree.Converged("web") && len(rot) == 2
	})
}

// SVC-22, SVC-16: a removed service whose port was down does not take it
// when it frees up: the retry ends with the service.
func TestSVC22ARemovedServiceDoesNotRetryItsPort(t *testing.T) {
	e := newEnv(t)
	if err := e.tree.Ports.Listen("squatter", "0.0.0.0:18080"); err != nil {
		t.Fatal(err)
	}
	e.apply(webPorts)
	e.until("the port is down", func() bool {
		return strings.Contains(e.tree.Service("web", "api").Message, "not listening")
	})
	e.tree.Send(messages.RemoveStack{Stack: "web"})
	e.until("the service is gone", func() bool {
		_, ok := e.tree.Board.Service("web", "api")
		return !ok
	})
	if err := e.tree.Ports.Close("squatter"); err != nil {
		t.Fatal(err)
	}
	for range 100 { // 10s of the fake clock: two retry periods
		e.clk.Advance(100 * time.Millisecond)
	}
	if _, ok := e.tree.Ports.Rotation("web/api/18080"); ok {
		t.Fatal("the removed service took its port again")
	}
	if _, ok := e.tree.Board.Service("web", "api"); ok {
		t.Fatal("the removed service is back on the board")
	}
}

// SVC-22, SVC-12: a rollout that changes a published port's target keeps
// the old replicas in rotation on their old target until new ones serve:
// the rotation is never empty on the way.
func TestSVC22ATargetChangeKeepsTheOldReplicasInRotation(t *testing.T) {
	e := newEnv(t)
	e.apply(webPorts)
	e.until("converged on 18080", func() bool {
		rot, ok := e.tree.Ports.Rotation("web/api/18080")
		return ok && e.tree.Converged("web") && len(rot) == 2
	})
	v1 := e.tree.Service("web", "api").Revision
	var mu sync.Mutex
	emptied := 0
	e.tree.Ports.OnSet(func(name string, backends []service.Backend, err error) {
		mu.Lock()
		defer mu.Unlock()
		if name == "web/api/18080" && err == nil && len(backends) == 0 {
			emptied++
		}
	})
	e.apply(strings.ReplaceAll(strings.ReplaceAll(webPorts, "18080:80", "18080:8000"), `"v1"`, `"v2"`))
	e.until("converged on v2 with 2 in rotation", func() bool {
		rot, ok := e.tree.Ports.Rotation("web/api/18080")
		st := e.tree.Service("web", "api")
		return ok && e.tree.Converged("web") && len(rot) == 2 && st.Revision != v1 && st.Rollout == nil
	})
	mu.Lock()
	defer mu.Unlock()
	if emptied > 0 {
		t.Fatalf("the rotation was emptied %d times during the rollout", emptied)
	}
}

// SVC-22: two services of a stack that swap their published ports in one
// apply hand them over: whichever hears first waits for the other (status
// waiting, no deploy.failed), and both end up serving on their new ports.
func TestSVC22TwoServicesSwapTheirPorts(t *testing.T) {
	const before = `
services:
  api:
    command: ["server", "v1"]
    ports: ["18080:80"]
  admin:
    command: ["server", "v1"]
    ports: ["18081:80"]
`
	e := newEnv(t)
	e.apply(before)
	e.until("both converged", func() bool {
		_, a := e.tree.Ports.Rotation("web/api/18080")
		_, b := e.tree.Ports.Rotation("web/admin/18081")
		return a && b && e.tree.Converged("web")
	})
	after := strings.ReplaceAll(strings.ReplaceAll(before, "18080:80", "X"), "18081:80", "18080:80")
	e.apply(strings.ReplaceAll(after, "X", "18081:80"))
	e.until("swapped and converged", func() bool {
		a, aok := e.tree.Ports.Rotation("web/api/18081")
		b, bok := e.tree.Ports.Rotation("web/admin/18080")
		return aok && bok && len(a) == 1 && len(b) == 1 && e.tree.Converged("web")
	}, func() string {
		return e.tree.Service("web", "api").Message + " | " + e.tree.Service("web", "admin").Message
	})
	for _, ev := range e.tree.Events.All() {
		if ev.Kind == messages.KindDeployFailed {
			t.Errorf("a hand-over was told as a failure: %s", ev.Message)
		}
	}
}

// SVC-22: a listener of the service's port left on another host address
// (an earlier incarnation's, before a change of host_ip) is closed and the
// port opened on the address the definition asks for.
func TestSVC22AStaleListenerOnAnotherAddressIsReplaced(t *testing.T) {
	e := newEnv(t)
	if err := e.tree.Ports.Listen("web/api/18080", "127.0.0.1:18080"); err != nil {
		t.Fatal(err)
	}
	e.apply(webPorts) // publishes 18080 on 0.0.0.0
	e.until("listening on 0.0.0.0:18080", func() bool {
		addr, ok := e.tree.Ports.Addr("web/api/18080")
		return ok && addr.String() == "0.0.0.0:18080" && e.tree.Converged("web")
	})
}

// SVC-5, ACT-1: a service that turns hibernating hands over to the
// activator: its service actor retires its replicas (they kept running
// beside the host before).
func TestSVC5AServiceThatTurnsHibernatingRetiresItsReplicas(t *testing.T) {
	e := newEnv(t)
	e.apply(webPorts)
	e.until("converged with 2 replicas", func() bool {
		return e.tree.Converged("web") && len(e.instances()) == 2
	})
	e.apply(`
services:
  api:
    command: ["server", "v1"]
    ports: ["80"]
    x-engenho:
      hibernate: {host: api.localhost, port: 80}
`)
	e.until("the replicas are gone", func() bool {
		_, listed := e.tree.Board.Service("web", "api")
		return len(e.instances()) == 0 && !listed
	}, func() string { return fmt.Sprint(e.instances()) })
}
