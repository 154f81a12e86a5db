// Package treetest builds a whole supervision tree on the fake driver and a
// fake clock for tests, benchmarks and the chaos suite: the engine, the
// root, an in-memory journal store, an event recorder and helpers to apply
// stacks and wait for convergence.
package treetest
