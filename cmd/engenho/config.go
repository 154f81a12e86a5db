package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
)

// engenho config FILE... [--profile NAME]... [--json]: load stack files
// offline, as `docker compose config` does: validate, interpolate (from
// this command's environment and the .env beside each file), and print
// the normalized stack with every default applied and secrets redacted.
// Every problem of every file goes to stderr and the exit status is 1.
// No daemon is asked: what only the node can judge (a driver it has, a
// port in use) is checked by `engenho apply`.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var profiles []string
		cmd := &cobra.Command{
			Use:   "config FILE... [--profile NAME]... [--json]",
			Short: "Validate and interpolate stack files offline and print them normalized",
			Args:  usageArgs(cobra.MinimumNArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				asJSON, _ := cmd.Flags().GetBool("json")
				return runConfig(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, profiles, asJSON)
			},
		}
		cmd.Flags().StringArrayVar(&profiles, "profile", nil, "activate a Compose profile (repeatable)")
		return cmd
	})
}

// errConfigRefused: some file had problems; they are printed already.
var errConfigRefused = errors.New("refused")

func runConfig(out, errOut io.Writer, paths, profiles []string, asJSON bool) error {
	env := applyEnvironment()
	var (
		rendered [][]byte
		bad      int
	)
	for _, p := range paths {
		b, err := loadConfig(p, env, profiles, errOut, asJSON)
		if err != nil {
			bad++
			continue
		}
		rendered = append(rendered, b)
	}
	if bad > 0 {
		return failure(fmt.Errorf("%d of %d stack files %w (each problem is listed above)", bad, len(paths), errConfigRefused))
	}
	for i, b := range rendered {
		if i > 0 && !asJSON {
			fmt.Fprintln(out, "---")
		}
		out.Write(b)
		if asJSON {
			fmt.Fprintln(out)
		}
	}
	return nil
}

// loadConfig parses one file and renders it; its warnings and problems go
// to errOut, one "FILE:LINE: KEY: message" line each.
func loadConfig(path string, env map[string]string, profiles []string, errOut io.Writer, asJSON bool) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(errOut, "error: stack file: %v\n", err)
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		fmt.Fprintf(errOut, "error: stack file %s: %v\n", path, err)
		return nil, err
	}
	st, err := stackfile.ParseWith(path, data, stackfile.Options{Env: env, Dir: dir, Profiles: profiles})
	var pe *stackfile.ParseError
	if errors.As(err, &pe) {
		printProblems(errOut, "warning", pe.Warnings)
		printProblems(errOut, "error", pe.Problems)
		return nil, err
	}
	if err != nil {
		fmt.Fprintf(errOut, "error: %v\n", err)
		return nil, err
	}
	printProblems(errOut, "warning", st.Warnings)
	printProblems(errOut, "warning", stackfile.OfflineWarnings(st))
	printProblems(errOut, "warning", hostMountWarnings(st))
	if asJSON {
		return stackfile.RenderJSON(st)
	}
	return stackfile.RenderYAML(st)
}

func printProblems(w io.Writer, label string, ps []stackfile.Problem) {
	for _, p := range ps {
		fmt.Fprintf(w, "%s: %s\n", label, p)
	}
}

// hostMountWarnings: the process driver mounts a service's volumes and
// binds over paths of this machine and creates none, so a target (or bind
// source) missing here is refused at apply on this node; config says so
// as a warning, since the file may be meant for another node.
func hostMountWarnings(st *stackfile.Stack) []stackfile.Problem {
	var out []stackfile.Problem
	for _, name := range st.Order {
		svc := st.Services[name]
		if svc.Driver != stackfile.DefaultDriver {
			continue
		}
		for i, v := range svc.Volumes {
			key := fmt.Sprintf("services.%s.volumes[%d]", name, i)
			if _, err := os.Stat(v.Target); err != nil {
				out = append(out, st.Locate(stackfile.Problem{Key: key, Err: stackfile.ErrWarning,
					Msg: fmt.Sprintf("target %s does not exist on this machine: the process driver mounts over host paths and creates none (apply refuses it here); create it, or use x-engenho.driver: incus", v.Target)}))
			}
			if v.Type == drivers.MountBind {
				if _, err := os.Stat(v.Source); err != nil {
					out = append(out, st.Locate(stackfile.Problem{Key: key, Err: stackfile.ErrWarning,
						Msg: fmt.Sprintf("bind source %s does not exist on this machine (apply refuses it here)", v.Source)}))
				}
			}
		}
	}
	return out
}
