package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/daemon"
)

// engenho reinit journal|identity [--yes]: move the journal or the node's
// identity aside to DATA/attic/TIMESTAMP (DMN-14). The client reads the stop
// epoch, shows what will move, asks to confirm, and sends the epoch: if
// the runtime ran since, the daemon refuses.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var yes bool
		cmd := &cobra.Command{
			Use:       "reinit journal|identity",
			Short:     "Move the journal or the node identity aside to the attic (daemon stopped or failed)",
			Args:      usageArgs(cobra.ExactArgs(1)),
			ValidArgs: control.ReinitTargets,
			RunE: func(cmd *cobra.Command, args []string) error {
				what := args[0]
				if !slices.Contains(control.ReinitTargets, what) {
					return usageError(fmt.Errorf("reinit %q: want one of %s", what, strings.Join(control.ReinitTargets, ", ")))
				}
				if what == control.ReinitJournal && noDaemon(cmd) {
					return runReinitOffline(cmd, yes)
				}
				return withClient(cmd, func(s *session) error {
					return runReinit(s, what, yes, cmd.InOrStdin(), cmd.ErrOrStderr())
				})
			},
		}
		cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask to confirm")
		return cmd
	})
}

// errNotConfirmed: the operator did not type yes.
var errNotConfirmed = errors.New("not confirmed; nothing was moved")

func runReinit(s *session, what string, yes bool, in io.Reader, prompt io.Writer) error {
	ep, err := s.c.Epoch(s.ctx, control.EpochArgs{What: what})
	if err != nil {
		return err
	}
	if s.json {
		if err := printJSON(s.out, ep); err != nil {
			return err
		}
	} else {
		io.WriteString(s.out, formatReinitPlan(what, ep))
	}
	if !ep.Allowed {
		return fmt.Errorf("reinit %s refused: %s", what, ep.Reason)
	}
	c := s.c
	if !yes {
		if err := confirm(in, prompt, isTerminal(in)); err != nil {
			return err
		}
		// The operator may have read for longer than the socket's idle
		// timeout: ask on a new connection (the epoch still guards).
		if c, err = control.Dial(s.sock); err != nil {
			return err
		}
		defer c.Close()
	}
	res, err := c.Reinit(s.ctx, control.ReinitArgs{What: what, Epoch: ep.Epoch})
	if err != nil {
		return err
	}
	return s.show(res, func() string { return formatReinitDone(res) })
}

// confirm asks on the terminal; without one it refuses, so a script must
// say --yes.
func confirm(in io.Reader, prompt io.Writer, terminal bool) error {
	if !terminal {
		return usageError(errors.New("stdin is not a terminal: pass --yes to confirm"))
	}
	fmt.Fprint(prompt, `Type "yes" to move them aside: `)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return errNotConfirmed
	}
	if strings.TrimSpace(line) != "yes" {
		return errNotConfirmed
	}
	return nil
}

// isTerminal reports whether r is a terminal; a variable so tests can say
// yes.
var isTerminal = stdinTerminal

func stdinTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// formatReinitPlan says what would move, and whether the daemon allows it.
func formatReinitPlan(what string, ep control.EpochResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "reinit %s: the daemon is %s (stop epoch %d)\n", what, ep.State.String(), ep.Epoch)
	if !ep.Allowed {
		fmt.Fprintf(&b, "not allowed now: %s\n", ep.Reason)
		return b.String()
	}
	dest := ep.Attic
	if dest == "" {
		dest = "the attic"
	}
	fmt.Fprintf(&b, "will move to %s (nothing is deleted):\n", dest)
	for _, m := range ep.Moves {
		b.WriteString("  " + m + "\n")
	}
	if len(ep.Moves) == 0 {
		b.WriteString("  (nothing exists to move)\n")
	}
	return b.String()
}

func formatReinitDone(res control.ReinitResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "reinit %s done; moved aside:\n", res.What)
	for _, m := range res.Moved {
		b.WriteString("  " + m + "\n")
	}
	for _, n := range res.Notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// noDaemon reports whether no daemon answers on the socket (none there,
// or a stale one).
func noDaemon(cmd *cobra.Command) bool {
	c, err := control.Dial(socketPath(cmd))
	if err != nil {
		return errors.Is(err, control.ErrNoDaemon)
	}
	c.Close()
	return false
}

// runReinitOffline is reinit journal with the daemon down (REL-5): the
// client takes the data directory's lock itself (DMN-2), so a daemon
// starting meanwhile fails at once, and moves the journal aside as the
// daemon would (DMN-14).
func runReinitOffline(cmd *cobra.Command, yes bool) error {
	dataDir := defaultDataDir
	if f := cmd.Flags().Lookup("data-dir"); f != nil && f.Value.String() != "" {
		dataDir = f.Value.String()
	}
	out, asJSON := cmd.OutOrStdout(), jsonOutput(cmd)
	journalDir := filepath.Join(dataDir, "journal")
	if !asJSON {
		fmt.Fprintf(out, "reinit journal: no daemon answers on %s; working on %s under its lock\n", socketPath(cmd), dataDir)
		fmt.Fprintf(out, "will move to %s (nothing is deleted):\n  %s\n", filepath.Join(dataDir, "attic"), journalDir)
	}
	if !yes {
		if err := confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), isTerminal(cmd.InOrStdin())); err != nil {
			return err
		}
	}
	bin, err := os.Executable()
	if err != nil {
		return failure(fmt.Errorf("finding the engenho binary: %w", err))
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := daemon.ReinitJournalOffline(ctx, dataDir, daemon.ReinitOptions{Bin: bin})
	if err != nil {
		return failure(err)
	}
	res := control.ReinitResult{What: control.ReinitJournal, Moved: []string{r.Moved}, Salvaged: r.Salvaged, Lost: r.Lost,
		Notes: r.Summary(), Offline: true}
	if asJSON {
		return printJSON(out, res)
	}
	_, err = io.WriteString(out, formatReinitDone(res))
	return err
}
