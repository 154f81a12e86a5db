package journal

import (
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/engenho/engenho/messages"
)

// SetDue records host's next due time; a zero at clears it (the instance
// answered 0 = none). Synced.
func (j *Journal) SetDue(host string, at time.Time) error {
	if err := checkHost(host); err != nil {
		return err
	}
	err := j.update(func(txn *writeTxn) error {
		if at.IsZero() {
			return txn.Delete(dueKey(host))
		}
		return setJSON(txn, dueKey(host), messages.DueTime{Host: host, At: at, RecordedAt: j.opts.Clock.Now()})
	})
	if err != nil {
		return fmt.Errorf("journal: host %s: due time: %w", host, err)
	}
	return nil
}

// Due returns host's due time, if one is recorded.
func (j *Journal) Due(host string) (d messages.DueTime, found bool, err error) {
	if err := checkHost(host); err != nil {
		return messages.DueTime{}, false, err
	}
	err = j.read(func(txn *badger.Txn) error {
		found, err = getJSON(txn, dueKey(host), &d)
		return err
	})
	if err != nil {
		return messages.DueTime{}, false, fmt.Errorf("journal: host %s: due time: %w", host, err)
	}
	return d, found, nil
}

// DueTimes returns every recorded due time, by host.
func (j *Journal) DueTimes() ([]messages.DueTime, error) {
	out, err := listJSON[messages.DueTime](j, PrefixDue)
	if err != nil {
		return nil, fmt.Errorf("journal: due times: %w", err)
	}
	return out, nil
}

// OweRelease records (or updates) the owed release of host's lease.
// OwedSince is stamped when zero. Synced.
func (j *Journal) OweRelease(r messages.OwedRelease) error {
	if err := checkHost(r.Host); err != nil {
		return err
	}
	if r.Epoch == "" && r.ETag == "" {
		return fmt.Errorf("owed release %s: %w", r.Host, invalid("lease", "epoch and etag are both empty"))
	}
	if r.OwedSince.IsZero() {
		r.OwedSince = j.opts.Clock.Now()
	}
	err := j.update(func(txn *writeTxn) error { return setJSON(txn, owedKey(r.Host), r) })
	if err != nil {
		return fmt.Errorf("journal: host %s: owe release: %w", r.Host, err)
	}
	return nil
}

// SettleRelease deletes host's owed release if it is for the lease with
// this epoch; a record for another epoch is left alone (settled = false).
// Synced.
func (j *Journal) SettleRelease(host, epoch string) (settled bool, err error) {
	if err := checkHost(host); err != nil {
		return false, err
	}
	err = j.update(func(txn *writeTxn) error {
		var r messages.OwedRelease
		found, err := getJSON(txn, owedKey(host), &r)
		if err != nil || !found || r.Epoch != epoch {
			return err
		}
		settled = true
		return txn.Delete(owedKey(host))
	})
	if err != nil {
		return false, fmt.Errorf("journal: host %s: settle release: %w", host, err)
	}
	return settled, nil
}

// OwedReleases returns every owed release, by host.
func (j *Journal) OwedReleases() ([]messages.OwedRelease, error) {
	out, err := listJSON[messages.OwedRelease](j, PrefixOwed)
	if err != nil {
		return nil, fmt.Errorf("journal: owed releases: %w", err)
	}
	return out, nil
}
