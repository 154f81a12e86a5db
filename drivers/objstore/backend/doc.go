// Package backend opens the object store a daemon is configured with (fs,
// the embedded default, or s3) from one Config, so the daemon's config
// section maps straight onto it (see docs/objstore.md for the keys).
//
// Layer: drivers. It imports drivers/objstore, its fs and s3 backends and
// drivers/clock; only runtime/daemon imports it.
package backend
