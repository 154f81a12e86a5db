package main

import (
	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho restart-child PATH: restart one actor subtree, PATH as `engenho
// tree` prints it (DMN-12).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "restart-child PATH",
			Short: "Restart one actor subtree (PATH as engenho tree prints it)",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withClient(cmd, func(s *session) error {
					res, err := s.c.RestartChild(s.ctx, control.RestartChildArgs{Path: args[0]})
					if err != nil {
						return err
					}
					return s.show(res, func() string { return "restarted " + res.Path + "\n" })
				})
			},
		}
	})
}
