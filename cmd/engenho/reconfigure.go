package main

import (
	"github.com/spf13/cobra"
)

// engenho reconfigure: re-read the config and apply what can be applied in
// place (DMN-16); the same as SIGHUP.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "reconfigure",
			Short: "Re-read the config and apply it in place (like SIGHUP)",
			Args:  usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withClient(cmd, func(s *session) error {
					res, err := s.c.Reconfigure(s.ctx)
					if err != nil {
						return err
					}
					return s.show(res, func() string { return formatReconfigure(res) })
				})
			},
		}
	})
}
