package main

import (
	"bytes"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/engenho/engenho/runtime/lifecycle"
)

// Small formatting helpers the subcommands' tables share. They are pure:
// the time they compare with is passed in.

// table is a tabwriter that renders to a string: two spaces between
// columns, no trailing padding.
type table struct {
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable() *table {
	t := &table{}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

// row writes one row; empty cells become "-".
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// indented flushes and returns the table, each line prefixed with indent;
// it ends with a newline.
func (t *table) indented(indent string) string {
	t.tw.Flush()
	if indent == "" {
		return trimRight(t.buf.String())
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(trimRight(t.buf.String()), "\n") {
		if line != "" {
			b.WriteString(indent + line)
		}
	}
	return b.String()
}

func (t *table) String() string { return t.indented("") }

// trimRight drops the padding tabwriter leaves at the end of lines.
func trimRight(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// short renders a duration the way an operator reads it: 45s, 3m, 2h5m,
// 3d4h.
func short(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, h)
}

// since is how long ago t was ("" for a zero time).
func since(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return short(now.Sub(t))
}

// ago is "5m ago", "" for a zero time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return short(now.Sub(t)) + " ago"
}

// until is "in 8s", "now" once due, "" for a zero time.
func until(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if !t.After(now) {
		return "now"
	}
	return "in " + short(t.Sub(now))
}

// oneLine folds s to a single line of at most n runes, marking a cut with
// "...".
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// lastLines is the last n lines of s, each prefixed.
func lastLines(s string, n int, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	cut := 0
	if len(lines) > n {
		cut = len(lines) - n
	}
	var b strings.Builder
	if cut > 0 {
		fmt.Fprintf(&b, "%s(%d earlier lines)\n", prefix, cut)
	}
	for _, l := range lines[cut:] {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

// yesNo is "yes" or "no".
func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

// lifecycleLine is the daemon's state in one line: "running, epoch 3",
// "failed/backoff(4s), attempt 3: open_journal: transient: locked",
// "stopped+hold, epoch 2".
func lifecycleLine(s lifecycle.State) string {
	var b strings.Builder
	b.WriteString(s.String())
	fmt.Fprintf(&b, ", epoch %d", s.Epoch)
	if s.Name == lifecycle.Booting || s.Name == lifecycle.Failed {
		fmt.Fprintf(&b, ", attempt %d", s.Attempt)
	}
	if s.LastError != nil {
		b.WriteString(": " + s.LastError.Error())
	}
	return b.String()
}
