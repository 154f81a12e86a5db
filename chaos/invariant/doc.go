// Package invariant holds the chaos suite's invariant checkers (spec
// CHS-3). Each is a pure function of what the campaign asked for (Want)
// and what it observed (the daemon's status, the drivers' unfiltered
// instance list, the processes on the machine), returning the violations
// with their evidence.
//
// A violation is either a safety violation (something that must never
// happen: a stopped service started, a host awake on two nodes, a healthy
// replica restarted by a fault aimed elsewhere), reported at once, or a
// liveness one (the node has not converged yet), reported only when it
// outlasts the fault's recovery bound.
//
// Layer: chaos. It imports chaos/inject, messages and drivers.
package invariant
