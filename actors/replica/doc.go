// Package replica is the replica actor: it owns one workload instance, from
// creation to deletion, and keeps it running and probed (spec SVC-6..SVC-11,
// SUP-12..SUP-16). Its decisions are a pure state machine (core.go):
// Step(config, state, event, now) returns the new state and the effects the
// actor shell performs (the messages/step contract): its own (DoOp, driver
// calls in goroutines bounded by the step timeout; DoProbe; StartWatch;
// FetchOutput) and the shared timers, events and end, which
// supervise.Apply performs.
//
// Layer: actors (a leaf: no children). It imports supervise,
// supervise/ladder and the layers below (messages, configs, drivers).
package replica
