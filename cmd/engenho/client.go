package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/runtime/control"
)

// This file holds what every client subcommand shares: the global flags,
// the connection to the daemon, exit codes (0 ok, 1 request failed, 2
// usage) and --json output.

const (
	defaultDataDir = "/var/lib/engenho"
	socketEnv      = "ENGENHO_SOCKET"
)

// setupClientRoot adds the client's persistent flags to the root and makes
// usage errors (bad flags, unknown subcommands) exit with code 2. newRoot
// calls it.
func setupClientRoot(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.String("socket", "", "control socket (default $"+socketEnv+", else DATA-DIR/control/engenho.sock)")
	pf.String("data-dir", defaultDataDir, "the daemon's data directory, where the client finds the socket")
	pf.Bool("json", false, "print the daemon's answers as JSON instead of tables")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	// A root that runs, so an unknown subcommand is a usage error (exit 2)
	// rather than cobra's plain error.
	root.Args = cobra.ArbitraryArgs
	root.SuggestionsMinimumDistance = 2
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageError(errors.New(msg))
		}
		return cmd.Help()
	}
}

// usageError exits with 2.
func usageError(err error) error { return &exitError{code: 2, err: err} }

// failure exits with 1.
func failure(err error) error { return &exitError{code: 1, err: err} }

// usageArgs makes an argument-count check a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError(fmt.Errorf("%w (usage: %s)", err, cmd.UseLine()))
		}
		return nil
	}
}

// socketPath is --socket, else a --data-dir given on the command line
// (DIR/control/engenho.sock), else $ENGENHO_SOCKET, else the default data
// directory's socket. What the command line says beats the environment:
// `engenho --data-dir /srv/b stop` must never stop the daemon an exported
// ENGENHO_SOCKET names.
func socketPath(cmd *cobra.Command) string {
	flags := cmd.Flags()
	if f := flags.Lookup("socket"); f != nil && f.Changed {
		return f.Value.String()
	}
	dataDir := flags.Lookup("data-dir")
	if dataDir != nil && dataDir.Changed && dataDir.Value.String() != "" {
		return filepath.Join(dataDir.Value.String(), "control", "engenho.sock")
	}
	if env := os.Getenv(socketEnv); env != "" {
		return env
	}
	return filepath.Join(defaultDataDir, "control", "engenho.sock")
}

// jsonOutput reports whether --json was given.
func jsonOutput(cmd *cobra.Command) bool {
	v, err := cmd.Flags().GetBool("json")
	return err == nil && v
}

// session is one client subcommand's run: its connection, its output and
// whether it prints JSON.
type session struct {
	ctx  context.Context
	c    *control.Client
	sock string // where c was dialled, to dial again after a long pause
	out  io.Writer
	json bool
}

// withClient dials the daemon and runs fn; Ctrl-C cancels ctx. Any error
// fn returns exits 1 unless it already carries a code.
func withClient(cmd *cobra.Command, fn func(s *session) error) error {
	// The daemon's control.max_request (4KiB..64MiB) is the limit that
	// counts: the client sends up to the largest it may be set to.
	c, err := control.DialWith(socketPath(cmd), control.ClientOptions{MaxRequest: clientMaxRequest})
	if err != nil {
		return failure(err)
	}
	defer c.Close()
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := &session{ctx: ctx, c: c, sock: socketPath(cmd), out: cmd.OutOrStdout(), json: jsonOutput(cmd)}
	if err := fn(s); err != nil {
		var coded *exitError
		if errors.As(err, &coded) {
			return err
		}
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return failure(errInterrupted)
		}
		return failure(err)
	}
	return nil
}

// clientMaxRequest is the largest control.max_request a daemon accepts.
const clientMaxRequest = 64 << 20

// errInterrupted is what a command interrupted by Ctrl-C (or SIGTERM)
// says: the client stopped, the daemon did not.
var errInterrupted = errors.New("interrupted: this command stopped waiting; what the daemon had accepted goes on (engenho status shows where it is)")

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// show prints v as JSON with --json, else the text human gives.
func (s *session) show(v any, human func() string) error {
	if s.json {
		return printJSON(s.out, v)
	}
	_, err := io.WriteString(s.out, human())
	return err
}

// parseServiceRef reads STACK/SERVICE.
func parseServiceRef(arg string) (control.ServiceRef, error) {
	stack, service, ok := strings.Cut(arg, "/")
	if !ok || strings.Contains(service, "/") {
		return control.ServiceRef{}, usageError(fmt.Errorf("%q: want STACK/SERVICE", arg))
	}
	if err := checkName("stack", stack); err != nil {
		return control.ServiceRef{}, err
	}
	if err := checkName("service", service); err != nil {
		return control.ServiceRef{}, err
	}
	return control.ServiceRef{Stack: stack, Service: service}, nil
}

// checkName is a usage error for a name the daemon would refuse anyway.
func checkName(what, name string) error {
	if what == "service" {
		// Compose allows "_" in service names (stackfile.ValidServiceName).
		if !stackfile.ValidServiceName(name) {
			return usageError(fmt.Errorf("service name %q: want [a-z0-9][a-z0-9_-]{0,62}", name))
		}
		return nil
	}
	if !stackfile.ValidName(name) {
		return usageError(fmt.Errorf("%s name %q: want [a-z0-9][a-z0-9-]{0,62}", what, name))
	}
	return nil
}
