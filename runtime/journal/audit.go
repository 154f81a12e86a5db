package journal

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"

	"github.com/engenho/engenho/messages"
)

// Bounds on the deploy audit log (issue 17).
const (
	DefaultMaxAudit   = 10_000 // entries kept, oldest dropped first
	maxAuditMessage   = 2048   // bytes of an entry's message; longer is cut
	maxAuditPlanLines = 256    // lines of an apply's plan; more are summed up
	maxAuditTrim      = 1000   // old entries one write deletes, at most
)

// The deploy audit log holds one entry per deployment request (apply,
// scale, rollback, redeploy, remove, service stop/start), whatever its
// outcome. An entry of a change is written in the same synced transaction
// as the change (StackChange.Audit, StopServiceAudited), so a crash never
// leaves a recorded deployment without its entry; a refused or failed
// request is written on its own (RecordAudit). The log is bounded by
// count (Retention.MaxAudit): each write deletes the entries beyond it.

// RecordAudit appends e (Seq and, when zero, UnixMs are assigned) in its
// own synced transaction and returns its sequence number.
func (j *Journal) RecordAudit(e messages.AuditEntry) (uint64, error) {
	var seq uint64
	err := j.update(func(txn *writeTxn) error {
		var err error
		seq, err = j.writeAudit(txn, &e)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("journal: audit: %w", err)
	}
	return seq, nil
}

// writeAudit appends e inside txn and trims the log to its bound.
func (j *Journal) writeAudit(txn *writeTxn, e *messages.AuditEntry) (uint64, error) {
	if err := checkAudit(e); err != nil {
		return 0, err
	}
	var last uint64
	if _, err := getJSON(txn, []byte(keyAuditSeq), &last); err != nil {
		return 0, err
	}
	e.Seq = last + 1
	if e.UnixMs == 0 {
		e.UnixMs = j.opts.Clock.Now().UnixMilli()
	}
	if err := setJSON(txn, auditKey(e.Seq), e); err != nil {
		return 0, err
	}
	if err := setJSON(txn, []byte(keyAuditSeq), e.Seq); err != nil {
		return 0, err
	}
	return e.Seq, trimAudit(txn, e.Seq, j.opts.Retention.MaxAudit)
}

// trimAudit deletes the entries numbered at or below last-keep.
func trimAudit(txn *writeTxn, last uint64, keep int) error {
	if keep <= 0 || last <= uint64(keep) {
		return nil
	}
	cut := last - uint64(keep)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(PrefixAudit)})
	var old [][]byte
	for it.Rewind(); it.Valid() && len(old) < maxAuditTrim; it.Next() {
		seq, err := seqFromKey(it.Item().Key(), PrefixAudit)
		if err != nil {
			it.Close()
			return err
		}
		if seq > cut {
			break
		}
		old = append(old, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range old {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// checkAudit validates names and cuts the free text to its bounds.
func checkAudit(e *messages.AuditEntry) error {
	if e.Op == "" || len(e.Op) > 64 {
		return invalid("audit: op", "must be 1-64 characters")
	}
	// A refused apply whose files name no valid stack is kept with no
	// stack, so that a broken file still leaves a trace of who tried it.
	if e.Stack != "" || e.Outcome != messages.AuditRefused {
		if err := checkName("audit: stack", e.Stack); err != nil {
			return err
		}
	}
	if e.Service != "" {
		if err := checkServiceName("audit: service", e.Service); err != nil {
			return err
		}
	}
	switch e.Outcome {
	case messages.AuditOK, messages.AuditRefused, messages.AuditFailed:
	default:
		return invalid("audit: outcome", "%q is not ok, refused or failed", e.Outcome)
	}
	if e.By.User == "" {
		e.By.User = "unknown"
	}
	e.By.User = cut(e.By.User, maxUserBytes)
	e.Message = cut(e.Message, maxAuditMessage)
	if len(e.Plan) > maxAuditPlanLines {
		more := len(e.Plan) - maxAuditPlanLines + 1
		e.Plan = append(slices.Clone(e.Plan[:maxAuditPlanLines-1]), fmt.Sprintf("... and %d more", more))
	}
	for i, l := range e.Plan {
		e.Plan[i] = cut(l, maxOverrideValue)
	}
	return nil
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n - len("...")
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return strings.TrimRight(s[:end], " ") + "..."
}

// History returns up to limit audit entries of stack (every stack when
// ""), newest last; limit <= 0 means DefaultReadLimit.
func (j *Journal) History(stack string, limit int) ([]messages.AuditEntry, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	var out []messages.AuditEntry
	err := j.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(PrefixAudit), Reverse: true})
		defer it.Close()
		for it.Seek(append([]byte(PrefixAudit), 0xff)); it.Valid() && len(out) < limit; it.Next() {
			var e messages.AuditEntry
			if err := it.Item().Value(func(b []byte) error { return json.Unmarshal(b, &e) }); err != nil {
				return decodeError(it.Item().KeyCopy(nil), err)
			}
			if stack == "" || e.Stack == stack {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: history: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// auditChange fills e's deployments and revisions from the stack's state
// before (found: it existed) and after a change.
func auditChange(e *messages.AuditEntry, before StackState, found bool, after StackState) {
	e.Stack = after.Stack
	if e.Stack == "" {
		e.Stack = before.Stack
	}
	if found {
		e.FromDeployment = before.Current.ID
		e.FromRevisions = maps.Clone(before.Current.Revisions)
	}
	e.ToDeployment = after.Current.ID
	e.ToRevisions = maps.Clone(after.Current.Revisions)
	if e.Outcome == "" {
		e.Outcome = messages.AuditOK
	}
}
