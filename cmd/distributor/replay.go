package main

import (
	"context"
	"crypto/sha256"
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

// replayOptions are replay's flags.
type replayOptions struct {
	filter                                    eventFilter
	reason, id                                string
	since                                     config.Duration
	dryRun, takeOwnership, allowOlder, asJSON bool
}

func (a *app) replayCommand() *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay [--pipeline P] [--destination D] [--reason R] [--since DUR] [--id EVENT] [--take-ownership] [--allow-older] [--dry-run]",
		Short: "Re-publish the bundle-ready events behind failed and collision events (and, with --id and --allow-older, a superseded one)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.replay(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.filter.pipeline, "pipeline", "", "only events of this pipeline")
	cmd.Flags().StringVar(&o.filter.destination, "destination", "", "only events of this destination")
	cmd.Flags().StringVar(&o.reason, "reason", "", "only failed events with this reason (e.g. max_deliveries)")
	cmd.Flags().Var(&o.since, "since", "only events newer than this (e.g. 24h, 7d)")
	cmd.Flags().StringVar(&o.id, "id", "", "only this result event id or bundle event id")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be replayed")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print what was (or would be) replayed as one JSON object (docs/cli.md)")
	cmd.Flags().BoolVar(&o.takeOwnership, "take-ownership", false, "adopt colliding unmanaged paths in the replayed publications (sent on the admin subject)")
	cmd.Flags().BoolVar(&o.allowOlder, "allow-older", false, "publish even over a newer version of the same source: a deliberate roll back (sent on the admin subject)")
	return cmd
}

// pendingReplay is one original bundle event to announce again, limited
// to the destinations that failed or collided and have not been published
// since by a replay (replaying a resolved failure again could roll back
// newer content). Replays of replays fold into their original.
type pendingReplay struct {
	root     string
	original events.BundleReady
	dests    map[string]bool
	all      bool // the failure was not about one destination

	// seq is the stream sequence of the newest failure replayed, and
	// failed the destinations of every failure replayed ("" for a
	// failure about none), published since or not: with the operator
	// flags they name the replay (replayID).
	seq    uint64
	failed map[string]bool
}

// replayID is the id a replay of rp announces: the original's id, the
// newest failure it replays, and a digest of the failures' destinations
// and the operator flags. Replays that read the same failures announce
// the same id, which the bundle stream's dedup window stores once: of
// several concurrent `replay` runs one announces, and one that started
// after the first replay published some destinations does not announce
// the others again. A replay of a newer failure, of other destinations
// or with other flags gets an id of its own.
func replayID(rp *pendingReplay, takeOwnership, allowOlder bool) string {
	h := sha256.New()
	for _, d := range sortedKeys(rp.failed) {
		h.Write([]byte(d))
		h.Write([]byte{0})
	}
	fmt.Fprintf(h, "take_ownership=%t allow_older=%t", takeOwnership, allowOlder)
	return fmt.Sprintf("%s%s%d-%x", rp.root, replaySep, rp.seq, h.Sum(nil)[:4])
}

// replay announces again the bundle events behind the matching failed and
// collision events.
func (a *app) replay(ctx context.Context, o replayOptions) error {
	if o.since > 0 {
		o.filter.since = time.Now().Add(-time.Duration(o.since))
	}
	o.filter.types = []string{events.TypeFailed, events.TypeCollision, events.TypePublished, events.TypeSuperseded}
	_, conn, err := a.connectStreams(ctx, "replay through")
	if err != nil {
		return err
	}
	defer conn.close()

	report := replayJSON{DryRun: o.dryRun, Replays: []replayedJSON{}, Skipped: []skippedJSON{}}
	byRoot, err := a.collectReplays(ctx, conn, o, &report)
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
	case o.asJSON && len(ids) == 0:
		return a.printJSON(report)
	case len(byRoot) == 0 && report.superseded != "":
		fmt.Fprintf(a.stdout, "nothing to replay: %s was superseded by a newer version of its source; `distributor replay --id %s --allow-older` publishes it anyway (a roll back)\n", report.superseded, o.id)
		return nil
	case len(byRoot) == 0:
		fmt.Fprintln(a.stdout, "nothing to replay: no failed or collision event matches")
		return nil
	case len(ids) == 0:
		fmt.Fprintf(a.stdout, "nothing to replay: the %d matching bundle event(s) were already replayed and published\n", len(byRoot))
		return nil
	}
	pub := events.NewPublisher(conn.js, conn.streams.Subjects)
	for _, k := range ids {
		if err := a.replayOne(ctx, pub, o, byRoot[k], &report); err != nil {
			if o.asJSON {
				// What was announced before the failure still counts.
				_ = a.printJSON(report)
			}
			return err
		}
	}
	if o.asJSON {
		return a.printJSON(report)
	}
	return nil
}

// matchesID reports whether a result event is about the event --id names
// (any event when --id is not given); root is its original's id.
func (o replayOptions) matchesID(r events.Result, root string) bool {
	return o.id == "" || r.ID == o.id || r.BundleEventID == o.id || root == o.id
}

// collectReplays reads the matching result events into one pending replay
// per original bundle event; those whose original is gone go to
// report.Skipped.
func (a *app) collectReplays(ctx context.Context, conn *streamsConn, o replayOptions, report *replayJSON) (map[string]*pendingReplay, error) {
	byRoot := map[string]*pendingReplay{}
	err := readEvents(ctx, conn.streams, o.filter, false, func(r events.Result, md jetstream.MsgMetadata) error {
		if r.Type == events.TypePublished {
			if rp := byRoot[replayRoot(r.BundleEventID)]; rp != nil {
				delete(rp.dests, r.DestinationID)
				rp.all = false
			}
			return nil
		}
		if r.Type == events.TypeSuperseded {
			return a.collectSuperseded(r, o, byRoot, report)
		}
		if (r.Original == nil && r.OriginalRef == nil) || (o.reason != "" && r.Reason != o.reason) {
			return nil
		}
		original := r.Original
		if original == nil {
			// Left out to fit the size limit: fetch it, unless the
			// event cannot match --id anyway.
			if !o.matchesID(r, replayRoot(r.BundleEventID)) {
				return nil
			}
			var err error
			if original, err = a.fetchReplayed(ctx, conn, o, r, report); original == nil || err != nil {
				return err
			}
		}
		root := replayRoot(original.ID)
		if !o.matchesID(r, root) {
			return nil
		}
		rp := byRoot[root]
		if rp == nil {
			rp = &pendingReplay{root: root, original: *original, dests: map[string]bool{}, failed: map[string]bool{}}
			byRoot[root] = rp
		}
		if r.DestinationID == "" {
			rp.all = true
		} else {
			rp.dests[r.DestinationID] = true
		}
		rp.seq = max(rp.seq, md.Sequence.Stream)
		rp.failed[r.DestinationID] = true
		return nil
	})
	return byRoot, err
}

// collectSuperseded adds the superseded event r to byRoot: only when --id
// names it and --allow-older is given, since replaying every superseded
// event would roll destinations back to whichever version came last. Its
// bundle-ready event is rebuilt from its bundle and source.
func (a *app) collectSuperseded(r events.Result, o replayOptions, byRoot map[string]*pendingReplay, report *replayJSON) error {
	root := replayRoot(r.BundleEventID)
	if o.id == "" || !o.matchesID(r, root) || o.reason != "" {
		return nil
	}
	if !o.allowOlder {
		report.superseded = r.ID
		return nil
	}
	if r.Bundle == "" || r.Source == nil {
		why := "it does not say where its bundle was (it was published before events recorded bundle locations): use `distributor apply --allow-older --bundle LOCATION`"
		report.Skipped = append(report.Skipped, skippedJSON{EventID: r.ID, Reason: why})
		if !o.asJSON {
			fmt.Fprintf(a.stdout, "cannot replay %s event %s: %s\n", r.Type, r.ID, why)
		}
		return nil
	}
	rp := byRoot[root]
	if rp == nil {
		rp = &pendingReplay{root: root, original: events.BundleReady{SchemaVersion: events.SchemaVersion, Type: events.TypeBundleReady, ID: r.BundleEventID,
			PipelineID: r.PipelineID, Bundle: r.Bundle, ManifestDigest: r.Source.Digest}, dests: map[string]bool{}}
		byRoot[root] = rp
	}
	rp.dests[r.DestinationID] = true
	return nil
}

// fetchReplayed reads the bundle-ready event a result refers to; nil, and
// a line in report.Skipped, when the stream no longer holds it.
func (a *app) fetchReplayed(ctx context.Context, conn *streamsConn, o replayOptions, r events.Result, report *replayJSON) (*events.BundleReady, error) {
	ev, err := fetchOriginal(ctx, conn.js, conn.streams, *r.OriginalRef)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		why := fmt.Sprintf("its bundle-ready event (%s seq %d) is no longer stored", r.OriginalRef.Stream, r.OriginalRef.Seq)
		report.Skipped = append(report.Skipped, skippedJSON{EventID: r.ID, Reason: why})
		if !o.asJSON {
			fmt.Fprintf(a.stdout, "cannot replay %s event %s: %s\n", r.Type, r.ID, why)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s event %s: %w", r.Type, r.ID, err)
	}
	return &ev, nil
}

// replayOne announces one replay (or, with --dry-run, says it would) and
// adds it to report.
func (a *app) replayOne(ctx context.Context, pub *events.Publisher, o replayOptions, rp *pendingReplay, report *replayJSON) error {
	ev := rp.original

	// A message id of its own (the original's is still in the dedup
	// window), the same for every replay of the same failures.
	ev.ID = replayID(rp, o.takeOwnership, o.allowOlder)
	ev.ReplayOf = rp.root
	ev.ProducedAt = time.Time{}
	ev.TakeOwnership = o.takeOwnership
	ev.AllowOlder = o.allowOlder
	if !ev.AllowOlder {
		// A roll back's mark and its delete_later go only with allow_older.
		ev.RollbackOf, ev.DeleteLater = "", false
	}
	if !rp.all {
		ev.Destinations = sortedKeys(rp.dests)
	}
	item := replayedJSON{OriginalID: rp.root, PipelineID: ev.PipelineID, Bundle: ev.Bundle, Destinations: nonNil(ev.Destinations)}
	if o.dryRun {
		report.Replays = append(report.Replays, item)
		if !o.asJSON {
			fmt.Fprintf(a.stdout, "would replay %s (pipeline %s, bundle %s, destinations %v)\n", rp.root, ev.PipelineID, ev.Bundle, ev.Destinations)
		}
		return nil
	}

	// Operator flags are honoured only on the admin subject,
	// which NATS permissions keep producers off.
	announce := pub.AnnounceBundle
	if ev.TakeOwnership || ev.AllowOlder {
		announce = pub.AnnounceAsOperator
	}
	_, dup, err := announce(ctx, ev)
	if err != nil {
		return err
	}
	item.EventID, item.AlreadyAnnounced = ev.ID, dup
	report.Replays = append(report.Replays, item)
	switch {
	case o.asJSON:
	case dup:
		fmt.Fprintf(a.stdout, "%s was already replayed as %s (by a replay that read the same failures)\n", rp.root, ev.ID)
	default:
		fmt.Fprintf(a.stdout, "replayed %s as %s (destinations %v)\n", rp.root, ev.ID, ev.Destinations)
	}
	return nil
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
