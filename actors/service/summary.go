package service

import (
	"fmt"
	"time"

	"github.com/engenho/engenho/messages"
)

// Summary is the service's state with its message and counts (SVC-19).
type Summary struct {
	State   messages.ServiceState
	Message string
	Running int
	Healthy int
}

// Summarize derives the service state from what the planner knows.
// waitingFor names unmet dependencies.
func Summarize(s State, waitingFor string) Summary {
	var sum Summary
	current, extra := 0, 0
	var failing string
	for _, r := range sorted(s.Replicas) {
		if r.Retiring || r.Leaving {
			extra++
			continue
		}
		if r.Phase == "probing" || r.Phase == "serving" || r.Phase == "unhealthy" {
			sum.Running++
		}
		if r.InRotation {
			sum.Healthy++
			if r.Revision == s.Target.Revision && r.Slot <= s.Target.Replicas {
				current++
			}
		}
		if r.Slot > s.Target.Replicas {
			extra++
		}
		if failing == "" {
			switch {
			case r.Phase == "failed":
				failing = fmt.Sprintf("slot %d: restart limit reached: %s", r.Slot, r.LastError)
			case r.Failures > 0 && !r.InRotation:
				failing = fmt.Sprintf("slot %d: %d failures: %s", r.Slot, r.Failures, r.LastError)
			}
		}
	}
	switch {
	case !s.Adopted:
		sum.State, sum.Message = messages.ServiceStarting, "adopting instances"
	case s.Stopped:
		sum.State, sum.Message = messages.ServiceConverged, "stopped by the operator (engenho service start lifts it)"
	case !s.DepsMet:
		sum.State, sum.Message = messages.ServiceWaiting, "waiting for "+waitingFor
	case s.Rollout != nil && s.Rollout.Paused:
		sum.State, sum.Message = messages.ServicePaused, s.Rollout.Message
	case s.Rollout != nil:
		sum.State = messages.ServiceUpdating
		sum.Message = fmt.Sprintf("revision %s: %d of %d slots done", s.Rollout.Target.Revision, len(s.Rollout.Done), s.Target.Replicas)
	case failing != "":
		sum.State, sum.Message = messages.ServiceFailing, failing
	case current == s.Target.Replicas && extra == 0:
		sum.State = messages.ServiceConverged
	default:
		sum.State = messages.ServiceStarting
		sum.Message = fmt.Sprintf("%d of %d replicas serving", current, s.Target.Replicas)
	}
	return sum
}

// Alarm tracks the service-level health events (SVC-20).
type Alarm struct {
	WasHealthy bool
	LostAt     time.Time
	Raised     bool
}

// Watch raises health.unhealthy once a service that was healthy has had no
// healthy replica for `after` (not during a rollout), and health.recovered
// when one is back. It returns when to look again, if it needs to.
func (a Alarm) Watch(healthy int, rolling bool, now time.Time, after time.Duration) (Alarm, []Action) {
	if healthy > 0 {
		var acts []Action
		if a.Raised {
			acts = append(acts, Action{Kind: Emit, Event: messages.KindHealthRecovered, Level: messages.LevelInfo,
				Message: fmt.Sprintf("%d healthy replica(s) again", healthy)})
		}
		return Alarm{WasHealthy: true}, acts
	}
	if !a.WasHealthy || a.Raised {
		return a, nil
	}
	if a.LostAt.IsZero() {
		a.LostAt = now
	}
	if rolling {
		return a, nil
	}
	if now.Sub(a.LostAt) < after {
		return a, []Action{{Kind: Wake, At: a.LostAt.Add(after)}}
	}
	a.Raised = true
	return a, []Action{{Kind: Emit, Event: messages.KindHealthUnhealthy, Level: messages.LevelError,
		Message: fmt.Sprintf("no healthy replica for %s", now.Sub(a.LostAt).Round(time.Second))}}
}
