package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// engenho history [STACK] [-n N]: the deploy audit log (issue 17), who
// asked for each deployment, when, from which deployment to which, and how
// it ended.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var args control.HistoryArgs
		cmd := &cobra.Command{
			Use:   "history [STACK] [-n N]",
			Short: "Show who deployed what: the deploy audit log",
			Args:  usageArgs(cobra.MaximumNArgs(1)),
			RunE: func(cmd *cobra.Command, pos []string) error {
				if len(pos) == 1 {
					if err := checkName("stack", pos[0]); err != nil {
						return err
					}
					args.Stack = pos[0]
				}
				if args.Limit < 0 {
					return usageError(fmt.Errorf("-n %d: want 0 (the daemon's default) or more", args.Limit))
				}
				return withClient(cmd, func(s *session) error {
					res, err := s.c.History(s.ctx, args)
					if err != nil {
						return err
					}
					return s.show(res, func() string { return formatHistory(res.Entries, time.Local) })
				})
			},
		}
		cmd.Flags().IntVarP(&args.Limit, "limit", "n", 50, "the newest N entries (0: the daemon's default, 1000)")
		return cmd
	})
}

// formatHistory is the table SEQ TIME WHO OP STACK/SERVICE FROM->TO
// OUTCOME MESSAGE, oldest first; FROM->TO are deployment ids (the
// revisions are in --json). A message is cut to one line.
func formatHistory(entries []messages.AuditEntry, loc *time.Location) string {
	if len(entries) == 0 {
		return "no deployments recorded\n"
	}
	t := newTable()
	t.row("SEQ", "TIME", "WHO", "OP", "STACK/SERVICE", "FROM->TO", "OUTCOME", "MESSAGE")
	for _, e := range entries {
		where := e.Stack
		if where == "" {
			where = "-" // a refused apply whose file named no stack
		}
		if e.Service != "" {
			where += "/" + e.Service
		}
		t.row(strconv.FormatUint(e.Seq, 10), time.UnixMilli(e.UnixMs).In(loc).Format("2006-01-02 15:04:05"),
			e.By.String(), e.Op, where, deployments(e.FromDeployment, e.ToDeployment), string(e.Outcome),
			oneLine(escapeControl(strings.ReplaceAll(e.Message, "\n", " ")), messageWidth))
	}
	return t.String() + "\n"
}

// deployments is "1->2", "-" for none: "->1" is a first deployment.
func deployments(from, to uint64) string {
	id := func(n uint64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatUint(n, 10)
	}
	if from == 0 && to == 0 {
		return ""
	}
	return id(from) + "->" + id(to)
}
