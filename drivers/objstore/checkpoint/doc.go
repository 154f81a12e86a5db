// Package checkpoint parks a hibernating host's data directory in the
// object store (spec ACT-9) and brings it back, built on objstore.Store
// alone.
//
// Objects, per host:
//
//	PREFIX/HOST/manifest.json          which checkpoint is current (+ older ones kept)
//	PREFIX/HOST/ckpt/TIME-RANDOM.tar   one archive per checkpoint, never overwritten
//	PREFIX/HOST/ckpt/TIME-RANDOM.cas.json  or: one index per Cas checkpoint
//	PREFIX/HOST/blobs/SHA256           a Cas checkpoint's file contents, once each
//
// Cas (the default format, ACT-15) is incremental: the index lists every
// entry with its sha256 and only blobs the store lacks are uploaded, then
// verified, before the manifest switch; restore verifies every blob; GC
// deletes blobs no kept checkpoint names. SQLite databases go as consistent
// snapshots (ACT-16, drivers/sqlitesnap). The rest of this comment
// describes the tar formats, whose archives old stores may still hold.
//
// Save archives the directory (tar, optionally gzip) and streams it to a new
// unique key while hashing it (sha256), reads it back and verifies the
// checksum, and only then switches the manifest to it with a put
// conditional on the manifest ETag the holder last saw. A crash or failure
// anywhere before the switch leaves the previous checkpoint current and
// restorable. Old archives beyond Keep are deleted after the switch.
//
// Restore fetches the current archive, extracts it into a temporary sibling
// directory while hashing it, verifies size and checksum, and only then
// renames it into place: a corrupted object is never served.
//
// Fencing (ACT-6). A holder must not checkpoint over state another node may
// now own. The manifest ETag is the fence: right after acquiring the lease
// the holder calls Claim, which rewrites the manifest (stamping the lease
// holder and epoch) and returns the Head whose ETag every later Save is
// conditional on. When another node takes the lease it claims too, the ETag
// changes, and the stale holder's next Save fails with ErrFenced instead of
// switching the manifest. Use it like this:
//
//	l, err := leases.Acquire(ctx, host)                      // lease epoch E
//	head, err := cps.Claim(ctx, host, checkpoint.WriterOf(l)) // before restoring
//	if !cps.Fresh(head, dir) { _, err = cps.Restore(ctx, head, dir) } // ErrNoCheckpoint: first boot
//	...
//	if l.Valid() { head, _, err = cps.Save(ctx, head, dir) }  // ErrFenced: stand down
//	...
//	head, _, err = cps.Save(ctx, head, dir); l.Release(ctx)   // at sleep
//
// Claim before Restore matters: whatever a stale holder saved before the
// claim is what the new holder restores; nothing it tries after lands.
// Fresh compares a marker beside the data directory (DIR.checkpoint) with
// the current checkpoint, so a warm local copy is used only if it is the
// state the manifest points at (this node saved or restored it last).
//
// Layer: drivers. It imports drivers/objstore, drivers/objstore/lease,
// drivers/sqlitesnap and drivers/clock.
package checkpoint
