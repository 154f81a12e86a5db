// Package stack is the stack actor: it owns one deployed stack, starts a
// service actor per service, hands each its current and previous
// definition, relays dependency status between services (SVC-18) and
// publishes whether the stack has converged.
//
// Layer: actors. Of the actors it imports supervise and its child service,
// plus messages.
package stack
