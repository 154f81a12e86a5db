// Package fake is an in-memory object store with fault hooks (spec DRV-11),
// for unit tests, scale benchmarks and the chaos suite. It keeps the same
// semantics as the real stores (it passes storetest) and adds ways to make
// it misbehave: fail the next N calls of an operation with a chosen error
// kind, fail calls at random with a seeded probability, add latency measured
// on a clock.Clock, hang calls until their context is cancelled, force the
// next conditional writes to lose with a precondition failure, cut a put off
// after some bytes, and tamper with a stored body behind the ETag's back.
//
// ETags are drawn from a generator seeded by Options.Seed, and random faults
// from another, so a run is repeatable for a given seed and call order.
//
// Layer: drivers. It imports drivers/objstore and drivers/clock.
package fake
