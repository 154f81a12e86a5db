// Package actors holds the supervision tree: every actor of engenho, one
// subpackage per kind (supervise is the layer they are built on; root,
// stack, service, replica, host, sidecar are the kinds).
package actors
