package main

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/actors/supervise"
)

// engenho tree: the live supervision tree, each actor with its state
// (SUP-1).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "tree",
			Short: "Show the live actor tree with each actor's state",
			Args:  usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withClient(cmd, func(s *session) error {
					res, err := s.c.Tree(s.ctx)
					if err != nil {
						return err
					}
					return s.show(res, func() string { return formatTree(res.Nodes, time.Now()) })
				})
			},
		}
	})
}

// formatTree indents each actor under its parent, children in name order.
// The PATH column is what restart-child takes.
func formatTree(nodes []supervise.Node, now time.Time) string {
	if len(nodes) == 0 {
		return "no actors (the runtime is not running)\n"
	}
	sorted := slices.Clone(nodes)
	// Compare segment by segment so a child sorts right under its parent
	// ("web/x" before "web-2").
	slices.SortFunc(sorted, func(a, b supervise.Node) int {
		return slices.Compare(strings.Split(a.Path, "/"), strings.Split(b.Path, "/"))
	})
	t := newTable()
	t.row("ACTOR", "STATE", "RESTARTS", "SINCE", "DETAIL", "PATH")
	for _, n := range sorted {
		segs := strings.Split(n.Path, "/")
		name := strings.Repeat("  ", len(segs)-1) + segs[len(segs)-1]
		detail := n.Detail
		if n.State == supervise.StateRestarting && !n.NextAttempt.IsZero() {
			detail = "next attempt " + until(now, n.NextAttempt) + "; " + detail
		}
		t.row(name, n.State, strconv.Itoa(n.Restarts), since(now, n.Since), oneLine(detail, messageWidth), n.Path)
	}
	return t.String()
}
