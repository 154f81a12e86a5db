package main

import (
	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho rollback STACK: the previous deployment becomes current; a second
// rollback undoes the first (SVC-17).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "rollback STACK",
			Short: "Go back to the stack's previous deployment",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := checkName("stack", args[0]); err != nil {
					return err
				}
				return withClient(cmd, func(s *session) error {
					res, err := s.c.Rollback(s.ctx, control.StackRef{Stack: args[0]})
					if err != nil {
						return err
					}
					return s.show(res, func() string { return formatRollback(res) })
				})
			},
		}
	})
}

// formatRollback: "rolling back stack web to deployment 2:", the changes
// from the deployment that was current, then what the rollback means for
// the stack file (the override it left, or none; SVC-23).
func formatRollback(res control.ChangeResult) string {
	heading := "rolling back stack " + res.Stack
	if res.Deployment != "" {
		heading += " to deployment " + res.Deployment
	}
	return formatChanges(heading, control.ChangeResult{Stack: res.Stack, Changes: res.Changes}) + formatNotes(res.Notes)
}
