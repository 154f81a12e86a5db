// Package backend opens the object store a daemon is configured with (fs,
// the embedded default, or s3) from one Config, so the daemon's config
// section maps straight onto it (see docs/objstore.md for the keys).
package backend
