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
	// Steady counts the healthy replicas that are not crash-looping: what
	// the health alarm watches (SVC-20).
	Steady int
	// Reason is why the slot the state is about last failed: an exit code
	// or signal, the probe's output, a driver error. Empty when nothing
	// fails.
	Reason string
	// NextAttempt is when that slot's ladder lets it start again, while it
	// backs off (SUP-10).
	NextAttempt time.Time
	// Recheck is when the summary changes with no report coming: a
	// restarted replica's settling window ends.
	Recheck time.Time
}

// condition is how the replica holding a slot is doing, from the best to
// the worst.
type condition int

const (
	slotFine condition = iota
	// slotSettling: in rotation again after a failure, for less than the
	// monitor window; it does not count as converged yet.
	slotSettling
	// slotBackoff: down, and its ladder puts the next attempt later.
	slotBackoff
	// slotFailing: down and restarting, unhealthy, left down by its
	// restart policy, or running again in a crash loop.
	slotFailing
)

func running(r Replica) bool {
	return r.Phase == "probing" || r.Phase == "serving" || r.Phase == "unhealthy"
}

// crashLooping: the slot has used up the retries its ladder makes at once
// and has not been stable since (its ledger is dropped only after a whole
// stable window, SUP-11). Running again does not make it converged.
func crashLooping(r Replica, t Target) bool {
	return r.Failures > 0 && r.Failures >= t.Immediate
}

// conditionOf classifies r at now and says why when it is not fine: the
// reason first, since the status table cuts long messages.
func conditionOf(r Replica, t Target, now time.Time) (condition, string) {
	switch {
	case r.Phase == "failed":
		return slotFailing, orUnknown(r.LastError)
	case r.Health == "unhealthy":
		return slotFailing, "unhealthy: " + orUnknown(r.Probe)
	case r.Failures == 0:
		return slotFine, ""
	}
	why := fmt.Sprintf("%s (%s)", orUnknown(r.LastError), failures(r.Failures))
	switch {
	case !running(r) && r.NextAttempt.After(now):
		return slotBackoff, why
	case !running(r):
		return slotFailing, why + "; restarting"
	case crashLooping(r, t):
		return slotFailing, why + "; up again, not yet stable"
	case !r.InRotation:
		return slotFine, "" // restarted and probing: counted as not serving yet
	case now.Before(r.ServingSince.Add(t.Update.Monitor)):
		return slotSettling, why + "; serving again, settling"
	}
	return slotFine, ""
}

func failures(n int) string {
	if n == 1 {
		return "1 failure"
	}
	return fmt.Sprintf("%d failures", n)
}

// worst is the slot the service's state is about: the lowest slot in the
// worst condition.
type worst struct {
	cond   condition
	msg    string
	reason string
	next   time.Time
	others int // further slots that back off or fail
}

func (w *worst) see(r Replica, c condition, msg string) {
	if c >= slotBackoff && w.cond >= slotBackoff {
		w.others++
	}
	if c <= w.cond {
		return
	}
	w.cond, w.msg, w.reason, w.next = c, fmt.Sprintf("slot %d: %s", r.Slot, msg), "", time.Time{}
	if c >= slotBackoff {
		w.reason = orUnknown(r.LastError)
		if r.Health == "unhealthy" && r.Phase != "failed" {
			w.reason = "unhealthy: " + orUnknown(r.Probe)
		}
	}
	if c == slotBackoff {
		w.next = r.NextAttempt
	}
}

func (w worst) message() string {
	if w.others > 0 {
		return fmt.Sprintf("%s (and %d more slot(s) failing)", w.msg, w.others)
	}
	return w.msg
}

// Summarize derives the service state from what the planner knows (SVC-19):
// converged only when every slot serves the current revision and none
// fails, backs off or is still settling after a failure. waitingFor names
// unmet dependencies.
func Summarize(s State, waitingFor string, now time.Time) Summary {
	var sum Summary
	current, extra := 0, 0
	var w worst
	for _, r := range sorted(s.Replicas) {
		if r.Retiring || r.Leaving || r.Slot > s.Target.Replicas {
			extra++
			continue
		}
		c, msg := conditionOf(r, s.Target, now)
		if running(r) {
			sum.Running++
		}
		if r.InRotation {
			sum.Healthy++
			if c != slotFailing {
				sum.Steady++
			}
			if r.Revision == s.Target.Revision && c == slotFine {
				current++
			}
		}
		if c == slotSettling {
			sum.Recheck = earliest(sum.Recheck, r.ServingSince.Add(s.Target.Update.Monitor))
		}
		w.see(r, c, msg)
	}
	if w.cond >= slotBackoff {
		sum.Reason, sum.NextAttempt = w.reason, w.next
	}
	switch {
	case !s.Adopted:
		sum.State, sum.Message = messages.ServiceStarting, "adopting instances"
	case s.Stopped:
		sum.State, sum.Message = messages.ServiceConverged, "stopped by the operator (engenho service start lifts it)"
		sum.Reason, sum.NextAttempt = "", time.Time{}
	case !s.DepsMet:
		sum.State, sum.Message = messages.ServiceWaiting, "waiting for "+waitingFor
	case s.Rollout != nil && s.Rollout.Paused:
		sum.State, sum.Message = messages.ServicePaused, s.Rollout.Message
	case s.Rollout != nil:
		sum.State = messages.ServiceUpdating
		sum.Message = fmt.Sprintf("revision %s: %d of %d slots done", s.Rollout.Target.Revision, len(s.Rollout.Done), s.Target.Replicas)
		if w.cond >= slotBackoff {
			sum.Message += "; " + w.message()
		}
	case w.cond == slotFailing:
		sum.State, sum.Message = messages.ServiceFailing, w.message()
	case w.cond == slotBackoff:
		sum.State, sum.Message = messages.ServiceBackoff, w.message()
	case current == s.Target.Replicas && extra == 0:
		sum.State = messages.ServiceConverged
	case w.cond == slotSettling:
		sum.State, sum.Message = messages.ServiceStarting, w.message()
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
