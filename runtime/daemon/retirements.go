package daemon

import (
	"github.com/engenho/engenho/actors/service"
	"github.com/engenho/engenho/runtime/journal"
)

// journalRetirements is the journal as the service actors' record of
// pending retirements (SVC-33).
type journalRetirements struct{ j *journal.Journal }

var _ service.RetirementStore = journalRetirements{}

func (s journalRetirements) PendingRetirements(stack, svc string) ([]service.Retirement, error) {
	all, err := s.j.PendingRetirements(stack, svc)
	if err != nil {
		return nil, err
	}
	out := make([]service.Retirement, 0, len(all))
	for _, p := range all {
		out = append(out, service.Retirement{ID: p.ID, Slot: p.Slot, Instance: p.Instance, Reason: p.Reason, Since: p.Since})
	}
	return out, nil
}

func (s journalRetirements) MarkRetirementPending(stack, svc string, r service.Retirement) error {
	return s.j.MarkRetirementPending(journal.PendingRetirement{Stack: stack, Service: svc, ID: r.ID, Slot: r.Slot,
		Instance: r.Instance, Reason: r.Reason, Since: r.Since})
}

func (s journalRetirements) ClearRetirementPending(stack, svc, id string) error {
	return s.j.ClearRetirementPending(stack, svc, id)
}
