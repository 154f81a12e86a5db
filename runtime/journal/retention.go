package journal

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// PruneEvents runs one retention pass now (the background loop runs one
// every Retention.Interval). It removes the oldest events while there are
// more than MaxEvents or the oldest is older than MaxAge (by its UnixMs).
// It stops at the first event that is young enough and within the count,
// so the log stays a contiguous tail. The last sequence number is kept
// even when every event is removed.
func (j *Journal) PruneEvents() (PruneResult, error) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return PruneResult{}, ErrClosed
	}
	return j.events.requestPrune()
}

// requestPrune hands a pass to the committer, the only writer of events.
func (l *eventLog) requestPrune() (PruneResult, error) {
	reply := make(chan pruneReply, 1)
	l.pruneCh <- reply
	r := <-reply
	return r.res, r.err
}

func (l *eventLog) prune() (PruneResult, error) {
	if err := l.j.space.check(); err != nil {
		return PruneResult{}, fmt.Errorf("journal: retention: %w", err) // deleting writes too
	}
	keys, err := l.expired()
	if err != nil {
		return PruneResult{}, fmt.Errorf("journal: retention: %w", err)
	}
	if err := l.deleteKeys(keys); err != nil {
		return PruneResult{}, fmt.Errorf("journal: retention: %w", err)
	}
	l.j.stats.pruned.Add(uint64(len(keys)))
	var first uint64
	err = l.j.db.View(func(txn *badger.Txn) error {
		first, err = firstEventSeq(txn)
		return err
	})
	if err != nil {
		return PruneResult{}, fmt.Errorf("journal: retention: %w", err)
	}
	if len(keys) > 0 {
		l.j.log.Debug().Int("removed", len(keys)).Uint64("first_seq", first).Msg("events pruned")
	}
	return PruneResult{Removed: len(keys), FirstSeq: first}, nil
}

// expired lists the keys of the events a pass removes, oldest first.
func (l *eventLog) expired() ([][]byte, error) {
	ret := l.j.opts.Retention
	var countCut uint64 // events numbered <= countCut are over the count
	if ret.MaxEvents > 0 && l.last > uint64(ret.MaxEvents) {
		countCut = l.last - uint64(ret.MaxEvents)
	}
	ageLimited := ret.MaxAge > 0
	ageCut := l.j.opts.Clock.Now().Add(-ret.MaxAge).UnixMilli()

	var keys [][]byte
	err := l.j.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(PrefixEvent)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			seq, err := seqFromKey(item.Key(), PrefixEvent)
			if err != nil {
				return err
			}
			if seq > countCut {
				if !ageLimited {
					return nil
				}
				old, err := olderThan(item, ageCut)
				if err != nil || !old {
					return err
				}
			}
			keys = append(keys, item.KeyCopy(nil))
		}
		return nil
	})
	return keys, err
}

func olderThan(item *badger.Item, cutMs int64) (bool, error) {
	var v struct {
		UnixMs int64 `json:"unix_ms"`
	}
	if err := item.Value(func(b []byte) error { return json.Unmarshal(b, &v) }); err != nil {
		return false, decodeError(item.Key(), err)
	}
	return v.UnixMs < cutMs, nil
}

// deleteKeys deletes keys in as many synced transactions as badger needs.
// A transaction also ends once the values it deletes fill txnBytes: the
// undo of a transaction the disk fails writes them all back, in one
// transaction that must fit in badger's limits too.
func (l *eventLog) deleteKeys(keys [][]byte) error {
	if err := l.j.resync(); err != nil {
		return err
	}
	l.j.writeMu.RLock()
	defer l.j.writeMu.RUnlock()
	l.j.compact.wrote()
	txn := l.j.newWrite()
	defer func() { txn.Discard() }()
	next := func() error {
		if err := l.j.commit(txn); err != nil {
			return err
		}
		txn = l.j.newWrite()
		return nil
	}
	for _, k := range keys {
		if txn.remembered >= l.txnBytes {
			if err := next(); err != nil {
				return err
			}
		}
		err := txn.Delete(k)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = next(); err == nil {
				err = txn.Delete(k)
			}
		}
		if err != nil {
			return err
		}
	}
	return l.j.commit(txn)
}
