package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// engenho apply FILE... [--dry-run] [--wait]: deploy stack files (SVC-4,
// SVC-5). The daemon computes the plan; --dry-run changes nothing; --wait
// follows the rollout slot by slot and exits 1 if it fails.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var dryRun, wait bool
		cmd := &cobra.Command{
			Use:   "apply FILE... [--dry-run] [--wait]",
			Short: "Deploy stack files; --dry-run prints the plan only, --wait follows the rollout",
			Args:  usageArgs(cobra.MinimumNArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				if dryRun && wait {
					return usageError(fmt.Errorf("--dry-run and --wait do not go together: a dry run starts no rollout"))
				}
				files, err := readStackFiles(args)
				if err != nil {
					return failure(err)
				}
				return withClient(cmd, func(s *session) error {
					return runApply(s, control.ApplyArgs{Files: files, DryRun: dryRun, Wait: wait})
				})
			},
		}
		cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change per service; change nothing")
		cmd.Flags().BoolVar(&wait, "wait", false, "follow the rollout until converged or failed; exit 1 on failure")
		return cmd
	})
}

func readStackFiles(paths []string) ([]control.ApplyFile, error) {
	files := make([]control.ApplyFile, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("stack file: %w", err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("stack file %s: empty", p)
		}
		files = append(files, control.ApplyFile{Name: p, Content: string(b)})
	}
	return files, nil
}

func runApply(s *session, args control.ApplyArgs) error {
	var progress progressPrinter
	res, err := s.c.Apply(s.ctx, args, func(p control.ApplyProgress) error {
		if s.json {
			return printJSON(s.out, p)
		}
		_, err := fmt.Fprint(s.out, progress.next(p))
		return err
	})
	if err != nil {
		return err
	}
	if s.json {
		if err := printJSON(s.out, res); err != nil {
			return err
		}
	} else {
		fmt.Fprint(s.out, formatApplyResult(res, progress.planned))
	}
	if res.Outcome == control.OutcomeFailed {
		return fmt.Errorf("rollout failed: %d service(s) did not converge", len(res.Failed))
	}
	return nil
}

// progressPrinter turns apply --wait's stream into lines, printing a
// service's line only when it changed.
type progressPrinter struct {
	planned bool
	last    map[string]string
}

func (pp *progressPrinter) next(p control.ApplyProgress) string {
	var b strings.Builder
	if p.Planned != nil {
		pp.planned = true
		b.WriteString(formatPlans(p.Planned, false))
		b.WriteString("\nrolling out:\n")
	}
	if p.Service != nil {
		line := progressLine(*p.Service)
		key := p.Service.Stack + "/" + p.Service.Service
		if pp.last == nil {
			pp.last = map[string]string{}
		}
		if pp.last[key] != line {
			pp.last[key] = line
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// progressLine: "web/api  updating  2/3 healthy  slot 1 done, 2 updating,
// 3 pending: message".
func progressLine(s messages.ServiceStatus) string {
	line := fmt.Sprintf("%s/%s  %s  %d/%d healthy", s.Stack, s.Service, s.State, s.Healthy, s.Desired)
	if s.Rollout != nil {
		line += "  " + slotStates(s.Rollout.Slots)
	}
	if s.Message != "" {
		line += ": " + oneLine(s.Message, messageWidth)
	}
	return line
}

// formatPlans: per stack, the plan table (SVC-4).
func formatPlans(plans []control.StackPlan, dryRun bool) string {
	var b strings.Builder
	for i, p := range plans {
		if i > 0 {
			b.WriteString("\n")
		}
		switch {
		case dryRun:
			fmt.Fprintf(&b, "stack %s (dry run, nothing changed):\n", p.Stack)
		case p.Deployment != "":
			fmt.Fprintf(&b, "stack %s: deployment %s recorded:\n", p.Stack, p.Deployment)
		default:
			fmt.Fprintf(&b, "stack %s:\n", p.Stack)
		}
		b.WriteString(trimRight(stackfile.FormatPlan(p.Changes)))
		b.WriteString(formatNotes(p.Notes))
	}
	return b.String()
}

// formatApplyResult: the plan (unless the stream already showed it), then
// how a waited rollout ended, with the failed services' output (SVC-5,
// SVC-21).
func formatApplyResult(res control.ApplyResult, planShown bool) string {
	var b strings.Builder
	if !planShown {
		b.WriteString(formatPlans(res.Stacks, res.DryRun))
	}
	switch res.Outcome {
	case control.OutcomeNone:
		if !res.DryRun {
			b.WriteString("\nrolling out in the background: engenho status, or apply --wait to follow\n")
		}
	case control.OutcomeConverged:
		b.WriteString("\nconverged\n")
	case control.OutcomeFailed:
		b.WriteString("\nrollout failed:\n")
		for _, s := range res.Failed {
			fmt.Fprintf(&b, "  %s/%s %s", s.Stack, s.Service, s.State)
			if s.Message != "" {
				b.WriteString(": " + s.Message)
			}
			b.WriteString("\n")
			if s.FailureOutput != "" {
				b.WriteString(lastLines(s.FailureOutput, failureLines, "    | "))
			}
		}
	}
	return b.String()
}
