package journal

import (
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// MaxBootAttempts is how many boot attempts the journal keeps (DMN-7).
const MaxBootAttempts = 64

// BootOutcome is how a boot attempt ended.
type BootOutcome string

const (
	BootRunning   BootOutcome = "running" // not finished yet (or the process died)
	BootSucceeded BootOutcome = "succeeded"
	BootFailed    BootOutcome = "failed"
)

// Phase is one boot phase and how long it took (DMN-6 phases).
type Phase struct {
	Name      string        `json:"name"`
	StartedAt time.Time     `json:"started_at"`
	Duration  time.Duration `json:"duration_ns"`
	Error     string        `json:"error,omitempty"`
}

// BootAttempt is one boot of the daemon (DMN-7).
type BootAttempt struct {
	Number    uint64      `json:"number"`
	StartedAt time.Time   `json:"started_at"`
	EndedAt   time.Time   `json:"ended_at,omitzero"`
	Phases    []Phase     `json:"phases,omitempty"`
	Outcome   BootOutcome `json:"outcome"`
	Error     string      `json:"error,omitempty"`
}

// RecordBoot writes a boot attempt. Number 0 means a new attempt: it gets
// the next number. A non-zero Number overwrites that attempt (the daemon
// records an attempt as it starts and again as it ends). Only the last
// MaxBootAttempts are kept. Synced.
func (j *Journal) RecordBoot(a BootAttempt) (BootAttempt, error) {
	if a.Outcome == "" {
		a.Outcome = BootRunning
	}
	if a.StartedAt.IsZero() {
		a.StartedAt = j.opts.Clock.Now()
	}
	err := j.update(func(txn *writeTxn) error {
		last, err := lastBootNumber(txn)
		if err != nil {
			return err
		}
		if a.Number == 0 {
			a.Number = last + 1
		}
		if err := setJSON(txn, bootKey(a.Number), a); err != nil {
			return err
		}
		return pruneBoots(txn, max(last, a.Number))
	})
	if err != nil {
		return BootAttempt{}, fmt.Errorf("journal: record boot %d: %w", a.Number, err)
	}
	return a, nil
}

// BootAttempts returns the kept boot attempts, oldest first.
func (j *Journal) BootAttempts() ([]BootAttempt, error) {
	out, err := listJSON[BootAttempt](j, PrefixBoot)
	if err != nil {
		return nil, fmt.Errorf("journal: boot attempts: %w", err)
	}
	return out, nil
}

func lastBootNumber(txn reader) (uint64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(PrefixBoot), Reverse: true})
	defer it.Close()
	it.Seek(append([]byte(PrefixBoot), 0xff))
	if !it.Valid() {
		return 0, nil
	}
	return seqFromKey(it.Item().Key(), PrefixBoot)
}

// pruneBoots deletes attempts numbered at or below newest-MaxBootAttempts.
func pruneBoots(txn *writeTxn, newest uint64) error {
	if newest <= MaxBootAttempts {
		return nil
	}
	cut := newest - MaxBootAttempts
	var keys [][]byte
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(PrefixBoot)})
	for it.Rewind(); it.Valid(); it.Next() {
		n, err := seqFromKey(it.Item().Key(), PrefixBoot)
		if err != nil || n > cut {
			break
		}
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
