package main

import (
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
)

// app holds what every subcommand shares: flags, output streams, logger.
type app struct {
	stdout, stderr io.Writer
	configPath     string
	logLevel       string
	logFormat      string
	log            zerolog.Logger
	cpuProfile     string       // hidden --cpuprofile: where a CPU profile of the run goes
	stopProfile    func() error // ends the profile; set while one runs

	// Test hooks; zero in production.
	leaseTTL   time.Duration                     // the KV lease TTL of direct mode (default serveLeaseTTL)
	wrapStores func(engine.Stores) engine.Stores // wraps the backends of direct-mode runs
}

func (a *app) kvLeaseTTL() time.Duration {
	if a.leaseTTL > 0 {
		return a.leaseTTL
	}
	return serveLeaseTTL
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
			if err := a.startProfile(); err != nil {
				return err
			}
			return a.setupLogging()
		},
	}
	root.PersistentFlags().StringVar(&a.configPath, "config", "distributor.yaml", "configuration file")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "console", "log format: console or json")
	// For measuring the CLI itself (docs/benchmarks.md); not a user feature.
	root.PersistentFlags().StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the run to this file")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
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

// startProfile starts the CPU profile --cpuprofile asks for; run stops it.
func (a *app) startProfile() error {
	if a.cpuProfile == "" {
		return nil
	}
	f, err := os.Create(a.cpuProfile)
	if err != nil {
		return usageErr("--cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return usageErr("--cpuprofile: %v", err)
	}
	a.stopProfile = func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}
	return nil
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

// classify maps errors to exit codes: engine.Classify, plus cobra's own
// usage errors.
func classify(err error) int {
	if strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown flag") {
		return exitUsage
	}
	return engine.Classify(err).ExitCode
}

func requireFlag(name, value string) error {
	if value == "" {
		return usageErr("--%s is required", name)
	}
	return nil
}
