// Package fake is an in-memory instance driver with fault hooks (spec
// DRV-11) for unit tests, scale benchmarks and the chaos suite.
//
// Instances are records: Start makes one running with StartedAt =
// clock.Now(); nothing runs. What a run does is a Program: the default reads
// a `sh -c SCRIPT` command with a tiny shell subset (echo, sleep, exit,
// trap ” TERM), so the conformance suite's scripts behave as they would
// under sh, and any other command runs until stopped. Sleeps, latency and
// DieAt go through the injected clock.Clock, so with clock.Fake a test
// crosses minutes in microseconds.
//
// Faults: FailNext (the next N calls of an op fail with a kind), FailRate (a
// seeded random share of calls fail), SetLatency, HangNext (block until the
// caller's ctx ends), Die and DieAt (a run ends; Watch fires), Restart (a
// restart nobody asked for: new StartedAt), ForceState (report starting,
// restarting, unknown...), SetExec (script exec probe results), SetAddress,
// SetProgram. Counters (Calls, Starts) let a
// test prove what the code under test did, e.g. that no healthy replica was
// restarted. Everything is deterministic under Options.Seed given the same
// sequence of calls.
//
// It scales to tens of thousands of instances: no goroutine per instance,
// one mutex, watches kept in maps, a timer only while a program sleeps.
//
// Layer: drivers. It imports drivers and drivers/clock only.
package fake
