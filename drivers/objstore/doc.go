// Package objstore is the object-store contract (spec DRV-8) that hibernating
// hosts park their state in: get, put, delete, list by prefix, conditional
// put (create-only and If-Match) and conditional delete, with large objects
// streamed (multipart where the backend has it).
//
// The lease (ACT-5, package lease) and checkpoints (ACT-9, package
// checkpoint) are built on Store and on nothing else, so they behave the same
// on every backend: fs (the embedded default, a shared directory), s3 (any S3
// API server) and fake (in memory, with fault hooks for tests). storetest is
// the conformance suite every backend passes.
//
// Errors are *drivers.Error values whose kind is one of ErrNotFound,
// ErrPreconditionFailed, ErrTransient or ErrInvalid; match them with
// errors.Is.
//
// Layer: drivers. It imports the drivers package only (its error kinds);
// its backends, lease and checkpoint import it.
package objstore
