// Package control is the daemon's control socket (spec DMN-11..DMN-14,
// SEC-1, SEC-3, SEC-4): the protocol, its server and its client.
//
// The protocol is newline-delimited JSON over a unix socket
// (DATA/control/engenho.sock). A request is one line,
// {"id": 7, "op": "status", "args": {...}}; every line of its answer carries
// the id. Streaming ops (events, logs, apply with wait) send items with
// "more": true, and every request ends with exactly one final line holding
// "result" or "error" ({"code": "...", "message": "..."}, codes in
// protocol.go). Requests may be pipelined; answers may come back in any
// order.
//
// The server (NewServer, Serve, Close) binds the socket 0600 (0660 with a
// configured group), checks each peer's SO_PEERCRED credentials (root, the
// daemon's uid, or the group), bounds request lines (1 MiB), connections
// (64) and requests in flight per connection (16), times out idle
// connections on the injected clock, and validates every op's arguments
// (names, allow-lists, bounds) before the Handler sees them. The daemon
// implements Handler; package controltest has a fake for tests.
//
// The client (Dial) makes typed calls, multiplexed on one connection;
// streams are delivered to callbacks.
//
// docs/control.md is the operator's reference: every op, its args and
// result, the error codes, the limits and the CLI.
//
// Layer: runtime. It imports runtime/lifecycle, actors/supervise (tree
// nodes), messages, configs/stackfile and drivers/clock; chaos/ and
// cmd/engenho use its client.
package control
