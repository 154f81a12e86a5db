// Package storetest is the object-store conformance suite (spec DRV-8): one
// set of tests, run against every Store (fs, fake, s3 on gofakes3, s3 on
// MinIO), proving the semantics the lease (ACT-5) and checkpoints (ACT-9)
// rely on: create-only and If-Match puts that lose with
// ErrPreconditionFailed and leave the object untouched, exactly one winner
// among concurrent conditional writers, a failed upload that keeps the old
// object, large (multipart) objects, list by prefix, typed errors and
// cancellation.
//
// Layer: drivers. It imports drivers/objstore only; the stores' tests
// import it.
package storetest
