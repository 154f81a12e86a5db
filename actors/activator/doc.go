// Package activator is the node's activator actor (spec SUP-1, ACT-1..
// ACT-14): the root's child named "activator". It owns one host actor per
// hibernating host and per standalone worker, created, updated and retired
// from the HostDefinition and HostRemove messages the stacks send through
// the root.
//
// It runs the sweep (every 10s): a sleeping host whose due time came is
// woken with no request (ACT-10), every host is nudged to retry a pending
// stop or an owed lease release (ACT-8), and owed releases of hosts without
// an actor are retried here until they land or the lease has expired.
//
// On shutdown (it traps messages.Shutdown) nothing wakes any more and every
// host is put to sleep at once, in parallel, with its final checkpoint and
// lease release; the activator ends when all are asleep or, at the latest,
// a few seconds before its shutdown budget (50s, inside the daemon's 60s
// drain) runs out (ACT-13).
//
// The activator keeps the latest definition of every host in a memo that
// survives its own restarts, so a restarted activator rebuilds its hosts
// without waiting for the next deployment.
//
// Its decisions are a pure core on the one Step/Effect contract
// (messages/step): core.go holds Step(cfg, state, event, now), which
// returns the next state and the effects (start, tell, retire or kill a
// host actor, write the memo, retry an owed release, the sweep and drain
// timers, events, the end). The actor (actor.go) feeds it its messages
// and performs the effects with supervise.Apply; its timers are
// supervise.Timers.
//
// Layer: actors. Of the actors it imports supervise and its child host,
// plus the layers below; its ports (Journal, host.Routes,
// supervise.Emitter, Metrics) are filled by runtime/daemon.
package activator
