package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// lifecycleCommand builds start, stop, restart, retry and exit: send the
// operator's event, print the state the daemon is in right after.
func lifecycleCommand(use, short string, send func(context.Context, *control.Client) (control.LifecycleResult, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, func(s *session) error {
				res, err := send(s.ctx, s.c)
				if err != nil {
					return err
				}
				return s.show(res, func() string { return formatLifecycleResult(cmd.Name(), res) })
			})
		},
	}
}

// formatLifecycleResult: "stop accepted: draining/tree>stopped, epoch 3".
func formatLifecycleResult(op string, res control.LifecycleResult) string {
	return fmt.Sprintf("%s accepted: %s\n", op, lifecycleLine(res.State))
}

// formatReconfigure says whether the config was reloaded now, what applied
// in place and what needs a restart; a refused config is an error (exit 1)
// and never gets here.
func formatReconfigure(res control.ReconfigureResult) string {
	if !res.Reloaded {
		return formatLifecycleResult("reconfigure", control.LifecycleResult{State: res.State}) +
			"the config is read by the boot; engenho status shows how it goes\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "config reloaded: %s\n", lifecycleLine(res.State))
	if len(res.Applied) == 0 {
		b.WriteString("nothing to apply in place\n")
	} else {
		b.WriteString("applied in place:\n")
		for _, a := range res.Applied {
			b.WriteString("  " + a + "\n")
		}
	}
	if len(res.NeedsRestart) > 0 {
		b.WriteString("needs a restart: " + strings.Join(res.NeedsRestart, ", ") + "\n")
	}
	return b.String()
}
