package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/stackfile"
)

// engenho scale STACK/SERVICE N: set the replica count; scaling down
// removes the highest slots first (SVC-17).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "scale STACK/SERVICE N",
			Short: "Set a service's replica count",
			Args:  usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, args []string) error {
				ref, err := parseServiceRef(args[0])
				if err != nil {
					return err
				}
				n, err := strconv.Atoi(args[1])
				if err != nil || n < 0 || n > stackfile.MaxReplicas {
					return usageError(fmt.Errorf("replicas %q: want 0..%d", args[1], stackfile.MaxReplicas))
				}
				return withClient(cmd, func(s *session) error {
					res, err := s.c.Scale(s.ctx, control.ScaleArgs{Stack: ref.Stack, Service: ref.Service, Replicas: n})
					if err != nil {
						return err
					}
					return s.show(res, func() string {
						return fmt.Sprintf("%s/%s: %d -> %d replicas\n", res.Stack, res.Service, res.From, res.To)
					})
				})
			},
		}
	})
}
