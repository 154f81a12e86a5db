package journal

import (
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/engenho/engenho/messages"
)

// StoppedIntent is a durable `engenho service stop` (SVC-10).
type StoppedIntent struct {
	Stack   string    `json:"stack"`
	Service string    `json:"service"`
	Since   time.Time `json:"since"`
	// By is who stopped it; nil when not known (recorded before engenho
	// kept it, or not through the socket).
	By *Who `json:"by,omitempty"`
}

func checkService(stack, service string) error {
	if err := checkName("stack", stack); err != nil {
		return err
	}
	return checkServiceName("service", service)
}

// StopService records that stack/service must stay stopped. Stopping a
// stopped service keeps the original Since. Synced.
func (j *Journal) StopService(stack, service string) error {
	return j.StopServiceBy(stack, service, nil)
}

// StopServiceBy is StopService that also records who asked. Stopping a
// stopped service keeps the original Since and By. Synced.
func (j *Journal) StopServiceBy(stack, service string, by *Who) error {
	return j.StopServiceAudited(stack, service, by, nil)
}

// StopServiceAudited is StopServiceBy that also appends audit, when set,
// to the deploy audit log in the same transaction (issue 17), with the
// stack's current deployment and revisions.
func (j *Journal) StopServiceAudited(stack, service string, by *Who, audit *messages.AuditEntry) error {
	if err := checkService(stack, service); err != nil {
		return err
	}
	if by != nil {
		if err := checkWho(*by); err != nil {
			return fmt.Errorf("service %s/%s: %w", stack, service, err)
		}
	}
	err := j.update(func(txn *writeTxn) error {
		if err := j.auditIntent(txn, stack, audit); err != nil {
			return err
		}
		var cur StoppedIntent
		found, err := getJSON(txn, stoppedKey(stack, service), &cur)
		if err != nil || found {
			return err
		}
		in := StoppedIntent{Stack: stack, Service: service, Since: j.opts.Clock.Now(), By: by}
		return setJSON(txn, stoppedKey(stack, service), in)
	})
	if err != nil {
		return fmt.Errorf("journal: service %s/%s: stop: %w", stack, service, err)
	}
	return nil
}

// StartService lifts the stopped intent, if any. Synced.
func (j *Journal) StartService(stack, service string) error {
	return j.StartServiceAudited(stack, service, nil)
}

// StartServiceAudited is StartService that also appends audit, when set,
// in the same transaction (issue 17).
func (j *Journal) StartServiceAudited(stack, service string, audit *messages.AuditEntry) error {
	if err := checkService(stack, service); err != nil {
		return err
	}
	err := j.update(func(txn *writeTxn) error {
		if err := j.auditIntent(txn, stack, audit); err != nil {
			return err
		}
		return txn.Delete(stoppedKey(stack, service))
	})
	if err != nil {
		return fmt.Errorf("journal: service %s/%s: start: %w", stack, service, err)
	}
	return nil
}

// auditIntent appends audit (when set) with the stack's current
// deployment as both from and to: an intent changes no deployment.
func (j *Journal) auditIntent(txn *writeTxn, stack string, audit *messages.AuditEntry) error {
	if audit == nil {
		return nil
	}
	var st StackState
	found, err := getJSON(txn, desiredKey(stack), &st)
	if err != nil {
		return err
	}
	st.Stack = stack
	auditChange(audit, st, found, st)
	_, err = j.writeAudit(txn, audit)
	return err
}

// IsStopped reports whether stack/service has a stopped intent.
func (j *Journal) IsStopped(stack, service string) (bool, error) {
	if err := checkService(stack, service); err != nil {
		return false, err
	}
	var found bool
	err := j.read(func(txn *badger.Txn) error {
		var in StoppedIntent
		var err error
		found, err = getJSON(txn, stoppedKey(stack, service), &in)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("journal: service %s/%s: %w", stack, service, err)
	}
	return found, nil
}

// StoppedServices returns every stopped intent, by stack then service.
func (j *Journal) StoppedServices() ([]StoppedIntent, error) {
	out, err := listJSON[StoppedIntent](j, PrefixStopped)
	if err != nil {
		return nil, fmt.Errorf("journal: stopped services: %w", err)
	}
	return out, nil
}

// RolloutProgress is how far a service's rollout got (SVC-14): the slots
// already running the target revision of the deployment.
type RolloutProgress struct {
	Stack      string    `json:"stack"`
	Service    string    `json:"service"`
	Deployment uint64    `json:"deployment"`
	Revision   string    `json:"revision"`
	SlotsDone  []int     `json:"slots_done"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// SaveRollout records rollout progress, replacing the previous record for
// the service. SlotsDone is stored sorted without duplicates; UpdatedAt is
// stamped when zero. Synced.
func (j *Journal) SaveRollout(p RolloutProgress) error {
	if err := checkService(p.Stack, p.Service); err != nil {
		return err
	}
	if err := checkRevision("revision", p.Revision); err != nil {
		return fmt.Errorf("rollout %s/%s: %w", p.Stack, p.Service, err)
	}
	p.SlotsDone = slices.Compact(slices.Sorted(slices.Values(p.SlotsDone)))
	if len(p.SlotsDone) > 0 && p.SlotsDone[0] < 1 {
		return fmt.Errorf("rollout %s/%s: %w", p.Stack, p.Service, invalid("slots_done", "slot %d < 1", p.SlotsDone[0]))
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = j.opts.Clock.Now()
	}
	err := j.update(func(txn *writeTxn) error { return setJSON(txn, rolloutKey(p.Stack, p.Service), p) })
	if err != nil {
		return fmt.Errorf("journal: rollout %s/%s: save: %w", p.Stack, p.Service, err)
	}
	return nil
}

// Rollout returns the service's rollout progress, if one is recorded.
func (j *Journal) Rollout(stack, service string) (p RolloutProgress, found bool, err error) {
	if err := checkService(stack, service); err != nil {
		return RolloutProgress{}, false, err
	}
	err = j.read(func(txn *badger.Txn) error {
		found, err = getJSON(txn, rolloutKey(stack, service), &p)
		return err
	})
	if err != nil {
		return RolloutProgress{}, false, fmt.Errorf("journal: rollout %s/%s: %w", stack, service, err)
	}
	return p, found, nil
}

// Rollouts returns every recorded rollout, by stack then service.
func (j *Journal) Rollouts() ([]RolloutProgress, error) {
	out, err := listJSON[RolloutProgress](j, PrefixRollout)
	if err != nil {
		return nil, fmt.Errorf("journal: rollouts: %w", err)
	}
	return out, nil
}

// ClearRollout deletes the service's rollout progress (rollout finished or
// superseded). Synced.
func (j *Journal) ClearRollout(stack, service string) error {
	if err := checkService(stack, service); err != nil {
		return err
	}
	err := j.update(func(txn *writeTxn) error { return txn.Delete(rolloutKey(stack, service)) })
	if err != nil {
		return fmt.Errorf("journal: rollout %s/%s: clear: %w", stack, service, err)
	}
	return nil
}

// FailedRevision remembers that a revision of a deployment failed its
// rollout and must not be retried (SVC-13, SVC-14).
type FailedRevision struct {
	Stack      string    `json:"stack"`
	Service    string    `json:"service"`
	Deployment uint64    `json:"deployment"`
	Revision   string    `json:"revision"`
	Reason     string    `json:"reason,omitempty"`
	At         time.Time `json:"at"`
}

// MarkFailed records a failed revision. At is stamped when zero. Synced.
func (j *Journal) MarkFailed(f FailedRevision) error {
	if err := checkService(f.Stack, f.Service); err != nil {
		return err
	}
	if err := checkRevision("revision", f.Revision); err != nil {
		return fmt.Errorf("failed revision %s/%s: %w", f.Stack, f.Service, err)
	}
	if f.Deployment == 0 {
		return fmt.Errorf("failed revision %s/%s: %w", f.Stack, f.Service, invalid("deployment", "0"))
	}
	if f.At.IsZero() {
		f.At = j.opts.Clock.Now()
	}
	key := failedKey(f.Stack, f.Service, f.Deployment, f.Revision)
	err := j.update(func(txn *writeTxn) error { return setJSON(txn, key, f) })
	if err != nil {
		return fmt.Errorf("journal: failed revision %s/%s: %w", f.Stack, f.Service, err)
	}
	return nil
}

// IsFailed reports whether (stack, service, deployment, revision) failed.
func (j *Journal) IsFailed(stack, service string, deployment uint64, revision string) (bool, error) {
	if err := checkService(stack, service); err != nil {
		return false, err
	}
	if err := checkRevision("revision", revision); err != nil {
		return false, err
	}
	var found bool
	err := j.read(func(txn *badger.Txn) error {
		var f FailedRevision
		var err error
		found, err = getJSON(txn, failedKey(stack, service, deployment, revision), &f)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("journal: failed revision %s/%s: %w", stack, service, err)
	}
	return found, nil
}

// FailedRevisions returns the failed revisions of a stack ("" = every
// stack), by service, deployment and revision.
func (j *Journal) FailedRevisions(stack string) ([]FailedRevision, error) {
	prefix := PrefixFailed
	if stack != "" {
		if err := checkName("stack", stack); err != nil {
			return nil, err
		}
		prefix = failedPrefix(stack, "")
	}
	out, err := listJSON[FailedRevision](j, prefix)
	if err != nil {
		return nil, fmt.Errorf("journal: failed revisions: %w", err)
	}
	return out, nil
}
