package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/runtime/control"
)

// engenho why STACK/SERVICE[/SLOT]: each slot's backoff ledger and its
// replica (SUP-18).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "why STACK/SERVICE[/SLOT]",
			Short: "Explain a service's restarts: failures, pending attempt, stable since, next attempt",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				q, err := parseWhy(args[0])
				if err != nil {
					return err
				}
				return withClient(cmd, func(s *session) error {
					res, err := s.c.Why(s.ctx, q)
					if err != nil {
						return err
					}
					return s.show(res, func() string { return formatWhy(res, time.Now()) })
				})
			},
		}
	})
}

func parseWhy(arg string) (control.WhyArgs, error) {
	ref, slotText, hasSlot := arg, "", false
	if parts := strings.Split(arg, "/"); len(parts) == 3 {
		ref, slotText, hasSlot = parts[0]+"/"+parts[1], parts[2], true
	}
	if strings.Count(ref, "/") != 1 {
		return control.WhyArgs{}, usageError(fmt.Errorf("%q: want STACK/SERVICE[/SLOT]", arg))
	}
	r, err := parseServiceRef(ref)
	if err != nil {
		return control.WhyArgs{}, err
	}
	q := control.WhyArgs{Stack: r.Stack, Service: r.Service}
	if hasSlot {
		slot, err := strconv.Atoi(slotText)
		if err != nil || slot < 1 {
			return control.WhyArgs{}, usageError(fmt.Errorf("%q: the slot is a number from 1", arg))
		}
		q.Slot = slot
	}
	return q, nil
}

// formatWhy: the service's state, then one row per slot, then each slot's
// last error in full.
func formatWhy(res control.WhyResult, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s  %s", res.Stack, res.Service, res.State)
	if res.Message != "" {
		b.WriteString(": " + res.Message)
	}
	b.WriteString("\n")
	if h := res.Host; h != nil {
		fmt.Fprintf(&b, "host %s  %s since %s", h.Host, h.State, ago(now, h.Since))
		if !h.NextAttempt.IsZero() {
			b.WriteString(", next attempt " + until(now, h.NextAttempt))
		}
		b.WriteString("\n")
	}
	for _, n := range res.Waiting {
		fmt.Fprintf(&b, "actor %s restarting, next attempt %s: %s\n", n.Path, until(now, n.NextAttempt), n.Detail)
	}
	if len(res.Slots) == 0 {
		if res.Host == nil {
			b.WriteString("no slots with replicas or failure history\n")
		}
		return b.String()
	}
	t := newTable()
	t.row("SLOT", "PHASE", "HEALTH", "RESTARTS", "FAILURES", "PENDING", "STABLE SINCE", "NEXT ATTEMPT", "LAST REASON")
	for _, s := range res.Slots {
		failures, pending, stable, next, reason := "0", "no", "", "", ""
		if s.HasLedger {
			l := s.Ledger
			failures = strconv.Itoa(l.Failures)
			pending = yesNo(l.Unconfirmed)
			stable = ago(now, l.StableSince)
			if l.Failures > 0 {
				next = until(now, l.NextAttempt)
			}
			reason = oneLine(l.LastReason, messageWidth)
		}
		t.row(strconv.Itoa(s.Slot), s.Phase, s.Health, strconv.Itoa(s.Restarts), failures, pending, stable, next, reason)
	}
	b.WriteString("\n" + t.String())
	for _, s := range res.Slots {
		if s.LastError != "" {
			fmt.Fprintf(&b, "\nslot %d last error: %s\n", s.Slot, s.LastError)
		}
	}
	return b.String()
}
