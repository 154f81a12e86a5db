// Package fs is the embedded object store (spec DRV-9): a directory on a
// local or shared file system. Two daemons pointed at the same directory see
// one bucket.
//
// Layout under the store directory:
//
//	FORMAT            "engenho-objstore-fs 1"
//	lock              flock(2) target serialising every write
//	tmp/              bodies being written (removed on failure; stale ones
//	                  older than a day are swept at Open)
//	objects/a/b~o     the object with key "a/b"
//
// An object file starts with a one-line header holding its ETag, the hex
// SHA-256 of the body, followed by the body. Every object name ends in "~o";
// '~' is not allowed in keys, so an object never collides with a directory
// ("a" and "a/b" can both exist).
//
// A put streams the body to a temp file, hashing it, and fsyncs it; then,
// holding an in-process mutex and an exclusive flock on the lock file (so it
// is atomic across processes too), it checks the condition against the
// current object's header, renames the temp file into place and fsyncs the
// directory. Readers take no lock: an open file keeps the content it had, so
// a Get always sees one whole object and its matching ETag.
//
// Layer: drivers. It imports drivers, drivers/objstore and drivers/clock.
package fs
