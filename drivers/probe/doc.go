// Package probe runs health probes against an instance and tracks its health
// status (spec SVC-7, SUP-14).
//
// Two halves:
//
//   - Prober.Probe runs one probe (exec, http or tcp) bounded by the probe
//     timeout and returns a Result whose Outcome is Healthy, Unhealthy or
//     Error (the probe could not run: neither healthy nor unhealthy).
//   - Tracker is a pure value: Observe(tracker, result, now) folds one result
//     into the health status (none, starting, healthy, unhealthy) following
//     start_period and retries, and NextProbe(tracker, now) says when the next
//     probe is due (start_interval while starting, interval after).
//
// The tracker only reports health. Deciding to restart belongs to the replica
// actor: Tracker.UnhealthyObservations counts consecutive counted results
// observed while unhealthy, and the replica restarts at the SUP-14 threshold
// (RestartThreshold, 2, unless the stack sets another; starting never
// counts; probe errors change nothing).
//
// Layer: drivers. It imports drivers (exec probes run through
// drivers.Driver) and drivers/clock; configs/stackfile and messages import
// its Config and Result.
package probe
