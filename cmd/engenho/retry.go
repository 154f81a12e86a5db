package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho retry: boot a failed boot now (DMN-8).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return lifecycleCommand("retry", "Boot a failed boot now, without waiting for its backoff",
			func(ctx context.Context, c *control.Client) (control.LifecycleResult, error) { return c.Retry(ctx) })
	})
}
