package daemon

import (
	"reflect"
	"testing"

	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/runtime/balancer"
)

// SVC-22: the service actors' rotation reaches the node's balancer through
// the Ports adapter unchanged, in order, and an empty rotation empties it.
func TestSVC22PortsAdapterPassesTheRotation(t *testing.T) {
	b := balancer.New(balancer.Options{})
	defer b.Shutdown()
	var p service.Ports = balancerPorts{b}
	if err := p.Listen("s/web/8080", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Addr("s/web/8080"); !ok {
		t.Fatal("no address after Listen")
	}
	want := []service.Backend{{ID: "b", Addr: "127.0.0.1:2"}, {ID: "a", Addr: "127.0.0.1:1"}}
	if err := p.SetBackends("s/web/8080", want); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stats("s/web/8080")
	var got []service.Backend
	for _, be := range st.Backends {
		if be.InRotation {
			got = append(got, service.Backend{ID: be.ID, Addr: be.Addr})
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rotation %+v, want %+v", got, want)
	}
	if err := p.SetBackends("s/web/8080", nil); err != nil {
		t.Fatal(err)
	}
	st, _ = b.Stats("s/web/8080")
	for _, be := range st.Backends {
		if be.InRotation {
			t.Fatalf("%s still in rotation after an empty SetBackends", be.ID)
		}
	}
	if err := p.Close("s/web/8080"); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Addr("s/web/8080"); ok {
		t.Fatal("still listening after Close")
	}
}
