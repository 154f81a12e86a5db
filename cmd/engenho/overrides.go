package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/messages"
)

// overrideLine: "replicas 5 (file says 3; scaled by uid 0 (root) at
// 12:03)", a value an operator's command holds instead of the stack
// file's (SVC-23).
func overrideLine(s messages.ServiceStatus, o messages.Override, now time.Time) string {
	by := ""
	if o.By != "" {
		by = " by " + o.By
	}
	at := " at " + clockAt(o.At, now)
	switch o.Field {
	case messages.OverrideReplicas:
		return fmt.Sprintf("replicas %s (file says %s; scaled%s%s)", o.Value, o.File, by, at)
	case messages.OverrideDeployment:
		return fmt.Sprintf("deployment %s (file says deployment %s; rolled back%s%s)", o.Value, o.File, by, at)
	case messages.OverrideStopped:
		when := "since " + clockAt(o.At, now)
		if o.By != "" {
			when = "by " + o.By + at
		}
		return fmt.Sprintf("stopped (%s; `engenho service start %s/%s` lifts it)", when, s.Stack, s.Service)
	}
	return fmt.Sprintf("%s %s (file says %s%s%s)", o.Field, o.Value, o.File, by, at)
}

// overrideLines: a service's overrides, one indented line each, at the
// end of its block in status.
func overrideLines(s messages.ServiceStatus, now time.Time) string {
	var b strings.Builder
	for _, o := range s.Overrides {
		b.WriteString("  " + overrideLine(s, o, now) + "\n")
	}
	return b.String()
}

// desiredCell is the DESIRED column: "5 (file 3)" under a replicas
// override.
func desiredCell(s messages.ServiceStatus) string {
	for _, o := range s.Overrides {
		if o.Field == messages.OverrideReplicas {
			return fmt.Sprintf("%d (file %s)", s.Desired, o.File)
		}
	}
	return strconv.Itoa(s.Desired)
}

// clockAt is "12:03" for a time today, with the date otherwise; local.
func clockAt(at, now time.Time) string {
	at, now = at.Local(), now.Local()
	if at.Format(time.DateOnly) == now.Format(time.DateOnly) {
		return at.Format("15:04")
	}
	return at.Format("2006-01-02 15:04")
}

// formatNotes: one "note: ..." line each.
func formatNotes(notes []string) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("note: " + n + "\n")
	}
	return b.String()
}
