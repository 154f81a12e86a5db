package stack

import (
	"fmt"
	"strings"

	"github.com/engenho/engenho/messages"
)

// Phases of a stack that are announced (SVC-26). A stack on its way
// (starting, updating, waiting) has no phase to announce.
const (
	PhaseServing = "serving"
	PhaseFailed  = "failed"
)

// failedStates are the service states that make a stack failed: the
// service cannot get where it should by itself for now (SVC-19).
var failedStates = map[messages.ServiceState]bool{
	messages.ServiceFailing: true,
	messages.ServicePaused:  true,
	messages.ServiceBackoff: true,
}

// phaseOnly is PhaseOf's phase alone, without its message.
func phaseOnly(order []string, hosts map[string]bool, sums map[string]messages.ServiceSummary) string {
	total, serving := 0, 0
	for _, name := range order {
		if hosts[name] {
			continue
		}
		total++
		s, ok := sums[name]
		switch {
		case !ok:
		case failedStates[s.State]:
			return PhaseFailed
		case s.State == messages.ServiceConverged:
			serving++
		}
	}
	if total > 0 && serving == total {
		return PhaseServing
	}
	return ""
}

// PhaseOf is the stack's phase from its services' summaries, in order
// (hosts, which the activator runs, are left out), with a message that
// names the services behind it: failed when any service fails, backs off
// or is paused; serving when every one is converged; else "" (on its
// way). A service with no summary yet is on its way.
func PhaseOf(order []string, hosts map[string]bool, sums map[string]messages.ServiceSummary) (phase, msg string) {
	var failed, serving []string
	total := 0
	for _, name := range order {
		if hosts[name] {
			continue
		}
		total++
		s, ok := sums[name]
		switch {
		case !ok:
		case failedStates[s.State]:
			failed = append(failed, fmt.Sprintf("%s %s (%d/%d healthy)", name, s.State, s.Healthy, s.Desired))
		case s.State == messages.ServiceConverged:
			serving = append(serving, fmt.Sprintf("%s %d/%d", name, s.Healthy, s.Desired))
		}
	}
	switch {
	case len(failed) > 0:
		return PhaseFailed, "failed: " + strings.Join(failed, ", ")
	case total > 0 && len(serving) == total:
		return PhaseServing, "serving: " + strings.Join(serving, ", ")
	}
	return "", ""
}
