package supervise

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
	b := NewBoard()
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

// SVC-19: a stack is converged only when all its services are, on the
// board as read now: the stack actor's own snapshot may lag a service's
// change by a message, and status never shows them disagreeing that way.
func TestSVC19StackConvergedOnlyWithItsServices(t *testing.T) {
	b := NewBoard()
	b.PutStack(messages.StackStatus{Stack: "web", Converged: true, Services: []string{"api", "worker", "notes"}})
	b.PutService(messages.ServiceStatus{Stack: "web", Service: "api", State: messages.ServiceConverged})
	b.PutService(messages.ServiceStatus{Stack: "web", Service: "worker", State: messages.ServiceConverged})
	// notes is a hibernating host: not on the services board.
	if st := b.Stacks(); len(st) != 1 || !st[0].Converged {
		t.Fatalf("stacks %+v", st)
	}
	for _, state := range []messages.ServiceState{messages.ServiceBackoff, messages.ServiceFailing, messages.ServiceStarting, ""} {
		b.PutService(messages.ServiceStatus{Stack: "web", Service: "worker", State: state})
		if st := b.Stacks(); st[0].Converged {
			t.Fatalf("stack converged beside a service in state %q", state)
		}
	}
	b.PutStack(messages.StackStatus{Stack: "web", Converged: false, Services: []string{"api"}})
	if st := b.Stacks(); st[0].Converged {
		t.Fatal("the board made a stack converged that its actor did not")
	}
}

// PERF-3: Tally counts a stack's services (or every stack's), those
// converged, and their desired, running and healthy replicas from the
// services' own snapshots, without copying a replica.
func TestBoardTally(t *testing.T) {
	b := NewBoard()
	b.PutService(messages.ServiceStatus{Stack: "web", Service: "api", State: messages.ServiceConverged, Desired: 3, Running: 3, Healthy: 2})
	b.PutService(messages.ServiceStatus{Stack: "web", Service: "worker", State: messages.ServiceStarting, Desired: 2, Running: 1})
	b.PutService(messages.ServiceStatus{Stack: "db", Service: "pg", State: messages.ServiceConverged, Desired: 1, Running: 1, Healthy: 1})
	b.PutReplica(messages.ReplicaStatus{Stack: "web", Service: "cache", ID: "r1"}) // no service snapshot yet: not counted
	if got, want := b.Tally("web"), (Tally{Services: 2, Converged: 1, Desired: 5, Running: 4, Healthy: 2}); got != want {
		t.Errorf("web: %+v, want %+v", got, want)
	}
	if got, want := b.Tally(""), (Tally{Services: 3, Converged: 2, Desired: 6, Running: 5, Healthy: 3}); got != want {
		t.Errorf("all: %+v, want %+v", got, want)
	}
	b.DeleteService("web", "api")
	if got, want := b.Tally("web"), (Tally{Services: 1, Desired: 2, Running: 1}); got != want {
		t.Errorf("web after a removal: %+v, want %+v", got, want)
	}
}
