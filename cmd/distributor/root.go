package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/internal/suggest"
	"github.com/distributor/distributor/service"
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

	verbose, quiet bool // --verbose: list every change; --quiet: no progress

	// written maps local roots to the relative path the configuration
	// gives them (see rootsAsWritten).
	written map[string]string

	// Test hooks; zero in production.
	terminal   func(io.Writer) bool                // overrides isTerminal
	leaseTTL   time.Duration                       // the KV lease TTL of direct mode (default serveLeaseTTL)
	wrapStores func(service.Stores) service.Stores // wraps the backends of direct-mode runs
	now        func() time.Time                    // the clock of direct-mode runs (catalog times, prune cutoff)
	reportWait time.Duration                       // bounds a direct-mode event publication (default reportTimeout)
	leaseWait  time.Duration                       // how long a direct-mode run waits for a held root (default directLeaseWait)
}

// clock is the time now: the test hook's when set.
func (a *app) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
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
		Version:       versionLine(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.startProfile(); err != nil {
				return err
			}
			return a.setupLogging()
		},
	}
	root.PersistentFlags().StringVar(&a.configPath, "config", "distributor.yaml", "configuration file")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().BoolVar(&a.verbose, "verbose", false, "on a terminal, list every change (default: the first 20 per destination and a summary)")
	root.PersistentFlags().BoolVar(&a.quiet, "quiet", false, "draw no progress bars")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "", "log format: json or console (default: console when stderr is a terminal, else json)")

	// For measuring the CLI itself (docs/benchmarks.md); not a user feature.
	root.PersistentFlags().StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the run to this file")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return withCode(exitUsage, suggestFlag(cmd, err)) })
	root.AddCommand(
		a.bundleCommand(),
		a.configCommand(),
		a.planCommand(),
		a.applyCommand(),
		a.catalogCommand(),
		a.versionCommand(),
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
	format := a.logFormat
	if format == "" {
		// A person reads a terminal; anything else is a log collector.
		format = "json"
		if isTerminal(a.stderr) {
			format = "console"
		}
	}
	var w io.Writer
	switch format {
	case "json":
		w = a.stderr
	case "console":
		w = zerolog.ConsoleWriter{Out: a.stderr, TimeFormat: logTimeFormat, NoColor: !isTerminal(a.stderr)}
	default:
		return usageErr("--log-format %q: use json or console", a.logFormat)
	}
	a.log = zerolog.New(w).Level(lvl).Hook(timestampHook{})
	return nil
}

// logTimeFormat is RFC 3339 with milliseconds.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// timestampHook stamps every line with the time in logTimeFormat (zerolog's
// own Timestamp uses a package-level format, which the CLI leaves alone).
type timestampHook struct{}

func (timestampHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().UTC().Format(logTimeFormat))
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
	a.written = rootsAsWritten(a.configPath, cfg)
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

// classify maps errors to exit codes: service.Classify, plus cobra's own
// usage errors.
func classify(err error) int {
	if strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown flag") {
		return exitUsage
	}
	return service.Classify(err).ExitCode
}

// suggestFlag adds the closest flag of cmd to an "unknown flag: --x" error,
// as cobra does for commands.
func suggestFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	visit := func(f *pflag.Flag) { names = append(names, f.Name) }
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	sort.Strings(names)                     // equally near: the first in order
	best := suggest.Closest(name, names, 2) // at most two edits, like cobra's SuggestionsMinimumDistance
	if best == "" {
		return err
	}
	return fmt.Errorf("%w (did you mean --%s?)", err, best)
}

func requireFlag(name, value string) error {
	if value == "" {
		return usageErr("--%s is required", name)
	}
	return nil
}
