// Package sidecar is the sidecar actor (spec ACT-11, ACT-12): one command
// that runs beside a hibernating host's instance, or alone as a standalone
// worker. It is a child of its host actor, which starts it once the
// instance is healthy and stops it (SidecarStop) before the instance.
//
// Its decisions are a pure state machine (core.go): Step(config, state,
// event, now) returns the new state and the effects (messages/step) the
// actor shell performs: supervise.Apply runs the named timers, the events
// and the end; the core's own effect, Do, is a driver call in a goroutine
// bounded by a timeout. The shell reports each change to the host.
//
// Restarts: a run that ends with a non-zero exit (a crash), or any exit of
// an always_on sidecar, is restarted after a doubling backoff (2s, 4s, ...
// capped at 1m); a run of reset_after (1m) or more starts the ladder again.
// A non-always_on sidecar that exits 0 has done its work: it stays down
// (a hibernating worker then parks until its due time). A run longer than
// max_run is recycled: stopped (SIGTERM, grace, kill) and started again at
// once, without a backoff.
//
// Layer: actors (a leaf: no children). It imports supervise and the layers
// below (messages, configs, drivers).
package sidecar
