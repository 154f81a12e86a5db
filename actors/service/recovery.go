package service

import (
	"fmt"
	"sort"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Fail-closed recovery, the service's share (issue 17): SVC-30 withdraw
// before touch and publication inhibition, SVC-33 durable retirement
// inhibitions. The replica's share (verify before publishing, refusing
// unsafe states, asking for the withdrawal) is in actors/replica.

// Retirement is an instance whose retirement failed (a driver error on
// stop or delete) and is retried; its slot publishes nothing new until it
// is gone (SVC-33). The journal keeps it across daemon restarts.
type Retirement struct {
	ID       string
	Slot     int
	Instance string
	Reason   string
	Since    time.Time
}

// RetirementStore is the journal's record of pending retirements
// (SVC-33). Writes are synced before they return.
type RetirementStore interface {
	PendingRetirements(stack, service string) ([]Retirement, error)
	MarkRetirementPending(stack, service string, r Retirement) error
	ClearRetirementPending(stack, service, id string) error
}

// RotationFailed: the balancer refused a rotation change (a withdrawal
// among it): the service becomes publication-inhibited (SVC-30).
type RotationFailed struct{ Reason string }

// RotationApplied: every port's rotation was applied (SVC-30).
type RotationApplied struct{}

// PortsListening: which published ports cannot listen, and why (Down);
// "" when every one listens (SVC-22). HandOver: each is held by another
// service of the stack that will let it go (the service waits, not fails).
type PortsListening struct {
	Down     string
	HandOver bool
}

// RecallRetirements gives the pending retirements the journal holds
// (SVC-33), before the instances are adopted.
type RecallRetirements struct{ Pending []Retirement }

func (RotationFailed) serviceEvent()    {}
func (RotationApplied) serviceEvent()   {}
func (RecallRetirements) serviceEvent() {}
func (PortsListening) serviceEvent()    {}

// Withdraw applies the rotation without replica ID (it asked, before its
// instance is touched) and answers it with messages.ReplicaWithdrawn
// (SVC-30).
type Withdraw struct {
	step.Is
	ID string
}

// RecordRetirement writes a pending retirement to the journal (SVC-33).
type RecordRetirement struct {
	step.Is
	Retirement Retirement
}

// ClearRetirement drops a pending retirement: the instance is gone
// (SVC-33).
type ClearRetirement struct {
	step.Is
	ID string
}

// stepRecovery handles the recovery events; ok is false for any other.
func stepRecovery(s State, e Event, now time.Time) (State, []step.Effect, bool) {
	switch e := e.(type) {
	case RotationFailed:
		first := s.Inhibited == ""
		s.Inhibited = e.Reason
		if !first {
			return s, nil, true
		}
		s.InhibitedSince = now
		return s, []step.Effect{step.Emit{Kind: messages.KindPublicationInhibited, Level: messages.LevelError,
			Message: "publication inhibited: a withdrawal could not be applied: " + e.Reason}}, true
	case RotationApplied:
		if s.Inhibited == "" {
			return s, nil, true
		}
		s.Inhibited, s.InhibitedSince = "", time.Time{}
		return s, []step.Effect{step.Emit{Kind: messages.KindPublicationRestored, Level: messages.LevelInfo,
			Message: "a withdrawal succeeded; publishing again"}, Replan{}}, true
	case PortsListening:
		s.PortsDown, s.PortsHandOver = e.Down, e.HandOver
		return s, nil, true
	case RecallRetirements:
		for _, r := range e.Pending {
			s.Retirements = putRetirement(s.Retirements, r)
		}
		return s, nil, true
	}
	return s, nil, false
}

// reportRecovery is the recovery share of a replica's report: a replica
// asking to be withdrawn is (SVC-30); a failed retirement is recorded
// once (SVC-33).
func reportRecovery(s State, m messages.ReplicaStatus, now time.Time) (State, []step.Effect) {
	var fx []step.Effect
	if m.Withdraw {
		fx = append(fx, Withdraw{ID: m.ID})
	}
	if _, known := s.Retirements[m.ID]; m.RetireError != "" && !known {
		r := Retirement{ID: m.ID, Slot: m.Slot, Instance: m.Instance, Reason: m.RetireError, Since: now}
		s.Retirements = putRetirement(s.Retirements, r)
		fx = append(fx, RecordRetirement{Retirement: r}, step.Emit{Kind: messages.KindRetirementPending, Level: messages.LevelError,
			Message: fmt.Sprintf("instance %s could not be retired (%s); retried, and slot %d publishes nothing new until it is gone", m.Instance, m.RetireError, m.Slot)})
	}
	return s, fx
}

// exitedRecovery: a replica whose retirement was pending ended after
// deleting its instance (final): the record goes (SVC-33). An actor that
// ended any other way may have left the instance: the record stays.
func exitedRecovery(s State, e Exited) (State, []step.Effect) {
	if _, ok := s.Retirements[e.ID]; !ok || !e.Final {
		return s, nil
	}
	delete(s.Retirements, e.ID)
	return s, []step.Effect{ClearRetirement{ID: e.ID}}
}

// adoptedRecovery: a pending retirement whose instance the driver no
// longer lists is done (SVC-33).
func adoptedRecovery(s State) (State, []step.Effect) {
	var fx []step.Effect
	for _, id := range retirementIDs(s) {
		if _, ok := s.Replicas[id]; !ok {
			delete(s.Retirements, id)
			fx = append(fx, ClearRetirement{ID: id})
		}
	}
	return s, fx
}

func retirementIDs(s State) []string {
	ids := make([]string, 0, len(s.Retirements))
	for id := range s.Retirements {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Publishable is which serving replicas may be in the balancer's
// rotation, given those it last applied: all of them, except that while
// the service is publication-inhibited (SVC-30), and in a slot whose
// retirement is pending (SVC-33), nothing is published that was not
// already.
func Publishable(s State, applied map[string]bool) map[string]bool {
	blocked := map[int]bool{}
	for _, r := range s.Retirements {
		blocked[r.Slot] = true
	}
	out := map[string]bool{}
	for _, r := range s.Replicas {
		if r.serving() && (applied[r.ID] || s.Inhibited == "" && !blocked[r.Slot]) {
			out[r.ID] = true
		}
	}
	return out
}

// RetirementsPending lists the instances whose retirement is pending, for
// status (SVC-33).
func RetirementsPending(s State) []string {
	var out []string
	for _, id := range retirementIDs(s) {
		r := s.Retirements[id]
		out = append(out, fmt.Sprintf("%s (slot %d): %s", r.Instance, r.Slot, r.Reason))
	}
	return out
}

func putRetirement(m map[string]Retirement, r Retirement) map[string]Retirement {
	if m == nil {
		m = map[string]Retirement{}
	}
	m[r.ID] = r
	return m
}

func copyRetirements(m map[string]Retirement) map[string]Retirement {
	if m == nil {
		return nil
	}
	out := make(map[string]Retirement, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
