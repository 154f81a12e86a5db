package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho logs STACK/SERVICE [--slot N] [-n LINES] [-f]: replica output
// (SVC-21).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var args control.LogsArgs
		cmd := &cobra.Command{
			Use:   "logs STACK/SERVICE [--slot N] [-n LINES] [-f]",
			Short: "Show replica output; -f follows it",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, pos []string) error {
				ref, err := parseServiceRef(pos[0])
				if err != nil {
					return err
				}
				if args.Slot < 0 || args.Lines < 0 {
					return usageError(fmt.Errorf("--slot and --lines are not negative"))
				}
				args.Stack, args.Service = ref.Stack, ref.Service
				return withClient(cmd, func(s *session) error { return runLogs(s, args) })
			},
		}
		cmd.Flags().IntVar(&args.Slot, "slot", 0, "only this slot (default: every slot)")
		cmd.Flags().IntVarP(&args.Lines, "lines", "n", 100, "past lines per replica")
		cmd.Flags().BoolVarP(&args.Follow, "follow", "f", false, "keep following new output until interrupted")
		return cmd
	})
}

func runLogs(s *session, args control.LogsArgs) error {
	res, err := s.c.Logs(s.ctx, args, func(c control.LogChunk) error {
		if s.json {
			return printJSON(s.out, c)
		}
		_, err := io.WriteString(s.out, formatLogChunk(c, args.Slot == 0))
		return err
	})
	if args.Follow && errors.Is(err, context.Canceled) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.json {
		return printJSON(s.out, res)
	}
	if res.Truncated {
		fmt.Fprintln(s.out, "(older output was not kept)")
	}
	return nil
}

// formatLogChunk prefixes each line with its slot when several slots are
// shown: "[2] listening on :8080".
func formatLogChunk(c control.LogChunk, prefixed bool) string {
	text := c.Text
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if !prefixed {
		return text
	}
	var b strings.Builder
	prefix := fmt.Sprintf("[%d] ", c.Slot)
	for _, line := range strings.SplitAfter(text, "\n") {
		if line != "" {
			b.WriteString(prefix + line)
		}
	}
	return b.String()
}
