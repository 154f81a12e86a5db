// Package ladder is the backoff ladder shared by workload restarts and actor
// restarts (spec SUP-10..SUP-13, SUP-17): a pure ledger of consecutive
// failures per generation key, with no I/O and no clock of its own. Callers
// pass the time in and schedule the next attempt themselves.
//
// Layer: actors (inside supervise). It imports messages only (the Ledger
// entry it charges); supervise, the replica and service actors and
// runtime/daemon import it.
package ladder
