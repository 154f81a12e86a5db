package service

import (
	"errors"
	"fmt"
	"runtime"
	"sort"

	"github.com/engenho/engenho/messages"
)

// The shell's share of fail-closed recovery (recovery.go).

// recallRetirements reads the pending retirements from the journal
// before the instances are adopted (SVC-33).
func (a *Actor) recallRetirements() {
	if a.env.Retirements == nil {
		return
	}
	pending, err := a.env.Retirements.PendingRetirements(a.stack, a.name)
	if err != nil {
		a.h.Log().Error().Err(err).Msg("reading pending retirements")
		return
	}
	if len(pending) > 0 {
		a.feed(RecallRetirements{Pending: pending})
	}
}

// withdraw applies the rotation without replica id and answers it
// (SVC-30): OK when the balancer took it.
func (a *Actor) withdraw(id string) {
	ok := a.updateRotation()
	if pid := a.kids.PID(childName(a.s.Replicas[id])); pid != nil {
		a.h.Engine().Send(pid, messages.ReplicaWithdrawn{OK: ok})
		// The replica waits for this answer to restart its instance
		// (PERF-1): let it run now rather than after the rest of this
		// pass (the runtime runs the goroutine readied last next).
		runtime.Gosched()
	}
}

func (a *Actor) recordRetirement(r Retirement) {
	if a.env.Retirements == nil {
		return
	}
	if err := a.env.Retirements.MarkRetirementPending(a.stack, a.name, r); err != nil {
		a.h.Log().Error().Err(err).Str("instance", r.Instance).Msg("recording a pending retirement")
	}
}

func (a *Actor) clearRetirement(id string) {
	if a.env.Retirements == nil {
		return
	}
	if err := a.env.Retirements.ClearRetirementPending(a.stack, a.name, id); err != nil {
		a.h.Log().Error().Err(err).Str("id", id).Msg("clearing a pending retirement")
	}
}

// rotationError is the balancer's refusals of one rotation update.
type rotationError struct{ errs []error }

func (e rotationError) Error() string { return errors.Join(e.errs...).Error() }

// appliedIDs is every replica the balancer was last given, over all
// ports.
func (a *Actor) appliedIDs() map[string]bool {
	out := map[string]bool{}
	for _, ids := range a.applied {
		for id := range ids {
			out[id] = true
		}
	}
	return out
}

// rotationDone tells the core how the rotation update went (SVC-30).
func (a *Actor) rotationDone(errs []error) bool {
	if len(errs) > 0 {
		a.feed(RotationFailed{Reason: rotationError{errs}.Error()})
		return false
	}
	if a.s.Inhibited != "" {
		a.feed(RotationApplied{})
	}
	return true
}

// recoveryStatus adds what fail-closed recovery holds to the status
// (SVC-30, SVC-32, SVC-33).
func (a *Actor) recoveryStatus(st *messages.ServiceStatus) {
	st.Inhibited = a.s.Inhibited
	st.RetirementPending = RetirementsPending(a.s)
	for _, v := range a.views {
		if v.Refused != "" {
			st.Refused = append(st.Refused, v.Refused)
		}
	}
	sort.Strings(st.Refused)
	if st.Inhibited != "" {
		st.Message = fmt.Sprintf("publication inhibited since %s: %s", a.s.InhibitedSince.UTC().Format("15:04:05"), st.Inhibited)
	} else if len(st.Refused) > 0 && st.Message == "" {
		st.Message = st.Refused[0]
	}
}

// intersect is the IDs in both a and b.
func intersect(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for id := range a {
		if b[id] {
			out[id] = true
		}
	}
	return out
}
