// Package step is the one contract every pure core follows: the replica,
// service, host, sidecar and activator cores and the daemon lifecycle.
//
// A core is a function Step(cfg, state, event, now) (State, []Effect). It
// reads no clock, does no I/O and returns no error: a refusal is an effect
// (Refuse). The effects every core shares are declared here: Arm and
// Cancel for named timers, Emit for events, Refuse and End. A core's own
// effects (a driver call, a spawn, opening a gate) are its own types that
// embed Is. The actor's shell performs them: actors/supervise.Apply runs
// the shared ones the same way for every actor and hands the core's own to
// the actor.
//
// Layer: messages. It imports only time and messages.
package step
