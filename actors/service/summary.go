package service

import (
	"fmt"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
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

// slotView is how one slot is doing: its condition, the message about it
// and the reason of its last failure.
type slotView struct {
	cond   condition
	msg    string
	reason string
}

// conditionOf classifies r at now and says why when it is not fine: the
// reason first, since the status table cuts long messages. The health of
// an instance that is not running is the last run's, so it counts only
// while it runs.
func conditionOf(r Replica, t Target, now time.Time) slotView {
	reason := orUnknown(r.LastError)
	switch {
	case r.Phase == "failed":
		return slotView{slotFailing, reason, reason}
	case r.Health == "unhealthy" && running(r):
		why := "unhealthy: " + orUnknown(r.Probe)
		return slotView{slotFailing, why, why}
	case r.Failures == 0:
		return slotView{}
	}
	why := fmt.Sprintf("%s (%s)", reason, failures(r.Failures))
	switch {
	case !running(r) && r.NextAttempt.After(now):
		return slotView{slotBackoff, why, reason}
	case !running(r):
		return slotView{slotFailing, why + "; restarting", reason}
	case crashLooping(r, t):
		return slotView{slotFailing, why + "; up again, not yet stable", reason}
	case !r.InRotation:
		return slotView{} // restarted and probing: counted as not serving yet
	case now.Before(r.ServingSince.Add(t.Update.Monitor)):
		return slotView{slotSettling, why + "; serving again, settling", ""}
	}
	return slotView{}
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
	slotView
	r      Replica // the replica in that slot
	next   time.Time
	others int // further slots that back off or fail
}

// see takes the replicas in any order: the worst condition wins, and of
// equals the first by slot and ID; others counts every slot that backs
// off or fails but the one chosen.
func (w *worst) see(r Replica, v slotView) {
	if v.cond >= slotBackoff && w.cond >= slotBackoff {
		w.others++
	}
	if v.cond < w.cond || v.cond == w.cond && (v.cond == slotFine || !replicaBefore(r, w.r)) {
		return
	}
	w.slotView, w.r, w.next = v, r, time.Time{}
	if v.cond == slotBackoff {
		w.next = r.NextAttempt
	}
}

func (w worst) message() string {
	msg := ""
	if w.cond != slotFine {
		msg = fmt.Sprintf("slot %d: %s", w.r.Slot, w.msg)
	}
	if w.others > 0 {
		return fmt.Sprintf("%s (and %d more slot(s) failing)", msg, w.others)
	}
	return msg
}

// Summarize derives the service state from what the planner knows (SVC-19):
// converged only when every slot serves the current revision and none
// fails, backs off or is still settling after a failure. waitingFor names
// unmet dependencies.
func Summarize(s State, waitingFor string, now time.Time) Summary {
	var sum Summary
	current, extra := 0, 0
	var w worst
	for _, r := range s.Replicas { // in any order: nothing here sorts (PERF-3)
		if r.Retiring || r.Leaving || r.Slot > s.Target.Replicas {
			extra++
			continue
		}
		v := conditionOf(r, s.Target, now)
		if running(r) {
			sum.Running++
		}
		if r.InRotation {
			sum.Healthy++
			if v.cond != slotFailing {
				sum.Steady++
			}
			if r.Revision == s.Target.Revision && v.cond == slotFine {
				current++
			}
		}
		if v.cond == slotSettling {
			sum.Recheck = earliest(sum.Recheck, r.ServingSince.Add(s.Target.Update.Monitor))
		}
		w.see(r, v)
	}
	if w.cond >= slotBackoff && !s.Stopped {
		sum.Reason, sum.NextAttempt = w.reason, w.next
	}
	sum.State, sum.Message = stateOf(s, w, current, extra, waitingFor)
	return sum
}

// stateOf picks the service state: what the planner is doing first, then
// the worst slot; converged only when every slot serves the current
// revision (current of them do, and none fails) and nothing else is left
// (extra).
func stateOf(s State, w worst, current, extra int, waitingFor string) (messages.ServiceState, string) {
	switch {
	case !s.Adopted:
		return messages.ServiceStarting, "adopting instances"
	case s.Stopped:
		return messages.ServiceConverged, "stopped by the operator (engenho service start lifts it)"
	case !s.DepsMet:
		return messages.ServiceWaiting, "waiting for " + waitingFor
	case s.Rollout != nil && s.Rollout.Paused:
		return messages.ServicePaused, s.Rollout.Message
	case s.Rollout != nil:
		msg := fmt.Sprintf("revision %s: %d of %d slots done", s.Rollout.Target.Revision, len(s.Rollout.Done), s.Target.Replicas)
		if w.cond >= slotBackoff {
			msg += "; " + w.message()
		}
		return messages.ServiceUpdating, msg
	case w.cond == slotFailing:
		return messages.ServiceFailing, w.message()
	case w.cond == slotBackoff:
		return messages.ServiceBackoff, w.message()
	case s.PortsDown != "" && s.PortsHandOver:
		return messages.ServiceWaiting, s.PortsDown
	case s.PortsDown != "":
		return messages.ServiceFailing, s.PortsDown
	case current == s.Target.Replicas && extra == 0:
		return messages.ServiceConverged, ""
	case w.cond == slotSettling:
		return messages.ServiceStarting, w.message()
	}
	return messages.ServiceStarting, fmt.Sprintf("%d of %d replicas serving", current, s.Target.Replicas)
}

// Alarm tracks the service-level health events (SVC-20).
type Alarm struct {
	WasHealthy bool
	LostAt     time.Time
	Raised     bool
}

// watch raises health.unhealthy once a service that was healthy has had no
// healthy replica for `after` (not during a rollout), and health.recovered
// when one is back. It asks for a wake when it needs to look again.
func (a Alarm) watch(healthy int, rolling bool, now time.Time, after time.Duration) (Alarm, []step.Effect) {
	if healthy > 0 {
		var fx []step.Effect
		if a.Raised {
			fx = append(fx, step.Emit{Kind: messages.KindHealthRecovered, Level: messages.LevelInfo,
				Message: fmt.Sprintf("%d healthy replica(s) again", healthy)})
		}
		return Alarm{WasHealthy: true}, fx
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
		return a, []step.Effect{wake{At: a.LostAt.Add(after)}}
	}
	a.Raised = true
	return a, []step.Effect{step.Emit{Kind: messages.KindHealthUnhealthy, Level: messages.LevelError,
		Message: fmt.Sprintf("no healthy replica for %s", now.Sub(a.LostAt).Round(time.Second))}}
}
