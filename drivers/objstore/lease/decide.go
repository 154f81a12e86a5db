package lease

import (
	"time"

	"github.com/engenho/engenho/drivers/objstore"
)

// Identity is who is asking: this daemon run on this node.
type Identity struct {
	Holder string
	Node   string
}

// Holds reports whether r was written by this identity.
func (id Identity) Holds(r Record) bool { return r.Holder == id.Holder && r.Node == id.Node }

// Current is what a read of lease.json found.
type Current struct {
	Exists bool
	ETag   string
	// Record is meaningful when Exists and not Corrupt.
	Record Record
	// Corrupt: the object exists but is not a valid record. It is treated
	// like a holder that never renews: taken over after a full TTL.
	Corrupt bool
}

// Sighting is a taker's memory of a lease held by someone else: the ETag
// and when (on the taker's clock) it first saw it.
type Sighting struct {
	ETag  string
	Since time.Time
}

// Action is what Decide says to do.
type Action int

const (
	// Wait: someone else holds it; come back after Left.
	Wait Action = iota
	// Create the absent lease (create-only put).
	Create
	// Take a released or expired lease (put on its ETag, epoch + 1).
	Take
	// Resume a lease this very holder already holds (put on its ETag,
	// same epoch): our own earlier write whose answer was lost.
	Resume
)

func (a Action) String() string {
	return [...]string{"wait", "create", "take", "resume"}[a]
}

// Decision is Decide's answer.
type Decision struct {
	Action Action
	// Next and Cond are the write to make (all actions but Wait).
	Next Record
	Cond objstore.Cond
	// Left is how long until a takeover is allowed (Wait only).
	Left time.Duration
	// Sighting is the taker's updated memory of this lease, to keep for
	// the next call (zero after anything but Wait).
	Sighting Sighting
}

// Decide is the acquire rule of ACT-5 as a pure function of the time on the
// taker's clock, who it is, its TTL, what the read found and what it saw
// before.
func Decide(now time.Time, self Identity, ttl time.Duration, cur Current, seen Sighting) Decision {
	fresh := Record{
		Version: RecordVersion, Holder: self.Holder, Node: self.Node, Epoch: 1,
		Expiry: now.Add(ttl), TTLMillis: ttl.Milliseconds(),
	}
	if !cur.Exists {
		return Decision{Action: Create, Next: fresh, Cond: objstore.CreateOnly()}
	}
	rec := cur.Record
	take := func(epoch uint64) Decision {
		next := fresh
		next.Epoch = epoch
		return Decision{Action: Take, Next: next, Cond: objstore.IfMatch(cur.ETag)}
	}
	switch {
	case !cur.Corrupt && rec.Released:
		return take(rec.Epoch + 1)
	case !cur.Corrupt && self.Holds(rec):
		next := fresh
		next.Epoch = rec.Epoch
		return Decision{Action: Resume, Next: next, Cond: objstore.IfMatch(cur.ETag)}
	}
	if seen.ETag != cur.ETag {
		seen = Sighting{ETag: cur.ETag, Since: now}
	}
	deadline := takeoverAt(seen, ttl, cur)
	if !now.Before(deadline) {
		if cur.Corrupt {
			return take(1)
		}
		return take(rec.Epoch + 1)
	}
	return Decision{Action: Wait, Left: deadline.Sub(now), Sighting: seen}
}

// takeoverAt is when a taker may take a lease held by someone else: a full
// TTL (the longer of ours and the holder's) after it first saw this ETag,
// and not before the recorded expiry, though that expiry (the holder's
// clock) can push the time out by at most one more TTL.
func takeoverAt(seen Sighting, ttl time.Duration, cur Current) time.Time {
	if !cur.Corrupt {
		ttl = max(ttl, cur.Record.TTL())
	}
	own := seen.Since.Add(ttl)
	if cur.Corrupt {
		return own
	}
	expiry := cur.Record.Expiry
	if limit := own.Add(ttl); expiry.After(limit) {
		expiry = limit
	}
	if expiry.After(own) {
		return expiry
	}
	return own
}

// Renewed is the record a holder writes to renew: same holder and epoch,
// expiry TTL from now on its clock.
func Renewed(held Record, now time.Time, ttl time.Duration) Record {
	held.Expiry = now.Add(ttl)
	held.TTLMillis = ttl.Milliseconds()
	held.Released = false
	return held
}

// ReleasedRecord is the record a holder writes to release.
func ReleasedRecord(held Record, now time.Time) Record {
	held.Expiry = now
	held.Released = true
	return held
}
