package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho restart: stop, then start the runtime (DMN-8).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return lifecycleCommand("restart", "Drain the runtime and boot it again",
			func(ctx context.Context, c *control.Client) (control.LifecycleResult, error) { return c.Restart(ctx) })
	})
}
