// Package inject holds the chaos suite's in-daemon fault hooks (spec
// CHS-2): a drivers.Driver wrapper and an objstore.Store wrapper whose
// faults are armed at run time through the daemon's `chaos` control op.
//
// A daemon wraps its drivers and its object store only when its config
// sets chaos.enabled; without it none of this code is on any call path.
// Faults are Rules held by one Faults registry per daemon: fail the next N
// calls of an operation with an error kind, add latency, time out, hang
// until the caller's context ends, or (object store) lose conditional
// writes as if another writer had won. ExpireLease rewrites a host's lease
// record so that it has expired.
//
// Planted bugs (for the suite's self-test, CHS acceptance) are read from
// ENGENHO_CHAOS_PLANT when the registry is made: they only exist in a
// daemon with chaos enabled and that variable set.
//
// Layer: chaos. It imports drivers, drivers/objstore, drivers/objstore/lease
// and drivers/clock. Only chaos/ and files tagged chaos import chaos
// packages (cmd/engenho/chaos_hooks.go puts these hooks in the daemon).
package inject
