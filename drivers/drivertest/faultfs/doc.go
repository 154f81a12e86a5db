// Package faultfs is a loopback FUSE file system that tests and the chaos
// campaign put between a daemon (or a journal) and its data directory.
// Every operation passes through to a backing directory; while writes are
// switched to fail, each one that would change the disk (a write, an fsync, a create, a rename, an
// unlink, a truncate, an attribute change) fails with EIO, as on a disk
// that is dying, and reads go on working (fault kind disk.eio).
//
// The failure is below the daemon: its own write(2), fsync(2), msync(2)
// and rename(2) calls get EIO from the kernel, so badger, the state files
// and the logs meet it the way they would on real hardware.
//
// Layer: drivers, test support like drivertest: the journal's tests and
// the chaos campaign import it, the daemon never does.
package faultfs
