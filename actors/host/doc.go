// Package host is the host actor (spec ACT-2..ACT-10, ACT-13): one
// hibernating host (or standalone worker), asleep → waking → awake →
// stopping → asleep, every transition an event.
//
// The decisions are a pure state machine (core.go, wake.go, awake.go,
// stop.go): Step(config, state, event, now) returns the new state and the
// effects (messages/step) the actor shell (actor.go, ops.go) performs.
// supervise.Apply runs the shared ones: named timers (step.Arm,
// step.Cancel), events (step.Emit) and the end (step.End). The host's own
// are small types: Do and Side run operations in goroutines bounded by a
// timeout that report back by message (driver calls, the lease,
// checkpoints, readiness checks); Answer, OpenGate, TryCloseGate,
// SealGate, CheckIdle, StartSidecars, StopSidecars and RecordWake.
//
// A wake, in order (ACT-4): re-read the definition, acquire the lease
// (renewed every TTL/3 from then on), claim the manifest and restore the
// data directory unless the local copy is current (none anywhere = a first
// boot, which runs the seed), start the instance with ENGENHO_DATA_DIR,
// wait until it is ready (OpReadyCheck: its healthcheck, or a TCP connect,
// every 5ms for the first second, then doubling up to start_interval; the
// wait is the wake step "ready"), start the sidecars, open the gate and
// answer every waiter. Requests arriving meanwhile coalesce on it (ACT-3).
//
// A sleep, in order (ACT-8): sidecars (SIGTERM, 5s, kill), the instance
// (SIGTERM, 20s, kill), the final checkpoint, the due time, the lease
// release. A stop not proven keeps the lease and is retried by the sweep;
// a failed release is owed (journal) and retried. A lost lease never
// checkpoints again (ACT-6).
//
// Layer: actors. Of the actors it imports supervise and its child sidecar,
// plus the layers below; its Gate and Route are read by runtime/edge, and
// its ports (Journal, Routes, Metrics, and supervise.Emitter for events)
// are filled by runtime/daemon.
package host
