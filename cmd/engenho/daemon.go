package main

import (
	"context"
	"fmt"
	"os"

	"github.com/engenho/engenho/runtime/daemon"
	"github.com/engenho/engenho/runtime/logging"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var configPath, dataDir, logFormat string
		cmd := &cobra.Command{
			Use:   "daemon",
			Short: "Run the node supervisor",
			Long: "Run the node supervisor (spec DMN-1). SIGTERM and SIGINT drain and exit, SIGHUP\n" +
				"re-reads the config. The control socket is DATA/control/engenho.sock.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				format, err := logging.ParseFormat(logFormat)
				if err != nil {
					return usageError(fmt.Errorf("--log-format: %w", err))
				}
				return runDaemon(configPath, dataDir, format, cmd.Flags().Changed("log-format"))
			},
		}
		cmd.Flags().StringVar(&configPath, "config", "/etc/engenho/engenho.yaml", "daemon config file")
		cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory (overrides the config's data_dir; default /var/lib/engenho)")
		cmd.Flags().StringVar(&logFormat, "log-format", "auto", "log format: auto (console on a terminal, JSON otherwise), json or console; overrides the config's log.format")
		return cmd
	})
}

// chaosHooks makes the daemon's fault-injection hooks; only the chaos build
// sets it (chaos_hooks.go, -tags chaos). In the shipped binary it is nil.
var chaosHooks func(*logging.Logger) *daemon.Hooks

// runDaemon runs the daemon. The logger starts in the flag's format; unless
// the flag was given, the daemon switches it to the config's log.format
// once it has read the file (DMN-17).
func runDaemon(configPath, dataDir, logFormat string, formatFixed bool) error {
	log := logging.New(os.Stderr, logFormat, zerolog.InfoLevel)
	logging.RouteSlog(log.Logger)
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the engenho binary: %w", err)
	}
	var hooks *daemon.Hooks
	if chaosHooks != nil {
		hooks = chaosHooks(log)
	}
	d, err := daemon.New(daemon.Options{ConfigPath: configPath, DataDir: dataDir, Bin: bin, Log: log, LogFormatFixed: formatFixed, Hooks: hooks})
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	if code := d.Run(context.Background()); code != 0 {
		return &exitError{code: code, err: fmt.Errorf("daemon exited with code %d", code)}
	}
	return nil
}
