package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers/cgroup"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// engenho top [STACK[/SERVICE]]: every running replica's usage, refreshed
// like `docker stats` (DRV-16); --no-stream prints it once.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var (
			noStream bool
			every    time.Duration
		)
		cmd := &cobra.Command{
			Use:   "top [STACK[/SERVICE]]",
			Short: "Show every running replica's CPU, memory and processes, refreshed until Ctrl-C",
			Long: `Show every running replica's CPU (cores, averaged over the last 10s), memory
(now and peak) and processes, as the daemon samples them every usage.interval,
refreshed every --interval until Ctrl-C. --no-stream prints one table and exits;
with --json each refresh is one line of JSON.`,
			Args: usageArgs(cobra.MaximumNArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				var filter control.StatusArgs
				if len(args) == 1 {
					var err error
					if filter, err = parseStatusFilter(args[0]); err != nil {
						return err
					}
				}
				if every < 100*time.Millisecond {
					return usageError(fmt.Errorf("--interval %s: want at least 100ms", every))
				}
				return withClient(cmd, func(s *session) error {
					return runTop(s, filter, noStream, every)
				})
			},
		}
		cmd.Flags().BoolVar(&noStream, "no-stream", false, "print one table and exit")
		cmd.Flags().DurationVar(&every, "interval", 2*time.Second, "time between refreshes")
		return cmd
	})
}

// redialAfter: refreshes this far apart each ask on a new connection, so
// the socket's idle timeout (control.idle_timeout, 5m by default) never
// closes the one top holds while it waits.
const redialAfter = time.Minute

// topStatus asks for the status on s's connection, or, with fresh, on a
// new one.
func topStatus(s *session, filter control.StatusArgs, fresh bool) (control.StatusResult, error) {
	if !fresh {
		return s.c.Status(s.ctx, filter)
	}
	c, err := control.Dial(s.sock)
	if err != nil {
		return control.StatusResult{}, err
	}
	defer c.Close()
	return c.Status(s.ctx, filter)
}

// topRow is one running replica in `engenho top`.
type topRow struct {
	Stack    string                `json:"stack"`
	Service  string                `json:"service"`
	Slot     int                   `json:"slot"`
	Instance string                `json:"instance"`
	Phase    string                `json:"phase"`
	Usage    messages.ReplicaUsage `json:"usage"`
}

func runTop(s *session, filter control.StatusArgs, once bool, every time.Duration) error {
	clear := !s.json && outputTerminal(s.out)
	for first := true; ; first = false {
		res, err := topStatus(s, filter, !first && every >= redialAfter)
		if err != nil {
			if s.ctx.Err() != nil {
				return nil // Ctrl-C
			}
			return err
		}
		rows := topRows(res)
		switch {
		case s.json:
			err = printJSON(s.out, rows)
		case clear:
			_, err = io.WriteString(s.out, "\x1b[H\x1b[2J"+formatTop(rows, time.Now(), every))
		default:
			_, err = io.WriteString(s.out, formatTop(rows, time.Now(), every))
		}
		if err != nil || once {
			return err
		}
		select {
		case <-s.ctx.Done():
			return nil
		case <-time.After(every):
		}
		if !clear && !s.json {
			io.WriteString(s.out, "\n")
		}
	}
}

// topRows are the replicas of res that have a usage sample, in status
// order (stack, service, slot).
func topRows(res control.StatusResult) []topRow {
	rows := []topRow{}
	for _, svc := range res.Services {
		for _, r := range svc.Replicas {
			if r.Usage == nil {
				continue
			}
			rows = append(rows, topRow{Stack: svc.Stack, Service: svc.Service, Slot: r.Slot, Instance: r.Instance, Phase: r.Phase, Usage: *r.Usage})
		}
	}
	return rows
}

// formatTop: a title line, then one row per replica.
func formatTop(rows []topRow, now time.Time, every time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "engenho top  %s  refresh %s; CPU in cores over the last 10s\n\n", now.Format("15:04:05"), every)
	if len(rows) == 0 {
		b.WriteString("no running replica has been sampled yet (usage.interval; 0 turns sampling off)\n")
		return b.String()
	}
	t := newTable()
	t.row("REPLICA", "INSTANCE", "PHASE", "CPU", "MEM", "PEAK", "PIDS")
	for _, r := range rows {
		cpu, mem, pids := usageCells(&r.Usage)
		peak := "-"
		if r.Usage.MemoryPeakBytes > 0 {
			peak = cgroup.FormatBytes(r.Usage.MemoryPeakBytes)
		}
		t.row(r.Stack+"/"+r.Service+"/"+strconv.Itoa(r.Slot), r.Instance, r.Phase, cpu, mem, peak, pids)
	}
	b.WriteString(t.String())
	return b.String()
}

// outputTerminal reports whether w is a terminal (the screen is then
// cleared between refreshes).
func outputTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
