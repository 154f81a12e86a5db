// Package root is the root supervisor of the tree (spec SUP-1): its
// children are one stack actor per deployed stack and the node's activator.
// It routes desired state and operator requests to the right stack.
//
// Layer: actors, the top of the tree. Of the actors it may import supervise
// and its children stack and activator (it imports stack; runtime/daemon
// hands it the activator's spec), plus messages.
package root
