package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/stores"
)

// rollbackOptions are rollback's flags.
type rollbackOptions struct {
	dest, to, pipeline, bundle  string
	dryRun, asJSON, deleteLater bool
	timeout                     config.Duration
}

func (a *app) rollbackCommand() *cobra.Command {
	o := rollbackOptions{timeout: config.Duration(2 * time.Minute)}
	cmd := &cobra.Command{
		Use:   "rollback --destination D --to <sha256:DIGEST | EVENT> [--pipeline P] [--bundle LOCATION] [--delete-later] [--dry-run]",
		Short: "Publish an earlier version of a destination again, as an operator, after checking its bundle still has the recorded manifest digest",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.rollback(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.dest, "destination", "", "destination to roll back")
	cmd.Flags().StringVar(&o.to, "to", "", "the version: its manifest digest (sha256:…, at least 8 hex digits) or its published event id (distributor history lists both)")
	cmd.Flags().StringVar(&o.pipeline, "pipeline", "", "the owner's pipeline (default: the one that published the version)")
	cmd.Flags().StringVar(&o.bundle, "bundle", "", "the version's bundle location, when the events stream does not know it (no NATS, or older than the stream keeps)")
	cmd.Flags().BoolVar(&o.deleteLater, "delete-later", false, "additive destination: also delete the owner's paths that only later versions of the source wrote (by default they stay; --dry-run lists them as deletes)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "find the version, check its bundle and print the plan; change nothing")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the roll back as one JSON object (docs/cli.md)")
	cmd.Flags().Var(&o.timeout, "timeout", "how long to wait for serve's result")
	return cmd
}

// rollbackJSON is rollback --json.
type rollbackJSON struct {
	DestinationID string `json:"destination_id"`

	// PipelineID is the owner's pipeline; left out when a failure came
	// before it was known.
	PipelineID string `json:"pipeline_id,omitempty"`

	// Via is "serve" (announced on the admin subject) or "direct".
	Via     string      `json:"via"`
	DryRun  bool        `json:"dry_run"`
	Version versionJSON `json:"version"`

	// EventID is the roll back's bundle event.
	EventID string `json:"event_id,omitempty"`

	// Plan is what the roll back would do (--dry-run).
	Plan *counts `json:"plan,omitempty"`

	// Result is the roll back's result event (direct without NATS: the
	// event it would have published).
	Result *events.Result `json:"result,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// versionJSON is the version rolled back to.
type versionJSON struct {
	Bundle string            `json:"bundle"`
	Digest string            `json:"digest"`
	Source *events.SourceRef `json:"source,omitempty"`

	// EventID and Time: the published event that first put it there.
	EventID string     `json:"event_id,omitempty"`
	Time    *time.Time `json:"time,omitempty"`
}

func toVersionJSON(v service.Version) versionJSON {
	j := versionJSON{Bundle: v.Bundle, Digest: v.Digest, Source: v.Source, EventID: v.EventID}
	if !v.Time.IsZero() {
		t := v.Time.UTC()
		j.Time = &t
	}
	return j
}

// rollback finds the version (the events stream when NATS is known, else
// --bundle), checks its bundle, and publishes it with allow_older: through
// serve on the admin subject when NATS is known, directly otherwise.
func (a *app) rollback(ctx context.Context, o rollbackOptions) error {
	if err := requireFlag("to", o.to); err != nil {
		return err
	}
	if o.bundle != "" {
		loc, err := absLocation(o.bundle)
		if err != nil {
			return err
		}
		o.bundle = loc
	}
	cfg, d, err := a.loadDestination(o.dest)
	if err != nil {
		return err
	}
	nc, err := a.connectKnownNATS(cfg)
	if err != nil && !errors.Is(err, errNoNATS) {
		return err
	}
	var conn *streamsConn
	if nc != nil {
		js, streams, err := setupStreams(ctx, nc, cfg, zerolog.Nop())
		if err != nil {
			nc.Close()
			return err
		}
		conn = &streamsConn{nc: nc, js: js, streams: streams}
		defer conn.close()
	}
	v, err := a.findVersion(ctx, cfg, d, conn, o)
	if err != nil {
		return err
	}
	out := rollbackJSON{DestinationID: d.ID, PipelineID: v.PipelineID, Via: "direct", DryRun: o.dryRun}
	if conn != nil {
		out.Via = "serve"
	}

	// Only reads: the bundle's manifest, and with --dry-run the root.
	svc := a.newService(cfg, a.log, nil, 0)
	v, b, err := svc.CheckVersion(ctx, v)
	v.DeleteLater = o.deleteLater
	out.Version = toVersionJSON(v)
	if err == nil && v.EventID == "" {
		v.PipelineID, err = a.rollbackPipeline(ctx, cfg, d, v)
		out.PipelineID = v.PipelineID
	}
	if err != nil {
		return a.rollbackDone(o.asJSON, out, err)
	}
	if !o.asJSON {
		fmt.Fprintf(a.stdout, "rolling back %s (%s) to %s from %s%s\n", d.ID, v.PipelineID, v, v.Bundle, publishedAt(v))
	}
	switch {
	case o.dryRun:
		res, err := svc.Plan(ctx, v.Request(""), b, d)
		if err != nil {
			return a.rollbackDone(o.asJSON, out, err) // no plan to show
		}
		c := planCounts(res.Plan)
		out.Plan = &c
		if !o.asJSON {
			_ = a.printDone([]service.Done{{Destination: d, Result: res, Err: err}}, eachOptions{planOnly: true})
			how := "directly"
			if conn != nil {
				how = "through serve"
			}
			fmt.Fprintf(a.stdout, "dry run: nothing announced or written (the roll back would go %s)\n", how)
			return nil
		}
		return a.rollbackDone(o.asJSON, out, err)
	case conn != nil:
		return a.rollbackThroughServe(ctx, conn, v, o, out)
	}
	return a.rollbackDirect(ctx, cfg, d, v, o, out)
}

// findVersion resolves --to: from the destination's history when NATS is
// known (--bundle then overrides the location), else from --bundle, whose
// digest must start with --to.
func (a *app) findVersion(ctx context.Context, cfg *config.Config, d config.Destination, conn *streamsConn, o rollbackOptions) (service.Version, error) {
	if conn == nil {
		if !service.IsDigestRef(o.to) {
			return service.Version{}, usageErr("--to %q: without NATS (set nats.url or start `distributor serve`) there is no history to find an event in: give the version's digest (--to sha256:…) and its --bundle LOCATION", o.to)
		}
		if o.bundle == "" {
			return service.Version{}, usageErr("--to %s: without NATS (set nats.url or start `distributor serve`) distributor cannot know where that version's bundle is: give --bundle LOCATION", o.to)
		}

		// The pipeline once the bundle says which source it is
		// (rollbackPipeline).
		return service.Version{PipelineID: o.pipeline, DestinationID: d.ID, Bundle: o.bundle, Digest: o.to}, nil
	}
	hist, err := events.History(ctx, conn.streams.Events, conn.streams.Subjects, d.ID, o.pipeline, 0)
	if err != nil {
		return service.Version{}, err
	}
	results := make([]events.Result, len(hist))
	for i, r := range hist {
		results[i] = r.Result
	}
	v, err := service.FindVersion(results, d.ID, o.pipeline, o.to)
	if err != nil && o.bundle != "" {
		switch {
		case v.EventID != "":
			// Known, but its event does not say where the bundle was:
			// --bundle does.
		case service.IsDigestRef(o.to):
			// Not in the events stream (older than it keeps): the bundle
			// the operator names, checked against the digest.
			v = service.Version{PipelineID: o.pipeline, DestinationID: d.ID, Digest: o.to}
		default:
			return service.Version{}, err
		}
		err = nil
	}
	if err != nil {
		return service.Version{}, err
	}
	if o.bundle != "" {
		v.Bundle = o.bundle
	}
	return v, nil
}

// rollbackPipeline is the owner's pipeline of a version no event names:
// --pipeline, else the one pipeline publishing to d whose records in the
// root come from the version's source (its digest, else its id), else the
// one pipeline that publishes to d.
func (a *app) rollbackPipeline(ctx context.Context, cfg *config.Config, d config.Destination, v service.Version) (string, error) {
	configured := pipelinesOf(cfg, d.ID)
	if v.PipelineID != "" {
		if !slices.Contains(configured, v.PipelineID) {
			return "", usageErr("pipeline %q does not publish to %s (pipelines that do: %v)", v.PipelineID, d.ID, configured)
		}
		return v.PipelineID, nil
	}
	svc := &service.Service{Engine: service.NewEngine(version, nil, a.log), Config: cfg, Stores: stores.New(cfg)}
	if st, _, err := svc.Status(ctx, d, service.StatusOptions{}); err == nil {
		{
			for _, same := range []func(catalog.Source) bool{
				func(s catalog.Source) bool { return s.Digest == v.Source.Digest },
				func(s catalog.Source) bool { return s.ID == v.Source.ID },
			} {
				var found []string
				for _, ow := range st.Owners {
					if ow.Owner.DestinationID == d.ID && slices.Contains(configured, ow.Owner.PipelineID) && slices.ContainsFunc(ow.Sources, func(s service.SourceStatus) bool { return same(s.Source) }) {
						found = append(found, ow.Owner.PipelineID)
					}
				}
				if len(found) == 1 {
					return found[0], nil
				}
			}
		}
	}
	if len(configured) == 1 {
		return configured[0], nil
	}
	return "", usageErr("pipelines %v publish to %s and none holds %s there: say which one owns the version with --pipeline", configured, d.ID, v.Source.ID)
}

// rollbackThroughServe announces the roll back on the admin subject and
// waits for serve's result event.
func (a *app) rollbackThroughServe(ctx context.Context, conn *streamsConn, v service.Version, o rollbackOptions, out rollbackJSON) error {
	start := time.Now().Add(-time.Second)
	ev := v.Event(events.NewEventID())
	if _, _, err := events.NewPublisher(conn.js, conn.streams.Subjects).AnnounceAsOperator(ctx, ev); err != nil {
		return a.rollbackDone(o.asJSON, out, err)
	}
	out.EventID = ev.ID
	if !o.asJSON {
		fmt.Fprintf(a.stdout, "announced %s on the admin subject; waiting for serve\n", ev.ID)
	}
	results, err := waitResults(ctx, conn.streams, ev, start, resultWait{results: 1, timeout: time.Duration(o.timeout)})
	if timedOut := (*resultsTimeoutError)(nil); errors.As(err, &timedOut) {
		err = fmt.Errorf("no serve answered within %s; the roll back %s stays queued on the admin subject and runs when a serve processes it: check with `distributor history --destination %s`",
			timedOut.timeout, ev.ID, v.DestinationID)
	}
	if len(results) > 0 {
		out.Result = &results[0]
		if !o.asJSON {
			printEvent(a.stdout, results[0])
		}
	}
	if err == nil && out.Result != nil {
		if code := service.ResultExitCode(*out.Result); code != exitOK {
			err = withCode(code, fmt.Errorf("the roll back of %s was not published: %s: %s (`distributor replay --id %s --allow-older` tries it again once the cause is fixed)",
				v.DestinationID, resultWhy(*out.Result), out.Result.Message, ev.ID))
		}
	}
	return a.rollbackDone(o.asJSON, out, err)
}

// rollbackDirect publishes the roll back in this process, like
// `apply --allow-older`, under the lock object in the root.
func (a *app) rollbackDirect(ctx context.Context, cfg *config.Config, d config.Destination, v service.Version, o rollbackOptions, out rollbackJSON) error {
	s, err := a.directSession(ctx, cfg)
	if err != nil {
		return a.rollbackDone(o.asJSON, out, err)
	}
	defer s.close()
	if a.drawsProgress() {
		s.svc.Around, s.svc.Parallel = a.withDestinationProgress, 1
	}
	req := v.Request("rollback." + events.NewEventID())
	out.EventID = req.BundleEventID
	b, done := s.svc.Publish(ctx, req, []config.Destination{d})
	digest := v.Digest
	if b != nil {
		digest = b.Digest
	}
	r := service.ResultEvent(d.ID, done[0].Result, done[0].Err, req.Direct(digest))
	if s.ledger != nil {
		s.report(ctx, a, r)
	}
	r.SchemaVersion, r.ID = events.SchemaVersion, events.ResultMsgID(r)
	if r.Time.IsZero() {
		r.Time = a.clock().UTC()
	}
	out.Result = &r
	if !o.asJSON {
		return a.printDone(done, eachOptions{})
	}
	return a.rollbackDone(o.asJSON, out, done[0].Err)
}

// rollbackDone prints the JSON (also on failure) and returns err.
func (a *app) rollbackDone(asJSON bool, out rollbackJSON, err error) error {
	if !asJSON {
		return err
	}
	if err != nil {
		out.Error = a.errorLine(err)
	}
	if jerr := a.printJSON(out); jerr != nil {
		return jerr
	}
	return err
}

// publishedAt says when and as which event a version was published.
func publishedAt(v service.Version) string {
	if v.EventID == "" {
		return ""
	}
	return fmt.Sprintf(" (published %s as event %s)", v.Time.UTC().Format(time.RFC3339), v.EventID)
}

// resultWhy is a result that is not published in a few words.
func resultWhy(r events.Result) string {
	if r.Reason != "" {
		return r.Type + " (" + r.Reason + ")"
	}
	return r.Type
}
