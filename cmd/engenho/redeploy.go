package main

import (
	"github.com/spf13/cobra"
)

// engenho redeploy STACK/SERVICE: replace every instance although the
// definition is the same (SVC-17).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "redeploy STACK/SERVICE",
			Short: "Replace every instance of a service with a fresh one",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				ref, err := parseServiceRef(args[0])
				if err != nil {
					return err
				}
				return withClient(cmd, func(s *session) error {
					res, err := s.c.Redeploy(s.ctx, ref)
					if err != nil {
						return err
					}
					return s.show(res, func() string { return formatChanges("redeploying "+ref.String(), res) })
				})
			},
		}
	})
}
