package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/skl"

	"github.com/engenho/engenho/messages"
)

// Limits on events.
const (
	MaxEventBytes    = 64 << 10 // the sum of an event's text fields
	DefaultReadLimit = 1000     // EventsAfter with limit <= 0
)

// Committer tuning.
const (
	maxGather    = 8192 // events gathered into one commit round
	emitQueue    = 4096 // requests queued before Emit blocks
	followPage   = 256  // events a subscription reads at a time
	txnMaxEvents = 4000 // events in one transaction, at most
)

// eventLog owns the event keyspace. One committer goroutine assigns
// sequence numbers and commits; an event is published (visible to reads
// and subscriptions) only after its transaction is committed, and commits
// are synced (badger SyncWrites) unless Options.NoSync. So every number a
// reader has seen is on disk, and a restart after any crash continues at
// the number after the last one on disk: no gap, no reuse (SVC-20).
type eventLog struct {
	j        *Journal
	appendCh chan *appendReq
	pruneCh  chan chan pruneReply
	stopCh   chan struct{}
	done     chan struct{}

	// A transaction holds at most txnEvents events and txnBytes encoded
	// bytes: a third of badger's batch limits (which derive from the
	// memtable size), so the sequence record always fits beside them.
	txnEvents, txnBytes int

	last    uint64        // committer-owned: last committed sequence number
	visible atomic.Uint64 // last published sequence number
	failed  atomic.Bool   // set once a commit failed; appends are refused
	// dropped counts the emitted events not recorded while the disk was
	// short of the journal's reserve (committer-owned); the next commit
	// with room says how many.
	dropped int

	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced on every publish
}

type appendReq struct {
	events []messages.Event
	last   uint64           // set by the committer
	done   chan appendReply // nil for Emit
}

type appendReply struct {
	last uint64
	err  error
}

// PruneResult is what one retention pass did.
type PruneResult struct {
	Removed  int
	FirstSeq uint64 // oldest event kept; 0 when the log is empty
}

type pruneReply struct {
	res PruneResult
	err error
}

func openEventLog(j *Journal, memTableSize int64) (*eventLog, error) {
	batchBytes := memTableSize * 15 / 100 // badger's maxBatchSize
	l := &eventLog{
		j:         j,
		txnBytes:  int(batchBytes / 3),
		txnEvents: int(min(txnMaxEvents, batchBytes/int64(skl.MaxNodeSize)/3)),
		appendCh:  make(chan *appendReq, emitQueue),
		pruneCh:   make(chan chan pruneReply),
		stopCh:    make(chan struct{}),
		done:      make(chan struct{}),
		notify:    make(chan struct{}),
	}
	err := j.db.View(func(txn *badger.Txn) error {
		var meta uint64
		if _, err := getJSON(txn, []byte(keyEventSeq), &meta); err != nil {
			return err
		}
		lastKey, err := lastEventKey(txn)
		l.last = max(meta, lastKey)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	l.visible.Store(l.last)
	go l.run()
	return l, nil
}

func lastEventKey(txn reader) (uint64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(PrefixEvent), Reverse: true})
	defer it.Close()
	it.Seek(append([]byte(PrefixEvent), 0xff))
	if !it.Valid() {
		return 0, nil
	}
	return seqFromKey(it.Item().Key(), PrefixEvent)
}

// stop commits what is queued and ends the committer. Called by Close once
// no caller can queue more.
func (l *eventLog) stop() {
	close(l.stopCh)
	<-l.done
}

func (l *eventLog) run() {
	defer close(l.done)
	for {
		select {
		case r := <-l.appendCh:
			l.commit(l.gather(r))
		case reply := <-l.pruneCh:
			res, err := l.prune()
			reply <- pruneReply{res, err}
		case <-l.stopCh:
			for {
				select {
				case r := <-l.appendCh:
					l.commit(l.gather(r))
				default:
					return
				}
			}
		}
	}
}

// gather takes whatever else is queued, so concurrent appends share a
// commit (group commit).
func (l *eventLog) gather(first *appendReq) []*appendReq {
	reqs := []*appendReq{first}
	n := len(first.events)
	for n < maxGather {
		select {
		case r := <-l.appendCh:
			reqs = append(reqs, r)
			n += len(r.events)
		default:
			return reqs
		}
	}
	return reqs
}

func (l *eventLog) commit(reqs []*appendReq) {
	var err error
	if l.failed.Load() {
		err = ErrEventLogFailed
	} else if err = l.writable(); err != nil {
		l.drop(reqs, err)
	} else {
		batch, notice := l.withDropped(reqs)
		l.j.writeMu.RLock()
		err = l.write(batch)
		l.j.writeMu.RUnlock()
		if l.recorded(notice) {
			l.dropped = 0
		}
		switch {
		case errors.Is(err, ErrWriteFailed):
			l.drop(reqs, err)
		case err != nil:
			l.failed.Store(true)
			l.j.log.Error().Err(err).Uint64("last_seq", l.last).Msg("event commit failed; event log refuses further appends")
			err = fmt.Errorf("%w: %w", ErrEventLogFailed, err)
		}
	}
	for _, r := range reqs {
		if r.done == nil {
			continue
		}
		if l.recorded(r) {
			r.done <- appendReply{last: r.last}
		} else {
			r.done <- appendReply{err: err}
		}
	}
}

// writable says why the journal cannot take events now: its disk is short
// of the reserve, or it waits for the disk after a failed write.
func (l *eventLog) writable() error {
	if err := l.j.space.check(); err != nil {
		return err
	}
	return l.j.resync()
}

// recorded says whether every event of r is committed.
func (l *eventLog) recorded(r *appendReq) bool {
	return r != nil && r.last != 0 && r.last <= l.last
}

// drop counts the emitted events of reqs that were not recorded (the disk
// short of the reserve, or failing a write): appends get the error. The
// event log stays usable: the next batch that can be written is, led by
// an event that says how many were lost (withDropped). Sequence numbers
// stay gapless: a failed commit is undone, and its numbers are reused.
func (l *eventLog) drop(reqs []*appendReq, err error) {
	n := 0
	for _, r := range reqs {
		if r.done == nil && !l.recorded(r) {
			n += len(r.events)
		}
	}
	if l.dropped == 0 && n > 0 {
		l.j.log.Error().Err(err).Msg("the journal cannot write: events are not recorded until it can")
	}
	l.dropped += n
}

// withDropped puts, ahead of reqs, the event saying how many events were
// not recorded while the journal could not write, once it can again.
func (l *eventLog) withDropped(reqs []*appendReq) ([]*appendReq, *appendReq) {
	if l.dropped == 0 {
		return reqs, nil
	}
	ev := messages.Event{Kind: messages.KindEventsDropped, Level: messages.LevelWarn, Actor: "journal",
		UnixMs: l.j.opts.Clock.Now().UnixMilli(),
		Message: fmt.Sprintf("%s not recorded while the journal could not write (its disk short of the reserve, or failing writes)",
			eventsWere(l.dropped))}
	notice := &appendReq{events: []messages.Event{ev}}
	return append([]*appendReq{notice}, reqs...), notice
}

// eventsWere is "1 event was", "3 events were".
func eventsWere(n int) string {
	if n == 1 {
		return "1 event was"
	}
	return fmt.Sprintf("%d events were", n)
}

// write assigns sequence numbers and commits the events, in several
// transactions when they exceed txnEvents or txnBytes. Each transaction
// also records the last sequence number under keyEventSeq, so retention
// can empty the log without the count going back.
func (l *eventLog) write(reqs []*appendReq) error {
	l.j.compact.wrote()
	txn := l.j.newWrite()
	defer func() { txn.Discard() }()
	seq, inTxn, txnBytes := l.last, 0, 0
	flush := func() error {
		if inTxn == 0 {
			return nil
		}
		if err := setJSON(txn, []byte(keyEventSeq), seq); err != nil {
			return err
		}
		if err := l.j.commit(txn); err != nil {
			return err
		}
		l.publish(seq)
		txn, inTxn, txnBytes = l.j.newWrite(), 0, 0
		return nil
	}
	for _, r := range reqs {
		for i := range r.events {
			ev := &r.events[i]
			ev.Seq = seq + 1
			b, err := json.Marshal(ev)
			if err != nil {
				return fmt.Errorf("encode event: %w", err)
			}
			if inTxn >= l.txnEvents || txnBytes+len(b) > l.txnBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			err = txn.setNew(eventKey(ev.Seq), b)
			if errors.Is(err, badger.ErrTxnTooBig) {
				if err = flush(); err == nil {
					err = txn.setNew(eventKey(ev.Seq), b)
				}
			}
			if err != nil {
				return fmt.Errorf("event %d: %w", ev.Seq, err)
			}
			seq++
			inTxn++
			txnBytes += len(b)
		}
		r.last = seq
	}
	return flush()
}

func (l *eventLog) publish(seq uint64) {
	l.last = seq
	l.visible.Store(seq)
	l.notifyMu.Lock()
	close(l.notify)
	l.notify = make(chan struct{})
	l.notifyMu.Unlock()
}

// changed returns a channel closed at the next publish.
func (l *eventLog) changed() <-chan struct{} {
	l.notifyMu.Lock()
	defer l.notifyMu.Unlock()
	return l.notify
}

// prepare validates and copies events, filling Level and UnixMs.
func (j *Journal) prepare(evs []messages.Event) ([]messages.Event, error) {
	out := slices.Clone(evs)
	now := j.opts.Clock.Now().UnixMilli()
	for i := range out {
		ev := &out[i]
		if err := checkEvent(ev); err != nil {
			return nil, fmt.Errorf("journal: event %d of %d: %w", i+1, len(evs), err)
		}
		if ev.UnixMs == 0 {
			ev.UnixMs = now
		}
	}
	return out, nil
}

func checkEvent(ev *messages.Event) error {
	if ev.Kind == "" || len(ev.Kind) > 128 {
		return invalid("kind", "must be 1-128 characters")
	}
	switch ev.Level {
	case "":
		ev.Level = messages.LevelInfo
	case messages.LevelInfo, messages.LevelWarn, messages.LevelError:
	default:
		return invalid("level", "%q is not info, warn or error", ev.Level)
	}
	size := len(ev.Kind) + len(ev.Stack) + len(ev.Service) + len(ev.Instance) +
		len(ev.Host) + len(ev.Actor) + len(ev.By) + len(ev.Message)
	for k, v := range ev.Fields {
		size += len(k) + len(v)
	}
	if size > MaxEventBytes {
		return invalid("event", "%d bytes of text exceeds %d", size, MaxEventBytes)
	}
	return nil
}

// Append adds events to the log and returns the sequence number of the
// last one (the first is last-len(evs)+1). Concurrent appends are
// group-committed; when Append returns the events are durable and visible.
// Append with no events waits for everything queued before it and returns
// the last sequence number. Events' Seq is assigned, a zero UnixMs is
// stamped from the clock, an empty Level is info. A batch too large for
// one badger transaction is committed in several.
func (j *Journal) Append(evs ...messages.Event) (uint64, error) {
	evs, err := j.prepare(evs)
	if err != nil {
		return 0, err
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return 0, ErrClosed
	}
	if j.events.failed.Load() {
		return 0, ErrEventLogFailed
	}
	r := &appendReq{events: evs, done: make(chan appendReply, 1)}
	j.events.appendCh <- r
	reply := <-r.done
	if len(evs) == 0 && reply.err == nil {
		return j.events.visible.Load(), nil
	}
	return reply.last, reply.err
}

// Emit queues one event without waiting for it to be committed: for actors
// that must not block on the disk. It blocks only when emitQueue requests
// are already waiting. A commit failure is logged (the event log then
// refuses appends).
func (j *Journal) Emit(ev messages.Event) error {
	evs, err := j.prepare([]messages.Event{ev})
	if err != nil {
		return err
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	if j.events.failed.Load() {
		return ErrEventLogFailed
	}
	j.events.appendCh <- &appendReq{events: evs}
	return nil
}

// LastSeq is the sequence number of the last durable event (0 = none yet).
func (j *Journal) LastSeq() uint64 { return j.events.visible.Load() }

// EventsAfter returns up to limit events with Seq > after, oldest first
// (limit <= 0 means DefaultReadLimit). `engenho events --since N` reads
// EventsAfter(N-1, ...). When retention has removed events after `after`,
// the first event returned has a Seq above after+1.
func (j *Journal) EventsAfter(after uint64, limit int) ([]messages.Event, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	upto := j.events.visible.Load()
	if after >= upto {
		return nil, nil
	}
	var out []messages.Event
	err := j.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{
			Prefix: []byte(PrefixEvent), PrefetchValues: true, PrefetchSize: min(limit, 100),
		})
		defer it.Close()
		for it.Seek(eventKey(after + 1)); it.Valid() && len(out) < limit; it.Next() {
			seq, err := seqFromKey(it.Item().Key(), PrefixEvent)
			if err != nil {
				return err
			}
			if seq > upto {
				break
			}
			var ev messages.Event
			if err := it.Item().Value(func(b []byte) error { return json.Unmarshal(b, &ev) }); err != nil {
				return decodeError(it.Item().KeyCopy(nil), err)
			}
			ev.Seq = seq
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: events after %d: %w", after, err)
	}
	return out, nil
}

// FirstSeq is the sequence number of the oldest event kept (0 = none).
func (j *Journal) FirstSeq() (uint64, error) {
	var first uint64
	err := j.read(func(txn *badger.Txn) error {
		var err error
		first, err = firstEventSeq(txn)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("journal: first event: %w", err)
	}
	return first, nil
}

func firstEventSeq(txn reader) (uint64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(PrefixEvent)})
	defer it.Close()
	it.Rewind()
	if !it.Valid() {
		return 0, nil
	}
	return seqFromKey(it.Item().Key(), PrefixEvent)
}
