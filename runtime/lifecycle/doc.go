// Package lifecycle is the daemon's lifecycle as a pure state machine (spec
// DMN-6..DMN-8, DMN-14, SUP-8) on the one Step/Effect contract
// (messages/step): Step(state, event) returns the next state and the
// effects the daemon loop must perform, at most one of the lifecycle's own.
// Nothing here does I/O, reads a clock or starts a goroutine; the loop feeds
// events (phase results, operator commands, signals, timer expiries) and
// performs the effects (run a boot phase, drain, release the journal,
// schedule a retry, exit).
//
// A refused transition returns the state unchanged and one step.Refuse with
// the reason; Refusal makes it the *Refused error naming the state, the
// event and the reason, which the loop answers to the operator.
//
// State is a plain value. Its exported fields are everything the control
// socket reports (state name, boot phase, retry mode and delay, last error,
// stop epoch, boot attempt), so the loop can publish each new State as an
// immutable snapshot (DMN-13). Step never mutates a slice it was given; it
// replaces it.
//
// The full transition table, with the choices made where the spec is silent,
// is in docs/daemon.md (section Lifecycle) and in step_table_test.go.
//
// Layer: runtime. Of the module it imports only messages/step (a pure state
// machine); runtime/control and runtime/daemon import it.
package lifecycle
