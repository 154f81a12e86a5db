// Package supervise is the supervision layer every engenho actor is built
// on: OTP-style child specs, strategies and restart intensity (spec
// SUP-6..SUP-8) over hollywood actors, paced by the shared backoff ladder.
//
// How it sits on hollywood (see docs/decisions.md):
//   - Every actor is a hollywood actor spawned by Engine.Spawn and wrapped in
//     a cell. The cell recovers every panic of the actor's Receive, so no
//     panic ever reaches hollywood: hollywood's own restart machinery
//     (MaxRestarts, RestartDelay, which sleeps in real time) is never used.
//     The parent owns every restart decision.
//   - The tree is engenho's, not hollywood's SpawnChild tree: hollywood's
//     cleanup stops children in map order and blocks on each, while SUP-7
//     wants reverse start order, each within a budget, without blocking the
//     supervisor. Parent links, paths and generations live in the cells.
//   - Stopping is a message protocol: the parent sends messages.Shutdown,
//     arms a budget timer on the clock, and on expiry kills the child with
//     hollywood's non-graceful Engine.Stop. An actor ends itself with
//     messages.ExitSelf; its cell stops its children first, then calls
//     Engine.Stop on itself, and reports messages.ChildExited to the parent
//     from hollywood's Stopped notification, after hollywood has removed it
//     from the registry.
//   - An actor that must finish work before it ends (a hibernating host's
//     final checkpoint) calls Handle.TrapShutdown: it then receives
//     messages.Shutdown itself and ends with Exit when done, still within
//     the budget its supervisor enforces.
//   - Each incarnation gets a fresh generation number in its PID, so a late
//     message from an earlier one never reaches its successor.
//
// Snapshots, not questions (SUP-3): Tree holds every live actor's node and
// Board the latest status of every stack, service and replica. The actors
// write them; the control socket, metrics and the edge copy from them
// without ever asking, or waiting on, an actor. They live here, with their
// writers.
//
// A cell panics on messages.InjectPanic (a chaos fault) only when the
// System allows it (AllowInjectPanic, set by the chaos build's hooks).
//
// Layer: actors, the bottom of it. It imports supervise/ladder, messages
// and drivers/clock; every actor imports it, and runtime/ reads its Tree and
// Board.
package supervise
