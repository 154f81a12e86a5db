package supervise

import (
	"testing"

	"github.com/engenho/engenho/messages"
)

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
