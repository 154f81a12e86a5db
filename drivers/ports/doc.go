// Package ports hands out host ports for instances from a configured range
// (engenho issue 17, "Port range for rollouts"; rule SVC-24).
//
// Two halves:
//
//   - A pure core (core.go): State holds the range, the port handed out
//     last and the ports in use; Candidates lists, in order, the ports the
//     allocator tries next: those after the last one handed out, wrapping
//     around to the low end, skipping ports in use. So a port that was just
//     released is the last candidate, not the first.
//   - A thin shell (allocator.go): Allocator walks the candidates and
//     probes each (listen on 127.0.0.1:PORT, then close, as before); a port
//     that is in use by someone else ("address already in use") is skipped
//     and the next tried. When none is left, Take fails with ErrExhausted:
//     "no free port left in the range LOW-HIGH".
//
// Layer: drivers. It imports nothing from the module; the process driver,
// configs/daemonconfig (the range's syntax) and runtime/daemon (wiring)
// import it, the service actor uses it through its own HostPorts port.
package ports
