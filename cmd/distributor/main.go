// Command distributor publishes source bundles to destinations and keeps the
// v4 catalog beside the outputs. One file per subcommand.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/service"
)

// version is set at build time with -ldflags "-X main.version=…" (releases);
// otherwise from the build information (see resolveVersion).
var version string

func main() {
	tuneGC(os.Getenv, gcSmallHeap, gcMediumHeap)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI and returns the process exit code. Errors are one
// line on stderr, never a stack trace.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return newApp(stdout, stderr).run(ctx, args)
}

func (a *app) run(ctx context.Context, args []string) int {
	stderr := a.stderr
	cmd := a.rootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(a.stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if a.stopProfile != nil {
		if perr := a.stopProfile(); perr != nil {
			fmt.Fprintf(stderr, "distributor: --cpuprofile: %s\n", perr)
		}
	}
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	fmt.Fprintf(stderr, "distributor: %s\n", a.errorLine(err))
	return code
}

// errorLine is err as the one line on stderr says it (after
// "distributor: "); the error fields of --json hold the same text.
func (a *app) errorLine(err error) string {
	return a.showRootsIn(oneLine(err.Error())) + fixHint(err)
}

// Exit codes (service.Classify maps errors to them).
const (
	exitOK      = service.ExitOK
	exitFailed  = service.ExitFailed
	exitUsage   = service.ExitUsage
	exitRefused = service.ExitRefused
	exitDamaged = service.ExitDamaged
)

// codeError carries an exit code through cobra.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codeError{code: code, err: err}
}

func usageErr(format string, a ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, a...))
}

func exitCode(err error) int {
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return classify(err)
}

// fixHint names the fix for errors whose own text cannot know it.
func fixHint(err error) string {
	if errors.Is(err, bundle.ErrContentMismatch) || errors.Is(err, bundle.ErrMissingFile) {
		return " (the bundle's files changed after `bundle create`: run `distributor bundle create` on it again, or restore them)"
	}
	return ""
}

func oneLine(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}
