package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
)

func (a *app) replayCommand() *cobra.Command {
	var f eventFilter
	var reason, id string
	var since config.Duration
	var dryRun, takeOwnership, allowOlder, asJSON bool
	cmd := &cobra.Command{
		Use:   "replay [--pipeline P] [--destination D] [--reason R] [--since DUR] [--id EVENT] [--take-ownership] [--allow-older] [--dry-run]",
		Short: "Re-publish the bundle-ready events behind failed and collision events",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if since > 0 {
				f.since = time.Now().Add(-time.Duration(since))
			}
			f.types = []string{events.TypeFailed, events.TypeCollision, events.TypePublished}
			ctx := cmd.Context()
			nc, js, streams, err := a.jetStream(ctx, cfg, "replay through")
			if err != nil {
				return err
			}
			defer nc.Close()

			// One replay per original event, limited to the destinations
			// that failed or collided and have not been published since by
			// a replay (replaying a resolved failure again could roll back
			// newer content). Replays of replays fold into their original.
			type replay struct {
				root     string
				original events.BundleReady
				dests    map[string]bool
				all      bool // the failure was not about one destination
			}
			byRoot := map[string]*replay{}
			report := replayJSON{DryRun: dryRun, Replays: []replayedJSON{}, Skipped: []skippedJSON{}}
			err = readEvents(ctx, streams, f, false, func(r events.Result, _ jetstream.MsgMetadata) error {
				if r.Type == events.TypePublished {
					if rp := byRoot[replayRoot(r.BundleEventID)]; rp != nil {
						delete(rp.dests, r.DestinationID)
						rp.all = false
					}
					return nil
				}
				if (r.Original == nil && r.OriginalRef == nil) || (reason != "" && r.Reason != reason) {
					return nil
				}
				original := r.Original
				if original == nil {
					// Left out to fit the size limit: fetch it, unless the
					// event cannot match --id anyway.
					if id != "" && r.ID != id && r.BundleEventID != id && replayRoot(r.BundleEventID) != id {
						return nil
					}
					ev, err := fetchOriginal(ctx, js, streams, *r.OriginalRef)
					if errors.Is(err, jetstream.ErrMsgNotFound) {
						why := fmt.Sprintf("its bundle-ready event (%s seq %d) is no longer stored", r.OriginalRef.Stream, r.OriginalRef.Seq)
						report.Skipped = append(report.Skipped, skippedJSON{EventID: r.ID, Reason: why})
						if !asJSON {
							fmt.Fprintf(a.stdout, "cannot replay %s event %s: %s\n", r.Type, r.ID, why)
						}
						return nil
					}
					if err != nil {
						return fmt.Errorf("%s event %s: %w", r.Type, r.ID, err)
					}
					original = &ev
				}
				root := replayRoot(original.ID)
				if id != "" && r.ID != id && r.BundleEventID != id && root != id {
					return nil
				}
				rp := byRoot[root]
				if rp == nil {
					rp = &replay{root: root, original: *original, dests: map[string]bool{}}
					byRoot[root] = rp
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
			var ids []string
			for k, rp := range byRoot {
				if rp.all || len(rp.dests) > 0 {
					ids = append(ids, k)
				}
			}
			sort.Strings(ids)
			report.AlreadyPublished = len(byRoot) - len(ids)
			switch {
			case asJSON && len(ids) == 0:
				return a.printJSON(report)
			case len(byRoot) == 0:
				fmt.Fprintln(a.stdout, "nothing to replay: no failed or collision event matches")
				return nil
			case len(ids) == 0:
				fmt.Fprintf(a.stdout, "nothing to replay: the %d matching bundle event(s) were already replayed and published\n", len(byRoot))
				return nil
			}
			pub := events.NewPublisher(js, streams.Subjects)
			for _, k := range ids {
				rp := byRoot[k]
				ev := rp.original
				// A new message id: the original's is still in the dedup window.
				ev.ID = fmt.Sprintf("%s%s%d", rp.root, replaySep, time.Now().UnixNano())
				ev.ReplayOf = rp.root
				ev.ProducedAt = time.Time{}
				ev.TakeOwnership = takeOwnership
				ev.AllowOlder = allowOlder
				if !rp.all {
					ev.Destinations = sortedKeys(rp.dests)
				}
				item := replayedJSON{OriginalID: rp.root, PipelineID: ev.PipelineID, Bundle: ev.Bundle, Destinations: nonNil(ev.Destinations)}
				if dryRun {
					report.Replays = append(report.Replays, item)
					if asJSON {
						continue
					}
					fmt.Fprintf(a.stdout, "would replay %s (pipeline %s, bundle %s, destinations %v)\n", rp.root, ev.PipelineID, ev.Bundle, ev.Destinations)
					continue
				}
				// Operator flags are honoured only on the admin subject,
				// which NATS permissions keep producers off.
				announce := pub.AnnounceBundle
				if ev.TakeOwnership || ev.AllowOlder {
					announce = pub.AnnounceAsOperator
				}
				if _, _, err := announce(ctx, ev); err != nil {
					if asJSON {
						// What was announced before the failure still counts.
						_ = a.printJSON(report)
					}
					return err
				}
				item.EventID = ev.ID
				report.Replays = append(report.Replays, item)
				if asJSON {
					continue
				}
				fmt.Fprintf(a.stdout, "replayed %s as %s (destinations %v)\n", rp.root, ev.ID, ev.Destinations)
			}
			if asJSON {
				return a.printJSON(report)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.pipeline, "pipeline", "", "only events of this pipeline")
	cmd.Flags().StringVar(&f.destination, "destination", "", "only events of this destination")
	cmd.Flags().StringVar(&reason, "reason", "", "only failed events with this reason (e.g. max_deliveries)")
	cmd.Flags().Var(&since, "since", "only events newer than this (e.g. 24h, 7d)")
	cmd.Flags().StringVar(&id, "id", "", "only this result event id or bundle event id")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be replayed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was (or would be) replayed as one JSON object (docs/cli.md)")
	cmd.Flags().BoolVar(&takeOwnership, "take-ownership", false, "adopt colliding unmanaged paths in the replayed publications (sent on the admin subject)")
	cmd.Flags().BoolVar(&allowOlder, "allow-older", false, "publish even over a newer version of the same source: a deliberate roll back (sent on the admin subject)")
	return cmd
}

// fetchOriginal reads the bundle-ready event a result refers to.
func fetchOriginal(ctx context.Context, js jetstream.JetStream, streams *events.Streams, ref events.MsgRef) (events.BundleReady, error) {
	st := streams.Bundles
	if ref.Stream != streams.Subjects.BundlesStream() {
		var err error
		if st, err = js.Stream(ctx, ref.Stream); err != nil {
			return events.BundleReady{}, fmt.Errorf("read the bundle-ready event %s seq %d: %w", ref.Stream, ref.Seq, err)
		}
	}
	m, err := st.GetMsg(ctx, ref.Seq)
	if err != nil {
		return events.BundleReady{}, fmt.Errorf("read the bundle-ready event %s seq %d: %w", ref.Stream, ref.Seq, err)
	}
	return events.DecodeBundleReady(m.Data)
}

// replaySep joins an original bundle event id and a replay number; replay
// and demo name replays "<original id>.replay.<n>".
const replaySep = ".replay."

// replayRoot is the original bundle event id behind a (replayed) event id.
func replayRoot(id string) string {
	root, _, _ := strings.Cut(id, replaySep)
	return root
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
