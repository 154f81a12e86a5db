package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho stop [--hold]: drain the runtime, keep the daemon up (DMN-4,
// DMN-8).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var hold bool
		cmd := lifecycleCommand("stop", "Drain the runtime and keep the daemon up",
			func(ctx context.Context, c *control.Client) (control.LifecycleResult, error) {
				return c.Stop(ctx, control.StopArgs{Hold: hold})
			})
		cmd.Flags().BoolVar(&hold, "hold", false, "also come up stopped after a relaunch, until start")
		return cmd
	})
}
