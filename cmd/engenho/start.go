package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho start: boot the runtime of a stopped daemon (DMN-8).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return lifecycleCommand("start", "Boot the runtime of a stopped daemon (clears a hold)",
			func(ctx context.Context, c *control.Client) (control.LifecycleResult, error) { return c.Start(ctx) })
	})
}
