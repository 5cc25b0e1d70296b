package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/events"
)

func (a *app) replayCommand() *cobra.Command {
	var f eventFilter
	var reason, id string
	var since time.Duration
	var dryRun, takeOwnership bool
	cmd := &cobra.Command{
		Use:   "replay [--pipeline P] [--destination D] [--reason R] [--since DUR] [--id EVENT] [--dry-run]",
		Short: "Re-publish the bundle-ready events behind failed and collision events",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if since > 0 {
				f.since = time.Now().Add(-since)
			}
			f.types = []string{events.TypeFailed, events.TypeCollision}
			ctx := cmd.Context()
			nc, js, streams, err := a.jetStream(ctx, cfg)
			if err != nil {
				return err
			}
			defer nc.Close()

			// One replay per original event, limited to the destinations
			// that failed or collided.
			type replay struct {
				original events.BundleReady
				dests    map[string]bool
				all      bool // the failure was not about one destination
			}
			byID := map[string]*replay{}
			err = readEvents(ctx, streams, f, false, func(r events.Result, _ jetstream.MsgMetadata) error {
				if r.Original == nil || (reason != "" && r.Reason != reason) {
					return nil
				}
				if id != "" && r.ID != id && r.BundleEventID != id {
					return nil
				}
				rp := byID[r.Original.ID]
				if rp == nil {
					rp = &replay{original: *r.Original, dests: map[string]bool{}}
					byID[r.Original.ID] = rp
				}
				if r.DestinationID == "" {
					rp.all = true
				} else {
					rp.dests[r.DestinationID] = true
				}
				return nil
			})
			if err != nil {
				return err
			}
			ids := make([]string, 0, len(byID))
			for k := range byID {
				ids = append(ids, k)
			}
			sort.Strings(ids)
			if len(ids) == 0 {
				fmt.Fprintln(a.stdout, "nothing to replay: no failed or collision event matches")
				return nil
			}
			pub := events.NewPublisher(js, streams.Subjects)
			for _, k := range ids {
				rp := byID[k]
				ev := rp.original
				// A new message id: the original's is still in the dedup window.
				ev.ID = fmt.Sprintf("%s.replay.%d", rp.original.ID, time.Now().UnixNano())
				ev.ReplayOf = rp.original.ID
				ev.ProducedAt = time.Time{}
				ev.TakeOwnership = takeOwnership
				if !rp.all {
					ev.Destinations = sortedKeys(rp.dests)
				}
				if dryRun {
					fmt.Fprintf(a.stdout, "would replay %s (pipeline %s, bundle %s, destinations %v)\n", rp.original.ID, ev.PipelineID, ev.Bundle, ev.Destinations)
					continue
				}
				if _, _, err := pub.AnnounceBundle(ctx, ev); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "replayed %s as %s (destinations %v)\n", rp.original.ID, ev.ID, ev.Destinations)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.pipeline, "pipeline", "", "only events of this pipeline")
	cmd.Flags().StringVar(&f.destination, "destination", "", "only events of this destination")
	cmd.Flags().StringVar(&reason, "reason", "", "only failed events with this reason (e.g. max_deliveries)")
	cmd.Flags().DurationVar(&since, "since", 0, "only events newer than this (e.g. 24h)")
	cmd.Flags().StringVar(&id, "id", "", "only this result event id or bundle event id")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be replayed")
	cmd.Flags().BoolVar(&takeOwnership, "take-ownership", false, "adopt colliding unmanaged paths in the replayed publications")
	return cmd
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
