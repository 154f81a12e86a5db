package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// engenho events [--since N] [--tail N] [-f]: the event log (SVC-20).
// --since N starts at event N (N included); on the wire that is since N-1,
// as the protocol's since is the last event already seen.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var args control.EventsArgs
		var from uint64
		cmd := &cobra.Command{
			Use:   "events [--since N] [-f]",
			Short: "Show the event log; -f follows new events",
			Args:  usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, _ []string) error {
				if cmd.Flags().Changed("since") {
					args.Tail, args.Since = 0, sinceArg(from)
				}
				return withClient(cmd, func(s *session) error { return runEvents(s, args) })
			},
		}
		cmd.Flags().Uint64Var(&from, "since", 0, "events from sequence number N on, N included (0 or 1: all that are kept)")
		cmd.Flags().IntVarP(&args.Tail, "tail", "n", 100, "without --since: the last N events (0: all that are kept)")
		cmd.Flags().BoolVarP(&args.Follow, "follow", "f", false, "keep following new events until interrupted")
		return cmd
	})
}

// sinceArg turns --since N (from N on) into the protocol's since (after
// it).
func sinceArg(from uint64) uint64 {
	if from == 0 {
		return 0
	}
	return from - 1
}

func runEvents(s *session, args control.EventsArgs) error {
	res, err := s.c.Events(s.ctx, args, func(e messages.Event) error {
		if s.json {
			return printJSON(s.out, e)
		}
		_, err := fmt.Fprintln(s.out, formatEvent(e, time.Local))
		return err
	})
	if args.Follow && errors.Is(err, context.Canceled) {
		return nil // interrupted: the way out of -f
	}
	switch {
	case err != nil:
	case s.json:
		// The result last, as every stream ends: "memory" says the numbers
		// are the in-memory log's own, not the journal's.
		return printJSON(s.out, res)
	case res.Memory:
		fmt.Fprintln(s.out, "(the journal is not open: these are the daemon's own events since it closed it, kept in memory)")
	}
	return err
}

// formatEvent is one event on one line: "#12 2025-03-01 12:00:00.000 warn
// health.unhealthy web/api web-api-2-x1: no healthy replica for 20s
// (reason=...)". Newlines and other control characters in the message and
// the fields (probe output, a workload's stderr) are escaped, so an event
// is always one line and cannot drive the terminal.
func formatEvent(e messages.Event, loc *time.Location) string {
	var b strings.Builder
	at := time.UnixMilli(e.UnixMs).In(loc).Format("2006-01-02 15:04:05.000")
	fmt.Fprintf(&b, "#%d %s %-5s %s", e.Seq, at, e.Level, e.Kind)
	if where := eventWhere(e); where != "" {
		b.WriteString(" " + where)
	}
	if e.By != "" {
		b.WriteString(" by " + escapeControl(e.By)) // issue 17: who caused it
	}
	b.WriteString(": " + escapeControl(e.Message))
	if len(e.Fields) > 0 {
		keys := make([]string, 0, len(e.Fields))
		for k := range e.Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = escapeControl(k) + "=" + escapeControl(e.Fields[k])
		}
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	return b.String()
}

// eventWhere names what an event is about: stack/service, instance, host,
// actor.
func eventWhere(e messages.Event) string {
	var parts []string
	switch {
	case e.Stack != "" && e.Service != "":
		parts = append(parts, e.Stack+"/"+e.Service)
	case e.Stack != "":
		parts = append(parts, e.Stack)
	}
	for _, p := range []string{e.Instance, e.Host, e.Actor} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

// escapeControl writes control characters as Go escapes: a newline as \n,
// a tab as \t, a carriage return as \r, anything else (ESC included) as
// \xNN or \uNNNN. Other text, backslashes too, is left as it is.
func escapeControl(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !unicode.IsControl(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r) // '\n', '\x1b', '\u0085'
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
