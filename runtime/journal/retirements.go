package journal

import (
	"fmt"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
)

// PrefixRetirement holds the retirements that failed and are retried
// (SVC-33): v1/retirement/STACK/SERVICE/ID.
const PrefixRetirement = keyVersion + "retirement/"

// PendingRetirement is an instance that must be retired but could not be
// (a driver error on stop or delete), so it is retried on every pass and
// across daemon restarts, and its slot publishes nothing new until it is
// gone (SVC-33).
type PendingRetirement struct {
	Stack    string    `json:"stack"`
	Service  string    `json:"service"`
	ID       string    `json:"id"`
	Slot     int       `json:"slot"`
	Instance string    `json:"instance"`
	Reason   string    `json:"reason,omitempty"`
	Since    time.Time `json:"since"`
}

func retirementPrefix(stack, service string) string {
	return PrefixRetirement + stack + "/" + service + "/"
}

func checkRetirement(stack, service, id string) error {
	if err := checkService(stack, service); err != nil {
		return err
	}
	if !stackfile.ValidInstanceID(id) {
		return invalid("instance id", "%q must be 1-16 characters of [a-z0-9]", id)
	}
	return nil
}

// MarkRetirementPending records p; marking it again keeps the first
// Since. Since is stamped when zero. Synced.
func (j *Journal) MarkRetirementPending(p PendingRetirement) error {
	if err := checkRetirement(p.Stack, p.Service, p.ID); err != nil {
		return fmt.Errorf("retirement %s/%s: %w", p.Stack, p.Service, err)
	}
	if p.Since.IsZero() {
		p.Since = j.opts.Clock.Now()
	}
	key := []byte(retirementPrefix(p.Stack, p.Service) + p.ID)
	err := j.update(func(txn *writeTxn) error {
		var old PendingRetirement
		if found, err := getJSON(txn, key, &old); err != nil {
			return err
		} else if found && !old.Since.IsZero() {
			p.Since = old.Since
		}
		return setJSON(txn, key, p)
	})
	if err != nil {
		return fmt.Errorf("journal: retirement %s/%s %s: %w", p.Stack, p.Service, p.ID, err)
	}
	return nil
}

// ClearRetirementPending drops the record: the instance is gone. Clearing
// one that is not there is no error. Synced.
func (j *Journal) ClearRetirementPending(stack, service, id string) error {
	if err := checkRetirement(stack, service, id); err != nil {
		return fmt.Errorf("retirement %s/%s: %w", stack, service, err)
	}
	key := []byte(retirementPrefix(stack, service) + id)
	if err := j.update(func(txn *writeTxn) error { return txn.Delete(key) }); err != nil {
		return fmt.Errorf("journal: retirement %s/%s %s: %w", stack, service, id, err)
	}
	return nil
}

// PendingRetirements returns the pending retirements of stack/service.
func (j *Journal) PendingRetirements(stack, service string) ([]PendingRetirement, error) {
	if err := checkService(stack, service); err != nil {
		return nil, err
	}
	out, err := listJSON[PendingRetirement](j, retirementPrefix(stack, service))
	if err != nil {
		return nil, fmt.Errorf("journal: retirements of %s/%s: %w", stack, service, err)
	}
	return out, nil
}
