package journal

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Limits on a deployment record.
const (
	MaxDefinitionBytes = 4 << 20
	MaxSourceBytes     = 4096
)

// Deployment is one applied definition of a stack (SVC-5).
type Deployment struct {
	// ID is assigned by RecordDeployment: 1, 2, 3, ... per stack, never
	// reused, even after the stack is removed and applied again.
	ID uint64 `json:"id"`
	// Definition is the rendered stack definition, opaque to the journal
	// (it must be valid JSON).
	Definition json.RawMessage `json:"definition"`
	// Revisions maps service name to revision (SVC-3).
	Revisions map[string]string `json:"revisions"`
	AppliedAt time.Time         `json:"applied_at"`
	// Source says where it came from: a file path or "socket".
	Source string `json:"source"`
}

// StackState is a stack's desired state: the current deployment and the
// one before it, kept for rollback (SVC-17).
type StackState struct {
	Stack    string      `json:"stack"`
	Current  Deployment  `json:"current"`
	Previous *Deployment `json:"previous,omitempty"`
	// Declared is what the stack file said when it was last applied; nil
	// in a record written before engenho kept it.
	Declared *Declaration `json:"declared,omitempty"`
	// Overrides are the operator's commands that replace a value the
	// stack file declares (SVC-23). Deployments and rollbacks keep them.
	Overrides []Override `json:"overrides,omitempty"`
}

func checkDeployment(d Deployment) error {
	if len(d.Definition) == 0 || !json.Valid(d.Definition) {
		return invalid("definition", "must be valid JSON")
	}
	if len(d.Definition) > MaxDefinitionBytes {
		return invalid("definition", "%d bytes exceeds %d", len(d.Definition), MaxDefinitionBytes)
	}
	if len(d.Source) > MaxSourceBytes {
		return invalid("source", "%d bytes exceeds %d", len(d.Source), MaxSourceBytes)
	}
	for svc, rev := range d.Revisions {
		if err := checkServiceName("revisions: service", svc); err != nil {
			return err
		}
		if err := checkRevision("revisions["+svc+"]", rev); err != nil {
			return err
		}
	}
	return nil
}

// RecordDeployment makes d the stack's current deployment and the former
// current one its previous (SVC-5). It assigns d.ID (and AppliedAt when
// zero). The declaration and the overrides are kept. Failed-revision
// records of deployments that are now neither current nor previous are
// dropped: they can never be rolled out again. Synced before it returns.
func (j *Journal) RecordDeployment(stack string, d Deployment) (StackState, error) {
	st, err := j.ChangeStack(stack, StackChange{Deploy: &d})
	if err != nil {
		return StackState{}, fmt.Errorf("record deployment: %w", err)
	}
	return st, nil
}

// Stack returns a stack's desired state.
func (j *Journal) Stack(stack string) (st StackState, found bool, err error) {
	if err := checkName("stack", stack); err != nil {
		return StackState{}, false, err
	}
	err = j.read(func(txn *badger.Txn) error {
		found, err = getJSON(txn, desiredKey(stack), &st)
		return err
	})
	if err != nil {
		return StackState{}, false, fmt.Errorf("journal: stack %s: %w", stack, err)
	}
	return st, found, nil
}

// Stacks returns every stack's desired state, by name.
func (j *Journal) Stacks() ([]StackState, error) {
	out, err := listJSON[StackState](j, PrefixDesired)
	if err != nil {
		return nil, fmt.Errorf("journal: stacks: %w", err)
	}
	return out, nil
}

// Rollback swaps the current and previous deployments (SVC-17), so a
// second rollback undoes the first; the overrides are kept. ErrNoPrevious
// when there is none, ErrNotFound when the stack is unknown. Synced.
func (j *Journal) Rollback(stack string) (StackState, error) {
	st, err := j.ChangeStack(stack, StackChange{Rollback: true})
	if err != nil {
		return StackState{}, fmt.Errorf("rollback: %w", err)
	}
	return st, nil
}

// RemoveStack deletes a stack's desired state and every intent, rollout
// and failed revision under it, in one synced transaction. The stack's
// deployment counter is kept so that ids are never reused. Removing an
// unknown stack is not an error.
func (j *Journal) RemoveStack(stack string) error {
	if err := checkName("stack", stack); err != nil {
		return err
	}
	err := j.update(func(txn *writeTxn) error {
		if err := txn.Delete(desiredKey(stack)); err != nil {
			return err
		}
		for _, p := range []string{PrefixStopped, PrefixRollout, PrefixFailed} {
			if err := deletePrefix(txn, p+stack+"/"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal: stack %s: remove: %w", stack, err)
	}
	return nil
}

// dropStaleFailed deletes the stack's failed-revision records whose
// deployment is neither current nor previous.
func dropStaleFailed(txn *writeTxn, st StackState) error {
	keep := map[uint64]bool{st.Current.ID: true}
	if st.Previous != nil {
		keep[st.Previous.ID] = true
	}
	prefix := failedPrefix(st.Stack, "")
	var stale [][]byte
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
	for it.Rewind(); it.Valid(); it.Next() {
		// key: PREFIX SERVICE/DEPLOYMENT/REVISION
		parts := strings.Split(strings.TrimPrefix(string(it.Item().Key()), prefix), "/")
		if len(parts) != 3 {
			continue
		}
		if dep, err := parseNum(parts[1]); err == nil && !keep[dep] {
			stale = append(stale, it.Item().KeyCopy(nil))
		}
	}
	it.Close()
	for _, k := range stale {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
