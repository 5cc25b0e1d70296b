package main

import (
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
)

// app holds what every subcommand shares: flags, output streams, logger.
type app struct {
	stdout, stderr io.Writer
	configPath     string
	logLevel       string
	logFormat      string
	log            zerolog.Logger
}

func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, log: zerolog.Nop()}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "distributor",
		Short:         "Publish immutable source bundles to local folders and S3, with a catalog beside the outputs",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setupLogging()
		},
	}
	root.PersistentFlags().StringVar(&a.configPath, "config", "distributor.yaml", "configuration file")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "console", "log format: console or json")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(exitUsage, err) })
	root.AddCommand(
		a.bundleCommand(),
		a.configCommand(),
		a.planCommand(),
		a.applyCommand(),
		a.catalogCommand(),
	)
	for _, c := range a.extraCommands() {
		root.AddCommand(c)
	}
	return root
}

func (a *app) setupLogging() error {
	lvl, err := zerolog.ParseLevel(strings.ToLower(a.logLevel))
	if err != nil || a.logLevel == "" {
		return usageErr("--log-level %q: use debug, info, warn or error", a.logLevel)
	}
	var w io.Writer
	switch a.logFormat {
	case "json":
		w = a.stderr
	case "console":
		w = zerolog.ConsoleWriter{Out: a.stderr, TimeFormat: time.TimeOnly, NoColor: !isTerminal(a.stderr)}
	default:
		return usageErr("--log-format %q: use console or json", a.logFormat)
	}
	a.log = zerolog.New(w).Level(lvl).With().Timestamp().Logger()
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// loadConfig reads --config; any problem is a usage/config error (exit 2).
func (a *app) loadConfig() (*config.Config, error) {
	cfg, err := config.Load(a.configPath)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return cfg, nil
}

// args returns a cobra.Args that reports arity problems as usage errors.
func args(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) != n {
			return usageErr("%s takes %s (see --help)", cmd.CommandPath(), names)
		}
		return nil
	}
}

func noArgs(cmd *cobra.Command, a []string) error {
	if len(a) != 0 {
		return usageErr("%s takes no arguments, got %q", cmd.CommandPath(), a)
	}
	return nil
}

// classify maps domain errors to exit codes.
func classify(err error) int {
	switch {
	case errors.Is(err, engine.ErrCollision),
		errors.Is(err, engine.ErrSuperseded),
		errors.Is(err, catalog.ErrInvalid),
		errors.Is(err, catalog.ErrNewer),
		errors.Is(err, lease.ErrHeld),
		errors.Is(err, planner.ErrEmptyReplacement),
		errors.Is(err, planner.ErrTooManyDeletes),
		errors.Is(err, engine.ErrLegacyCatalog):
		return exitRefused
	case errors.Is(err, planner.ErrDuplicateOutput), errors.Is(err, planner.ErrPathConflict), errors.Is(err, planner.ErrSelector),
		errors.Is(err, config.ErrInvalid), errors.Is(err, bundle.ErrBadLocation):
		return exitUsage
	case strings.HasPrefix(err.Error(), "unknown command"), strings.HasPrefix(err.Error(), "unknown flag"):
		return exitUsage
	}
	return exitFailed
}

func requireFlag(name, value string) error {
	if value == "" {
		return usageErr("--%s is required", name)
	}
	return nil
}
