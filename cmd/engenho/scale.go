package main

import (
	"fmt"
	"strconv"
	"time"

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
					return s.show(res, func() string { return formatScale(res, time.Now()) })
				})
			},
		}
	})
}

// formatScale: "web/api: 3 -> 5 replicas (the stack file says 3; kept
// until the file changes deploy.replicas)" (SVC-23).
func formatScale(res control.ScaleResult, now time.Time) string {
	ref := res.Stack + "/" + res.Service
	o := res.Override
	switch {
	case !res.Changed && o != nil:
		return fmt.Sprintf("%s: already %d replicas (the stack file says %s; scaled by %s at %s)\n", ref, res.To, o.File, o.By, clockAt(o.At, now))
	case !res.Changed:
		return fmt.Sprintf("%s: already %d replicas, the stack file's count\n", ref, res.To)
	case o != nil:
		return fmt.Sprintf("%s: %d -> %d replicas (the stack file says %s; kept across restarts and reloads until the file changes deploy.replicas)\n",
			ref, res.From, res.To, o.File)
	}
	return fmt.Sprintf("%s: %d -> %d replicas (the stack file's count; no override left)\n", ref, res.From, res.To)
}
