// Package treetest builds a whole supervision tree on the fake driver and a
// fake clock for the actors' tests and benchmarks: the engine, the root, an
// in-memory journal store, in-memory Ports in place of the node's balancer,
// an event recorder and helpers to apply stacks and wait for convergence.
//
// Layer: actors (a test harness: only _test.go files import it). It wires
// a whole tree, as runtime/daemon does, so it may import any actor and the
// layers below, never runtime/.
package treetest
