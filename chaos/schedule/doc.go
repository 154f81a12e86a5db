// Package schedule turns a seed into a chaos campaign's fault schedule
// (spec CHS-4): which faults, in which order, with which parameters. It is
// pure: the same seed, fault count, mix and available components give the
// same schedule, byte for byte, on any machine.
//
// A schedule names targets abstractly (an actor class, a service, a pick
// number); the campaign resolves them against the live daemon when the
// fault is injected, so a replay hits the same kinds of target in the
// same order.
//
// Layer: chaos. It imports nothing from the module.
package schedule
