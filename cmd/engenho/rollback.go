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
					return s.show(res, func() string {
						return formatChanges("rolling back stack "+res.Stack, res) + formatNotes(res.Notes)
					})
				})
			},
		}
	})
}
