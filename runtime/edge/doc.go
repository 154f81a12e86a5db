// Package edge is the daemon's HTTP edge (spec ACT-1, ACT-3, ACT-7, SEC-4):
// one listener that routes every request by its Host header.
//
//   - A host of a hibernating service goes to its host actor: while the host
//     is awake the request is proxied straight to its instance; while it is
//     asleep the edge asks the host actor to wake (HostWake) and waits at
//     most the wake timeout (30s) for the answer, then proxies or answers
//     503 with Retry-After.
//   - A host of a non-hibernating service (x-engenho.host) is proxied to one
//     of its in-rotation replicas, read from the status board's snapshots.
//   - Any other host gets 404: never another host's backend.
//
// Nothing on the request path waits on a busy actor. Routes are a published
// copy-on-write Table; each hibernating host has a Gate (actors/host), a
// lock-free admission word the host actor opens when it serves and closes
// when it goes to sleep. A request enters the gate (one atomic compare-and-swap) before it
// is proxied and leaves it when its response, or its upgraded connection (a
// WebSocket), has ended, so the host's in-flight count is exact and the host
// can close the gate only when nothing is in flight (ACT-7). Requests marked
// X-Engenho-Sidecar never enter the gate (they are not activity), never wake
// a sleeping host, and lose the header before they are proxied.
//
// Request headers and bodies are bounded (SEC-4): MaxHeaderBytes (64 KiB)
// and MaxBodyBytes (64 MiB) by default.
//
// Layer: runtime. It imports actors/host (Gate, Route) and
// actors/supervise (the status Board), which it reads and never waits on,
// plus messages, configs/stackfile and drivers/clock.
package edge
