package status

import (
	"testing"

	"github.com/engenho/engenho/messages"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// SVC-5: Changed is closed by the next change of a service or replica
// snapshot, and not before, so apply --wait never polls and misses no
// change taken after it asked.
func TestChangedSignalsTheNextChange(t *testing.T) {
	b := New()
	changes := []func(){
		func() { b.PutService(messages.ServiceStatus{Stack: "web", Service: "api"}) },
		func() { b.PutReplica(messages.ReplicaStatus{Stack: "web", Service: "api", ID: "r1"}) },
		func() { b.DeleteReplica("web", "api", "r1") },
		func() { b.DeleteService("web", "api") },
	}
	for i, change := range changes {
		c := b.Changed()
		if closed(c) {
			t.Fatalf("change %d: closed before anything changed", i)
		}
		if c2 := b.Changed(); c2 != c {
			t.Fatalf("change %d: two waiters got different channels", i)
		}
		change()
		if !closed(c) {
			t.Fatalf("change %d did not signal", i)
		}
	}
	b.PutStack(messages.StackStatus{Stack: "web"})
	if _, ok := b.Service("web", "api"); ok {
		t.Fatal("deleted service still there")
	}
}
