package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/journal"
)

// engenho journal-check [--salvage] DIR (hidden): the child process the
// daemon runs to check a journal before it opens it, and `reinit journal`
// to salvage one (REL-5). Badger may panic on a damaged journal in
// goroutines of its own; here that ends this process, not the daemon.
// Output: JSON lines (journal.CheckMain).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:                "journal-check [--salvage] DIR",
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				if code := journal.CheckMain(args, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
					os.Exit(code)
				}
				return nil
			},
		}
	})
}
