// Package cmd holds the executables; cmd/engenho is the daemon and its CLI.
//
// Layer: cmd, the top. Its tests check the whole tree (the layers, the rule
// IDs).
package cmd
