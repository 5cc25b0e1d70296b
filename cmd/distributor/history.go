package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
)

// defaultHistoryLimit is how many results history prints unless --limit
// says otherwise.
const defaultHistoryLimit = 20

func (a *app) historyCommand() *cobra.Command {
	var dest, pipeline string
	limit := defaultHistoryLimit
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history --destination D [--pipeline P] [--limit N] [--json]",
		Short: "Print a destination's results from the events stream, newest first, with bundle locations",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageErr("--limit %d: give a count, or 0 for every result the stream keeps", limit)
			}
			cfg, d, err := a.loadDestination(dest)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			nc, streams, err := a.readStreams(ctx, cfg)
			if errors.Is(err, errNoNATS) {
				return errors.New("no NATS to read the history from: set nats.url or start `distributor serve` (`distributor status` shows what the destination holds without it)")
			}
			if err != nil {
				return err
			}
			defer nc.Close()
			var hist []events.Stored
			if streams != nil {
				if hist, err = events.History(ctx, streams.Events, streams.Subjects, d.ID, pipeline, limit); err != nil {
					return err
				}
			}
			out := historyJSON{DestinationID: d.ID, PipelineID: pipeline, Entries: make([]historyEntryJSON, 0, len(hist))}
			for _, r := range hist {
				out.Entries = append(out.Entries, toHistoryEntry(r.Result))
			}
			if streams != nil {
				failures, err := readNotifyFailures(ctx, streams, pipeline)
				if err != nil {
					return err
				}
				out.NotifyFailures = failures[d.ID]
			}
			if asJSON {
				return a.printJSON(out)
			}
			a.printHistory(out)
			return nil
		},
	}
	cmd.Flags().StringVar(&dest, "destination", "", "destination whose results to print")
	cmd.Flags().StringVar(&pipeline, "pipeline", "", "only results of this pipeline")
	cmd.Flags().IntVar(&limit, "limit", defaultHistoryLimit, "print at most this many results, newest first (0: all the events stream keeps)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the history as one JSON object (docs/cli.md)")
	return cmd
}

// readStreams connects to the known NATS (connectKnownNATS) and opens
// distributor's streams without creating or changing anything: the
// commands that only read use it. Streams are nil when no `serve` has
// created them yet; errNoNATS when no NATS is known.
func (a *app) readStreams(ctx context.Context, cfg *config.Config) (*nats.Conn, *events.Streams, error) {
	nc, err := a.connectKnownNATS(cfg)
	if err != nil {
		return nil, nil, err
	}
	subjects, err := events.NewSubjects(cfg.NATS.SubjectPrefix)
	if err != nil {
		nc.Close()
		return nil, nil, withCode(exitUsage, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	streams, err := events.Open(ctx, js, subjects)
	if errors.Is(err, events.ErrNoStreams) {
		return nc, nil, nil
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, streams, nil
}

// historyJSON is history --json.
type historyJSON struct {
	DestinationID string             `json:"destination_id"`
	PipelineID    string             `json:"pipeline_id,omitempty"`
	Entries       []historyEntryJSON `json:"entries"`

	// NotifyFailures are the destination's (and pipeline's) notify_failed
	// events; absent when the events stream has none.
	NotifyFailures *notifyFailuresJSON `json:"notify_failures,omitempty"`
}

// historyEntryJSON is one result event, without its lists of outputs and
// paths (`events tail --json` prints the whole events).
type historyEntryJSON struct {
	Time          time.Time         `json:"time"`
	Type          string            `json:"type"`
	EventID       string            `json:"event_id"`
	BundleEventID string            `json:"bundle_event_id,omitempty"`
	PipelineID    string            `json:"pipeline_id,omitempty"`
	Source        *events.SourceRef `json:"source,omitempty"`

	// Bundle is the bundle's location: the result's own, or its original
	// event's (collision, failed).
	Bundle       string            `json:"bundle,omitempty"`
	RollbackOf   string            `json:"rollback_of,omitempty"`
	SupersededBy *events.SourceRef `json:"superseded_by,omitempty"`
	Written      int               `json:"written"`
	Updated      int               `json:"updated"`
	Unchanged    int               `json:"unchanged"`
	Deleted      int               `json:"deleted"`
	Removed      int               `json:"removed,omitempty"`
	Collisions   int               `json:"collisions,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	Message      string            `json:"message,omitempty"`
}

func toHistoryEntry(r events.Result) historyEntryJSON {
	e := historyEntryJSON{Time: r.Time.UTC(), Type: r.Type, EventID: r.ID, BundleEventID: r.BundleEventID, PipelineID: r.PipelineID,
		Source: r.Source, Bundle: r.Bundle, RollbackOf: r.RollbackOf, SupersededBy: r.SupersededBy,
		Written: r.Written, Updated: r.Updated, Unchanged: r.Unchanged, Deleted: r.Deleted, Removed: r.Removed,
		Collisions: len(r.Collisions), Reason: r.Reason, Message: r.Message}
	if e.Bundle == "" && r.Original != nil {
		e.Bundle = r.Original.Bundle
	}
	return e
}

func (a *app) printHistory(h historyJSON) {
	a.printHistoryEntries(h)
	if h.NotifyFailures != nil {
		fmt.Fprintf(a.stdout, "notify failures: %s\n", notifyFailuresText(h.NotifyFailures))
	}
}

func (a *app) printHistoryEntries(h historyJSON) {
	if len(h.Entries) == 0 {
		what := h.DestinationID
		if h.PipelineID != "" {
			what = h.PipelineID + "/" + h.DestinationID
		}
		fmt.Fprintf(a.stdout, "no results of %s in the events stream\n", what)
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTYPE\tPIPELINE\tSOURCE\tBUNDLE\tRESULT\tEVENT")
	for _, e := range h.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", catalog.FormatTime(e.Time), escapeControl(e.Type), escapeControl(orDash(e.PipelineID)),
			sourceLabel(e.Source), escapeControl(orDash(e.Bundle)), escapeControl(e.summary()), escapeControl(e.EventID))
	}
	_ = tw.Flush()
}

// summary is the RESULT column: what the result says in a few words.
func (e historyEntryJSON) summary() string {
	switch e.Type {
	case events.TypePublished:
		s := fmt.Sprintf("%d written, %d deleted, %d unchanged", e.Written, e.Deleted, e.Unchanged)
		if e.Updated > 0 {
			s += fmt.Sprintf(", %d updated", e.Updated)
		}
		if e.RollbackOf != "" {
			s = "rollback to " + e.RollbackOf + ": " + s
		}
		return s
	case events.TypeSuperseded:
		return "kept " + sourceLabel(e.SupersededBy)
	case events.TypeCollision:
		return fmt.Sprintf("%d unmanaged path(s) in the way", e.Collisions)
	case events.TypeFailed:
		return "failed: " + e.Reason
	case events.TypePruned:
		return fmt.Sprintf("%d deleted", e.Deleted)
	case events.TypeReconciled:
		return fmt.Sprintf("%d record(s) removed", e.Removed)
	}
	return ""
}

// sourceLabel shows a source version as "id@created sha256:<12 hex>", or
// "-", for a terminal (escapeControl).
func sourceLabel(s *events.SourceRef) string {
	if s == nil {
		return "-"
	}
	return escapeControl(service.SourceLabel(s.ID, s.Digest, s.Created))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
