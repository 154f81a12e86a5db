package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho service stop|start STACK/SERVICE: set or lift the durable stopped
// intent (SVC-10).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		cmd := &cobra.Command{
			Use:   "service stop|start|retry STACK/SERVICE",
			Short: "Stop a service durably (instances kept) or start it again",
			Args:  usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, _ []string) error {
				return usageError(fmt.Errorf("want a subcommand: engenho service stop|start STACK/SERVICE"))
			},
		}
		cmd.AddCommand(
			serviceIntentCommand("stop", "Stop a service's instances and keep them stopped", (*control.Client).ServiceStop),
			serviceIntentCommand("start", "Lift a service's stopped intent", (*control.Client).ServiceStart),
			serviceRetryCommand(),
		)
		return cmd
	})
}

func serviceIntentCommand(use, short string, send func(*control.Client, context.Context, control.ServiceRef) (control.ServiceIntentResult, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use + " STACK/SERVICE",
		Short: short,
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseServiceRef(args[0])
			if err != nil {
				return err
			}
			return withClient(cmd, func(s *session) error {
				res, err := send(s.c, s.ctx, ref)
				if err != nil {
					return err
				}
				return s.show(res, func() string { return formatIntent(res) })
			})
		},
	}
}

// serviceRetryCommand: engenho service retry STACK/SERVICE clears the
// service's backoff so the next pass makes a fresh attempt (SUP-17).
func serviceRetryCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "retry STACK/SERVICE",
		Short: "Clear a service's restart backoff: the next attempt runs now",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseServiceRef(args[0])
			if err != nil {
				return err
			}
			return withClient(cmd, func(s *session) error {
				res, err := s.c.ServiceRetry(s.ctx, ref)
				if err != nil {
					return err
				}
				return s.show(res, func() string { return fmt.Sprintf("%s/%s: backoff cleared\n", res.Stack, res.Service) })
			})
		},
	}
}

// formatIntent: "web/api: stopped" or "web/api: already running".
func formatIntent(res control.ServiceIntentResult) string {
	state := "started"
	if res.Stopped {
		state = "stopped"
	}
	if !res.Changed {
		state = "already " + map[bool]string{true: "stopped", false: "started"}[res.Stopped]
	}
	return fmt.Sprintf("%s/%s: %s\n", res.Stack, res.Service, state)
}
