package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
)

// eventFilter selects result events.
type eventFilter struct {
	types       []string
	pipeline    string
	destination string
	since       time.Time
}

func (f eventFilter) subjects(s events.Subjects) []string {
	types := f.types
	if len(types) == 0 {
		types = []string{""}
	}
	out := make([]string, 0, len(types))
	for _, t := range types {
		out = append(out, s.ResultFilter(t, f.destination, f.pipeline))
	}
	return out
}

// readEvents streams the matching result events to fn, oldest first. With
// follow it waits for new ones until ctx ends; otherwise it stops once it
// has caught up with the stream.
func readEvents(ctx context.Context, streams *events.Streams, f eventFilter, follow bool, fn func(events.Result, jetstream.MsgMetadata) error) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: f.subjects(streams.Subjects), DeliverPolicy: jetstream.DeliverAllPolicy}
	if !f.since.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		since := f.since
		cfg.OptStartTime = &since
	}
	info, err := streams.Events.Info(ctx)
	if err != nil {
		return fmt.Errorf("read %s: %w", streams.Subjects.EventsStream(), err)
	}
	last := info.State.LastSeq
	if !follow && last == 0 {
		return nil
	}
	cons, err := streams.Events.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", streams.Subjects.EventsStream(), err)
	}
	for {
		// Without follow, take only what is stored: no wait at the end,
		// and none at all when nothing matches. With follow, short pulls
		// let a timeout or Ctrl-C end the command promptly.
		var batch jetstream.MessageBatch
		if follow {
			batch, err = cons.Fetch(100, jetstream.FetchMaxWait(250*time.Millisecond))
		} else {
			batch, err = cons.FetchNoWait(100)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if follow && waitThroughElection(ctx, err) {
				continue
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			md, err := msg.Metadata()
			if err != nil {
				return err
			}
			if r, err := events.DecodeResult(msg.Data()); err == nil {
				if err := fn(r, *md); err != nil {
					return err
				}
			}
			if !follow && (md.NumPending == 0 || md.Sequence.Stream >= last) {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			if ctx.Err() != nil {
				return nil
			}

			// The election can also end a pull already under way.
			if follow && waitThroughElection(ctx, err) {
				continue
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if ctx.Err() != nil || (!follow && n == 0) {
			return nil
		}
	}
}

// waitThroughElection reports whether a follower should pull again after
// err: while a replicated stream elects a leader (a node restarting, a
// fresh cluster), its API has no responder for a moment, and someone
// waiting for results waits on. It pauses briefly first; false when err is
// anything else or ctx ended.
func waitThroughElection(ctx context.Context, err error) bool {
	if !errors.Is(err, nats.ErrNoResponders) {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(100 * time.Millisecond):
		return true
	}
}

func (a *app) eventsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Read result events", Args: noArgs}
	var f eventFilter
	var typ string
	var since config.Duration
	var follow, asJSON bool
	tail := &cobra.Command{
		Use:   "tail [--type T] [--pipeline P] [--destination D] [--since DUR] [--follow]",
		Short: "Print result events (published, superseded, collision, failed, pruned, reconciled)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if typ != "" {
				if !events.IsResultType(typ) {
					return usageErr("--type %q: use published, superseded, collision, failed, pruned or reconciled", typ)
				}
				f.types = []string{typ}
			}
			if since > 0 {
				f.since = time.Now().Add(-time.Duration(since))
			}
			ctx := cmd.Context()
			_, conn, err := a.connectStreams(ctx, "read events from")
			if err != nil {
				return err
			}
			defer conn.close()
			return readEvents(ctx, conn.streams, f, follow, func(r events.Result, md jetstream.MsgMetadata) error {
				if asJSON {
					data, _ := json.Marshal(r)
					_, err := fmt.Fprintf(a.stdout, "%s\n", data)
					return err
				}
				printEvent(a.stdout, r)
				return nil
			})
		},
	}
	tail.Flags().StringVar(&typ, "type", "", "only events of this type")
	tail.Flags().StringVar(&f.pipeline, "pipeline", "", "only events of this pipeline")
	tail.Flags().StringVar(&f.destination, "destination", "", "only events of this destination")
	tail.Flags().Var(&since, "since", "only events newer than this (e.g. 1h, 7d)")
	tail.Flags().BoolVarP(&follow, "follow", "f", false, "keep waiting for new events")
	tail.Flags().BoolVar(&asJSON, "json", false, "print each event as JSON")
	cmd.AddCommand(tail)
	return cmd
}

// printEvent writes one human line (and the changed paths) for an event,
// its ids, paths and message escaped for a terminal (escapeControl).
func printEvent(w io.Writer, r events.Result) {
	dest := r.DestinationID
	if dest == "" {
		dest = "-"
	}
	fmt.Fprintf(w, "%s  %-10s %-16s %-24s", r.Time.UTC().Format(time.RFC3339), escapeControl(r.Type), escapeControl(dest), escapeControl(r.PipelineID))
	switch r.Type {
	case events.TypePublished:
		fmt.Fprintf(w, " written %d, unchanged %d, deleted %d", r.Written, r.Unchanged, r.Deleted)
		if r.Updated > 0 {
			fmt.Fprintf(w, ", %d record(s) updated", r.Updated)
		}
		if r.KeptNewer > 0 {
			fmt.Fprintf(w, ", %d kept (a newer version of the owner wrote them)", r.KeptNewer)
		}
	case events.TypeCollision:
		fmt.Fprintf(w, " blocked by unmanaged %s", escapeControl(strings.Join(r.Collisions, ", ")))
	case events.TypeSuperseded:
		if b := r.SupersededBy; b != nil {
			fmt.Fprintf(w, " already has %s created %s (digest %s); nothing changed", escapeControl(b.ID), b.Created.UTC().Format(time.RFC3339Nano), escapeControl(b.Digest))
		}
	case events.TypeFailed:
		fmt.Fprintf(w, " %s: %s", escapeControl(r.Reason), escapeControl(r.Message))
	case events.TypePruned, events.TypeReconciled:
		fmt.Fprintf(w, " deleted %d, removed %d", r.Deleted, r.Removed)
	}
	fmt.Fprintln(w)
	for _, o := range r.Outputs {
		sign := "+"
		switch o.Action {
		case events.ActionDeleted:
			sign = "-"
		case events.ActionUpdated:
			sign = "~"
		}
		fmt.Fprintf(w, "    %s %s\n", sign, escapeControl(o.Path))
	}
}
