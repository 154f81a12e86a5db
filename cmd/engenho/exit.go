package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho exit: drain and end the daemon process (DMN-8).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return lifecycleCommand("exit", "Drain the runtime and end the daemon process",
			func(ctx context.Context, c *control.Client) (control.LifecycleResult, error) { return c.Exit(ctx) })
	})
}
