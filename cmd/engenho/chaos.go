//go:build chaos

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/chaos"
	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/runtime/control"
)

// engenho chaos run|inject: the chaos suite (CHS-1..CHS-5). `run` starts
// its own daemons and runs a seeded campaign; `inject` sends one fault to
// a running daemon that has chaos enabled.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		cmd := &cobra.Command{
			Use:   "chaos",
			Short: "Run chaos campaigns, or inject one fault into a chaos-enabled daemon",
			Args:  usageArgs(cobra.NoArgs),
			RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		}
		cmd.AddCommand(chaosRunCmd(), chaosInjectCmd())
		return cmd
	})
}

func chaosRunCmd() *cobra.Command {
	var opts chaos.Options
	var plant, bin string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a seeded chaos campaign against daemons of its own",
		Long: "Start daemons of this binary in temporary data directories with chaos enabled, deploy the\n" +
			"campaign's stacks, inject --faults faults drawn from --seed, check the invariants after each\n" +
			"and write report.json and report.md to --report. The same seed replays the same schedule.\n" +
			"Exit 0 when nothing was violated, 1 on any violation, 2 on a usage error.\n" +
			"Scenarios: " + strings.Join(chaos.ScenarioNames(), ", ") + ".",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := chaos.LookupScenario(opts.Scenario); err != nil {
				return usageError(err)
			}
			if plant != "" {
				p, err := inject.ParsePlant(plant)
				if err != nil {
					return usageError(err)
				}
				opts.Plant = &p
			}
			if bin == "" {
				exe, err := os.Executable()
				if err != nil {
					return failure(err)
				}
				bin = exe
			}
			opts.Bin, opts.Out = bin, cmd.OutOrStdout()
			opts.Require = strings.Split(os.Getenv("ENGENHO_REQUIRE"), ",")
			// Ctrl-C or SIGTERM ends the campaign early; its daemons and
			// workloads are still torn down.
			parent := cmd.Context()
			if parent == nil {
				parent = context.Background()
			}
			ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := chaos.Run(ctx, opts)
			if err != nil && ctx.Err() != nil && rep != nil {
				return &exitError{code: 130, err: fmt.Errorf("chaos campaign %s seed %d interrupted: %s (%d violations so far)",
					opts.Scenario, opts.Seed, rep.Aborted, len(rep.Violations()))}
			}
			if err != nil {
				return failure(err)
			}
			if !rep.OK() {
				return &exitError{code: 1, err: fmt.Errorf("chaos campaign %s seed %d: %d violations%s", opts.Scenario, opts.Seed,
					len(rep.Violations()), abortNote(rep.Aborted))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Scenario, "scenario", "ci", "scenario: "+strings.Join(chaos.ScenarioNames(), ", "))
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the fault schedule")
	f.IntVar(&opts.Faults, "faults", 200, "faults to inject")
	f.StringSliceVar(&opts.Kinds, "kinds", nil, "draw only these fault kinds of the scenario's mix (comma-separated, e.g. workload.stop,daemon.stop)")
	f.StringVar(&opts.ReportDir, "report", "", "directory for report.json and report.md")
	f.StringVar(&opts.WorkDir, "work-dir", "", "where the temporary data directories go (default the system's temp dir)")
	f.BoolVarP(&opts.Verbose, "verbose", "v", false, "print what each wait for recovery is still waiting for")
	f.BoolVar(&opts.Keep, "keep", false, "keep the temporary directories (always kept after a violation)")
	f.StringVar(&bin, "bin", "", "the engenho binary the daemons run (default this one)")
	f.StringVar(&plant, "plant", "", "plant a bug in the daemons (self-test): "+strings.Join([]string{string(inject.PlantForgetAdopt), string(inject.PlantStopNoop),
		string(inject.PlantSkipJournalCheck), string(inject.PlantHideExit), string(inject.PlantDropPanic), string(inject.PlantKeepFailedWrite)}, ", "))
	return cmd
}

func abortNote(aborted string) string {
	if aborted == "" {
		return ""
	}
	return "; aborted: " + aborted
}

func chaosInjectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inject KIND [TARGET] [KEY=VALUE...]",
		Short: "Send one chaos op to a daemon with chaos enabled",
		Long: "Kinds: panic TARGET (an actor path, see `engenho tree`); driver and store with params op, driver,\n" +
			"match, mode (fail|timeout|hang|latency|conflict), kind, count, delay; clear; faults; instances;\n" +
			"goroutines; expire-lease HOST. The daemon refuses every kind unless chaos.enabled is set.",
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := control.ChaosArgs{Kind: args[0]}
			for _, arg := range args[1:] {
				if k, v, ok := strings.Cut(arg, "="); ok {
					if a.Params == nil {
						a.Params = map[string]string{}
					}
					a.Params[k] = v
				} else if a.Target == "" {
					a.Target = arg
				} else {
					return usageError(fmt.Errorf("%q: want KEY=VALUE (the target is already %q)", arg, a.Target))
				}
			}
			return withClient(cmd, func(s *session) error {
				res, err := s.c.Chaos(s.ctx, a)
				if err != nil {
					return err
				}
				return s.show(res, func() string { return strings.TrimSpace(res.Kind+" "+res.Target+": "+res.Detail) + "\n" })
			})
		},
	}
}
