// Package root is the root supervisor of the tree (spec SUP-1): its
// children are one stack actor per deployed stack and the node's activator.
// It routes desired state and operator requests to the right stack.
package root
