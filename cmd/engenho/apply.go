package main

import (
	"fmt"
	"os"
	"path/filepath"
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
		var (
			dryRun, wait bool
			profiles     []string
		)
		cmd := &cobra.Command{
			Use:   "apply FILE... [--dry-run] [--wait] [--profile NAME]...",
			Short: "Deploy stack files; --dry-run prints the plan only, --wait follows the rollout",
			Long: `Deploy stack files. Each file's ${VAR} references and environment keys
without a value take their values from this command's environment, then from
the .env file beside the stack file; relative env_file paths are read from
the stack file's directory.`,
			Args: usageArgs(cobra.MinimumNArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				if dryRun && wait {
					return usageError(fmt.Errorf("--dry-run and --wait do not go together: a dry run starts no rollout"))
				}
				files, err := readStackFiles(args)
				if err != nil {
					return failure(err)
				}
				return withClient(cmd, func(s *session) error {
					return runApply(s, control.ApplyArgs{Files: files, DryRun: dryRun, Wait: wait, Env: applyEnvironment(), Profiles: profiles})
				})
			},
		}
		cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change per service; change nothing")
		cmd.Flags().BoolVar(&wait, "wait", false, "follow the rollout until converged or failed; exit 1 on failure")
		cmd.Flags().StringArrayVar(&profiles, "profile", nil, "activate a Compose profile (repeatable)")
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
		dir, err := filepath.Abs(filepath.Dir(p))
		if err != nil {
			return nil, fmt.Errorf("stack file %s: %w", p, err)
		}
		files = append(files, control.ApplyFile{Name: p, Content: string(b), Dir: dir})
	}
	return files, nil
}

// applyEnvironment is this command's environment: what a stack file's
// ${VAR} references take, as Compose takes them from the shell.
func applyEnvironment() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
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
		return fmt.Errorf("rollout failed: %s", strings.Join(failedNames(res), ", "))
	}
	return nil
}

func failedNames(res control.ApplyResult) []string {
	var out []string
	for _, v := range res.Verdicts {
		if v.Outcome == control.OutcomeFailed {
			out = append(out, v.Stack+"/"+v.Service)
		}
	}
	return out
}

// progressPrinter turns apply --wait's stream into lines: the plan, then
// each event of a changed service and each service line the daemon sends
// (it sends one only when the service's state, counts or a slot moved).
type progressPrinter struct {
	planned bool
}

func (pp *progressPrinter) next(p control.ApplyProgress) string {
	var b strings.Builder
	if p.Planned != nil {
		pp.planned = true
		b.WriteString(formatPlans(p.Planned, false))
		b.WriteString("\nrolling out:\n")
	}
	if p.Service != nil {
		b.WriteString(progressLine(*p.Service))
		if p.Note != "" {
			b.WriteString("  [" + p.Note + "]")
		}
		b.WriteString("\n")
	}
	if p.Event != nil {
		b.WriteString(progressEvent(*p.Event) + "\n")
	}
	return b.String()
}

// progressLine: "web/api  updating  2/3 healthy  slot 1 done, 2 updating,
// 3 pending: message"; without a rollout, each replica's phase by slot
// ("slot 1 serving, 2 probing").
func progressLine(s messages.ServiceStatus) string {
	line := fmt.Sprintf("%s/%s  %s  %d/%d healthy", s.Stack, s.Service, s.State, s.Healthy, s.Desired)
	switch {
	case s.Rollout != nil:
		line += "  " + slotStates(s.Rollout.Slots)
	case len(s.Replicas) > 0:
		slots := make([]messages.SlotStatus, len(s.Replicas))
		for i, r := range s.Replicas {
			slots[i] = messages.SlotStatus{Slot: r.Slot, State: r.Phase}
		}
		line += "  " + slotStates(slots)
	}
	if s.Message != "" {
		line += ": " + oneLine(s.Message, messageWidth)
	}
	return line
}

// progressEvent: "  #41 replica.failed web-api-1-x1: unhealthy: exit
// code 1; failure 2" (control characters escaped, as `engenho events`).
func progressEvent(e messages.Event) string {
	who := e.Instance
	if who == "" {
		who = e.Stack + "/" + e.Service
	}
	return fmt.Sprintf("  #%d %s %s: %s", e.Seq, e.Kind, who, escapeControl(e.Message))
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
		b.WriteString(formatWarnings(p.Warnings))
	}
	return b.String()
}

// formatWarnings: one "warning: FILE:LINE: KEY: message" line each.
func formatWarnings(warnings []string) string {
	var b strings.Builder
	for _, w := range warnings {
		b.WriteString("warning: " + w + "\n")
	}
	return b.String()
}

// recordedAny says whether the apply recorded a deployment for any stack
// (the daemon names one only then).
func recordedAny(plans []control.StackPlan) bool {
	for _, p := range plans {
		if p.Deployment != "" {
			return true
		}
	}
	return false
}

// formatApplyResult: the plan (unless the stream already showed it), then
// the one verdict of a waited rollout: converged, or failed with each
// failed service's reason and output, and what was still rolling out
// (SVC-5, SVC-21).
func formatApplyResult(res control.ApplyResult, planShown bool) string {
	var b strings.Builder
	if !planShown {
		b.WriteString(formatPlans(res.Stacks, res.DryRun))
	}
	switch res.Outcome {
	case control.OutcomeNone:
		switch {
		case res.DryRun:
		case !recordedAny(res.Stacks):
			b.WriteString("\nnothing changed: nothing to roll out\n")
		default:
			b.WriteString("\nrolling out in the background: engenho status, or apply --wait to follow\n")
		}
	case control.OutcomeConverged:
		if len(res.Verdicts) == 0 {
			b.WriteString("\nnothing to roll out\n")
		} else {
			b.WriteString("\nconverged\n")
		}
	case control.OutcomeFailed:
		b.WriteString("\nrollout failed:\n")
		writeVerdicts(&b, res)
	}
	return b.String()
}

func writeVerdicts(b *strings.Builder, res control.ApplyResult) {
	output := map[string]string{}
	for _, s := range res.Failed {
		output[s.Stack+"/"+s.Service] = s.FailureOutput
	}
	var rolling, done []string
	for _, v := range res.Verdicts {
		name := v.Stack + "/" + v.Service
		switch v.Outcome {
		case control.OutcomeFailed:
			fmt.Fprintf(b, "  %s: %s\n", name, escapeControl(v.Reason))
			if out := output[name]; out != "" {
				b.WriteString(lastLines(out, failureLines, "    | "))
			}
		case control.OutcomeConverged:
			done = append(done, name)
		default:
			rolling = append(rolling, name)
		}
	}
	if len(done) > 0 {
		fmt.Fprintf(b, "  converged: %s\n", strings.Join(done, ", "))
	}
	if len(rolling) > 0 {
		fmt.Fprintf(b, "  still rolling out: %s (engenho status follows them)\n", strings.Join(rolling, ", "))
	}
}
