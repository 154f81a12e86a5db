// Package balancer is the daemon's TCP balancer for published ports (spec
// SVC-22, SVC-16).
//
// A Balancer owns one listener per published port, keyed by a name the
// caller chooses (e.g. "shop/web/8080"). Each accepted connection is
// forwarded to one in-rotation backend chosen by least connections, ties
// broken round-robin. A backend that refuses a dial is marked suspect for a
// short time and the next best backend is tried before the client is given
// up on.
//
// The rotation changes only through SetBackends and Drain, called by the
// service and replica actors. A backend leaving the rotation keeps its open
// connections for a drain timeout (default 10s), after which they are
// closed. Stats reports per port and per backend: accepted, active, failed
// and the recent connection rate.
//
// Every connection costs two goroutines (one per direction) and a port one
// more for its accept loop; Close stops them all.
//
// Layer: runtime. It imports drivers/clock only; runtime/daemon adapts it
// to service.Ports.
package balancer
