package root_test

import (
	"sort"
	"testing"

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
