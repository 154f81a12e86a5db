// Package cmd holds the executables; cmd/engenho is the daemon and its CLI.
package cmd
