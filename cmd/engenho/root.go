package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries a process exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}

// subcommands registers every subcommand; each file of this package adds
// its own in an init function.
var subcommands []func() *cobra.Command

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "engenho",
		Short:         "engenho keeps a node's workloads running, healthy, current and reachable",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	setupClientRoot(root) // client.go: --socket, --data-dir, --json, exit 2 on usage errors
	for _, sub := range subcommands {
		root.AddCommand(sub())
	}
	return root
}

func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the version",
			Args:  cobra.NoArgs,
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "engenho", version) },
		}
	})
}
