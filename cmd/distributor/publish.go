package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/stores"
)

func (a *app) publishCommand() *cobra.Command {
	var f publishFlags
	var wait, asJSON bool
	timeout := config.Duration(2 * time.Minute)
	cmd := &cobra.Command{
		Use:   "publish --pipeline P --bundle LOCATION [--destination D] [--wait]",
		Short: "Announce a bundle on NATS (bundle-ready); with --wait, print the result events",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, cfg, err := a.loadRequest(&f)
			if err != nil {
				return err
			}
			ctx := cmd.Context()

			// The digest is computed here from the bundle itself, so that
			// the event pins the exact manifest bytes; a bundle serve would
			// refuse is not read, nor announced.
			b, err := service.OpenBundle(ctx, cfg, stores.New(cfg), req)
			if err != nil {
				return err
			}
			nc, js, streams, err := a.jetStream(ctx, cfg, "publish to")
			if err != nil {
				return err
			}
			defer nc.Close()
			ev := events.BundleReady{PipelineID: req.PipelineID, Bundle: req.Bundle, ManifestDigest: b.Digest, Destinations: req.Destinations}
			var w resultWait
			if wait {
				w = resultWait{results: 1, timeout: time.Duration(timeout)} // an unknown pipeline yields one failed event
				if dests, err := service.Destinations(cfg, req); err == nil {
					w.results = len(dests)
				}
			}
			if asJSON {
				return a.announceJSON(ctx, js, streams, ev, w)
			}
			return a.announce(ctx, js, streams, ev, w)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for one result event per destination and exit with the highest code of the results: 0 published, 3 collision or superseded, a failure by its reason (docs/cli.md)")
	cmd.Flags().Var(&timeout, "timeout", "how long --wait waits")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the announcement (and with --wait the result events) as one JSON object (docs/cli.md)")
	return cmd
}

// resultWait is how many result events of an announcement to wait for, and
// how long; the zero resultWait does not wait.
type resultWait struct {
	results int
	timeout time.Duration
}

// announce publishes ev and, with w, prints the results for it.
func (a *app) announce(ctx context.Context, js jetstream.JetStream, streams *events.Streams, ev events.BundleReady, w resultWait) error {
	start := time.Now().Add(-time.Second)
	if ev.ID == "" {
		ev.ID = events.NewEventID()
	}
	pub := events.NewPublisher(js, streams.Subjects)
	seq, dup, err := pub.AnnounceBundle(ctx, ev)
	if err != nil {
		return err
	}
	note := ""
	if dup {
		note = " (duplicate: already announced)"
	}
	fmt.Fprintf(a.stdout, "announced %s: pipeline %s, bundle %s, seq %d%s\n", ev.ID, ev.PipelineID, ev.Bundle, seq, note)
	if w.results == 0 {
		return nil
	}
	results, err := waitResults(ctx, streams, ev, start, w)
	for _, r := range results {
		printEvent(a.stdout, r)
	}
	if err != nil {
		return err
	}
	return resultsErr(ev.ID, results)
}

// announceJSON is announce printing one publishJSON object.
func (a *app) announceJSON(ctx context.Context, js jetstream.JetStream, streams *events.Streams, ev events.BundleReady, w resultWait) error {
	start := time.Now().Add(-time.Second)
	if ev.ID == "" {
		ev.ID = events.NewEventID()
	}
	seq, dup, err := events.NewPublisher(js, streams.Subjects).AnnounceBundle(ctx, ev)
	if err != nil {
		return err
	}
	out := publishJSON{EventID: ev.ID, PipelineID: ev.PipelineID, Bundle: ev.Bundle, ManifestDigest: ev.ManifestDigest, Seq: seq, Duplicate: dup, Results: []events.Result{}}
	if w.results == 0 {
		return a.printJSON(out)
	}
	results, err := waitResults(ctx, streams, ev, start, w)
	out.Results = append(out.Results, results...)
	if err == nil {
		err = resultsErr(ev.ID, results)
	}
	if err != nil {
		out.Error = a.errorLine(err)
	}
	if jerr := a.printJSON(out); jerr != nil {
		return jerr
	}
	return err
}

// waitResults collects the result events of one bundle event.
func waitResults(parent context.Context, streams *events.Streams, ev events.BundleReady, since time.Time, w resultWait) ([]events.Result, error) {
	expect, timeout := w.results, w.timeout
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	var out []events.Result
	seen := map[string]bool{}
	errDone := errors.New("done")
	err := readEvents(ctx, streams, eventFilter{pipeline: ev.PipelineID, since: since}, true, func(r events.Result, _ jetstream.MsgMetadata) error {
		if r.BundleEventID != ev.ID || seen[r.DestinationID] {
			return nil
		}
		seen[r.DestinationID] = true
		out = append(out, r)
		if len(out) >= expect || r.DestinationID == "" {
			return errDone
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return out, nil
	}
	if err != nil && ctx.Err() != nil {
		// The wait ended (interrupt or timeout) before or while the
		// reader started: that is the outcome to report, not the
		// reader's context error.
		err = nil
	}
	if err == nil && len(out) < expect && parent.Err() != nil {
		return out, fmt.Errorf("interrupted while waiting for results of %s (%d of %d); it stays announced: `distributor events tail` shows its results", ev.ID, len(out), expect)
	}
	if err == nil && len(out) < expect {
		return out, &resultsTimeoutError{timeout: timeout, eventID: ev.ID, got: len(out), want: expect}
	}
	return out, err
}

// resultsTimeoutError is a wait for result events that ended at its
// timeout with fewer results than destinations; the event stays announced.
type resultsTimeoutError struct {
	timeout   time.Duration
	eventID   string
	got, want int
}

func (e *resultsTimeoutError) Error() string {
	return fmt.Sprintf("timed out after %s waiting for results of %s (%d of %d): is `distributor serve` running?", e.timeout, e.eventID, e.got, e.want)
}

// resultsErr turns result events into the command's exit status, with one
// line naming every destination that was not published and the command
// that publishes it: `replay --id` once the cause of a collision or a
// failure is fixed, `replay --id --allow-older` over a newer version.
func resultsErr(eventID string, results []events.Result) error {
	code := exitOK
	var problems []string
	failed, superseded := false, false
	for _, r := range results {
		dest := r.DestinationID
		if dest == "" {
			dest = "pipeline " + r.PipelineID
		}

		// The highest code wins: a refusal says more than a failure.
		code = max(code, service.ResultExitCode(r))
		switch r.Type {
		case events.TypeCollision:
			failed = true
			problems = append(problems, fmt.Sprintf("%s: collision with %d unmanaged path(s)", dest, len(r.Collisions)))
		case events.TypeSuperseded:
			superseded = true
			problems = append(problems, fmt.Sprintf("%s: superseded by a newer version of the source", dest))
		case events.TypeFailed:
			failed = true
			problems = append(problems, fmt.Sprintf("%s: failed (%s)", dest, r.Reason))
		}
	}
	if code == exitOK {
		return nil
	}
	var hints []string
	if failed {
		hints = append(hints, fmt.Sprintf("once the cause is fixed, `distributor replay --id %s` publishes again", eventID))
	}
	if superseded {
		hints = append(hints, fmt.Sprintf("`distributor replay --id %s --allow-older` publishes it over the newer version (a roll back)", eventID))
	}
	return withCode(code, fmt.Errorf("not published to %s (see the events above); %s", strings.Join(problems, ", "), strings.Join(hints, "; ")))
}
