package stack

import (
	"testing"

	"github.com/engenho/engenho/messages"
)

// SVC-26: the stack's announced phase: failed when any service fails,
// backs off or is paused; serving when all converged; else none. Hosts
// are the activator's and do not count.
func TestSVC26PhaseOf(t *testing.T) {
	sum := func(st messages.ServiceState) messages.ServiceSummary {
		return messages.ServiceSummary{State: st, Healthy: 1, Desired: 1}
	}
	order := []string{"api", "db", "notes"}
	hosts := map[string]bool{"notes": true}
	cases := []struct {
		name  string
		sums  map[string]messages.ServiceSummary
		phase string
		msg   string
	}{
		{"all converged", map[string]messages.ServiceSummary{"api": sum(messages.ServiceConverged), "db": sum(messages.ServiceConverged)},
			PhaseServing, "serving: api 1/1, db 1/1"},
		{"one failing", map[string]messages.ServiceSummary{"api": sum(messages.ServiceFailing), "db": sum(messages.ServiceConverged)},
			PhaseFailed, "failed: api failing (1/1 healthy)"},
		{"one paused, one backing off", map[string]messages.ServiceSummary{"api": sum(messages.ServicePaused), "db": sum(messages.ServiceBackoff)},
			PhaseFailed, "failed: api paused (1/1 healthy), db backoff (1/1 healthy)"},
		{"failed beats updating", map[string]messages.ServiceSummary{"api": sum(messages.ServiceUpdating), "db": sum(messages.ServiceFailing)},
			PhaseFailed, "failed: db failing (1/1 healthy)"},
		{"one updating", map[string]messages.ServiceSummary{"api": sum(messages.ServiceUpdating), "db": sum(messages.ServiceConverged)}, "", ""},
		{"one starting", map[string]messages.ServiceSummary{"api": sum(messages.ServiceStarting), "db": sum(messages.ServiceConverged)}, "", ""},
		{"one waiting", map[string]messages.ServiceSummary{"api": sum(messages.ServiceWaiting), "db": sum(messages.ServiceConverged)}, "", ""},
		{"a service not heard of yet", map[string]messages.ServiceSummary{"api": sum(messages.ServiceConverged)}, "", ""},
	}
	for _, c := range cases {
		phase, msg := PhaseOf(order, hosts, c.sums)
		if phase != c.phase || msg != c.msg {
			t.Errorf("%s: %q %q, want %q %q", c.name, phase, msg, c.phase, c.msg)
		}
		// PERF-3: the actor asks for the phase alone at every summary.
		if p := phaseOnly(order, hosts, c.sums); p != c.phase {
			t.Errorf("%s: phase alone %q, want %q", c.name, p, c.phase)
		}
	}
	if phase, _ := PhaseOf([]string{"notes"}, hosts, nil); phase != "" {
		t.Errorf("a stack of hosts only has phase %q, want none", phase)
	}
}
