// Package metrics serves the daemon's Prometheus metrics (spec DMN-19) on an
// optional listen address: actors by kind and state, restarts, backoff
// ladder positions, rollouts, wakes with step timings, lease operations and
// journal write latency.
//
// A Metrics has its own registry (never the global default). Events are
// counted by small methods the daemon and the actors call (LeaseOp,
// WakeStep, RolloutEvent, ObserveJournalWrite); every method is safe on a
// nil *Metrics, so callers need not check whether metrics are on. State is
// read at scrape time from snapshot functions the daemon provides (the
// supervision tree's nodes, the services' published statuses), so a scrape
// never asks an actor anything. Label values are bounded: kinds, states,
// stacks, services and slots, never instance ids; free-form values from
// callers outside a known set are counted as "other".
//
// The reference of every metric is docs/metrics.md.
//
// Layer: runtime. It imports actors/supervise (tree nodes) and messages.
package metrics
