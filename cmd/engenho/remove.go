package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/runtime/control"
)

// engenho remove STACK [--volumes]: retire every service of a stack
// (SVC-17).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var volumes bool
		cmd := &cobra.Command{
			Use:   "remove STACK [--volumes]",
			Short: "Remove a stack: retire all its services",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := checkName("stack", args[0]); err != nil {
					return err
				}
				return withClient(cmd, func(s *session) error {
					res, err := s.c.Remove(s.ctx, control.RemoveArgs{Stack: args[0], Volumes: volumes})
					if err != nil {
						return err
					}
					return s.show(res, func() string { return formatRemove(res) })
				})
			},
		}
		cmd.Flags().BoolVar(&volumes, "volumes", false, "also delete the stack's volumes")
		return cmd
	})
}

// formatRemove: "removing stack web (deployment 5):" and every service's
// removal, or that the stack was already being removed.
func formatRemove(res control.ChangeResult) string {
	heading := "removing stack " + res.Stack
	if res.AlreadyRemoving {
		heading = "stack " + res.Stack + " is already being removed"
	}
	out := formatChanges(heading, res)
	for _, v := range res.VolumesDeleted {
		out += "deleted volume " + v + "\n"
	}
	return out
}

// formatChanges: a heading with the deployment recorded, then the changes
// as the plan table (what the command did, service by service).
func formatChanges(heading string, res control.ChangeResult) string {
	var b strings.Builder
	b.WriteString(heading)
	if res.Deployment != "" {
		fmt.Fprintf(&b, " (deployment %s)", res.Deployment)
	}
	b.WriteString(":\n")
	if len(res.Changes) == 0 {
		b.WriteString("the stack has no services\n")
		return b.String()
	}
	b.WriteString(trimRight(stackfile.FormatPlan(res.Changes)))
	return b.String()
}
