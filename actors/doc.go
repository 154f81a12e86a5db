// Package actors holds the supervision tree: every actor of engenho, one
// subpackage per kind (supervise is the layer they are built on; root,
// stack, service, replica, host, sidecar are the kinds).
//
// Layer: actors. Every subpackage imports only the layers below (messages,
// configs, drivers) and, inside actors/, only supervise (and its
// subpackages) and its direct children in the tree: root > stack, activator;
// stack > service > replica; activator > host > sidecar. internal/treetest
// is a test harness that wires whole trees. Nothing here imports runtime/.
package actors
