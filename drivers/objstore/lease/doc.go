// Package lease is the per-host single-writer lease (spec ACT-5) that keeps
// two daemons sharing a bucket from running the same hibernating host at
// once (ACT-14). It is built on objstore.Store alone, so it behaves the same
// on fs, s3 and fake.
//
// The lease is one object, PREFIX/HOST/lease.json, holding a Record
// (holder, node, epoch, expiry, ttl, released). The rules:
//
//   - Acquire an absent lease with a create-only put (epoch 1).
//   - A released lease is taken at once with a put conditional on its ETag
//     (epoch + 1).
//   - A lease held by someone else is taken over only when BOTH its
//     recorded expiry has passed on the taker's clock AND the taker has seen
//     the same ETag, unchanged, for a full TTL measured on its own clock
//     since it first saw it: the holder's clock is never trusted alone. A
//     holder clock running far ahead can delay a takeover by at most one
//     more TTL. Until then Acquire fails with a *HeldError carrying the
//     time left (the edge answers 503 with Retry-After = left + 1s).
//   - Renew (the caller does it every TTL/3) is a put conditional on the
//     ETag the holder last wrote. Any failure, or a renew attempted after
//     ValidUntil, loses the lease for good (ErrLost): the caller stands
//     down. The holder must have stopped the host by ValidUntil, the
//     start of its last successful write plus TTL on its own clock: a taker
//     first sees that write after it started, so its TTL wait ends later.
//   - Release is a put conditional on the ETag that marks the record
//     released, never a conditional DELETE (MinIO and gofakes3 ignore
//     If-Match on DELETE). A release whose answer was lost is recognised on
//     retry.
//
// The decisions are the pure function Decide; Manager and Lease are the thin
// shell doing the reads and writes, with every timestamp from a
// clock.Clock.
//
// Layer: drivers. It imports drivers/objstore and drivers/clock; the host
// actor, checkpoint and chaos/inject import it.
package lease
