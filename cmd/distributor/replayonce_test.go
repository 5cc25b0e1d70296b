package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/events"
)

// Concurrent replays of the same failures announce each original once:
// five `replay --reason root_missing` at once over ten bundle events that
// failed on both destinations announce ten replays, not fifty; the others
// say the replay was already announced.
func TestConcurrentReplaysAnnounceOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newNATSEnv(t)
	js := e.nats.JetStream(t)
	streams, err := events.Setup(ctx, js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir := e.makeBundle(t, "b1", "src.one", bundleOne)
	manifest, err := os.ReadFile(filepath.Join(dir, bundle.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, streams.Subjects)
	const originals = 10
	for range originals {
		ev := events.BundleReady{ID: events.NewEventID(), PipelineID: "p.one", Bundle: dir, ManifestDigest: bundle.Digest(manifest)}
		if _, _, err := pub.AnnounceBundle(ctx, ev); err != nil {
			t.Fatal(err)
		}
		ev.SchemaVersion, ev.Type = events.SchemaVersion, events.TypeBundleReady
		for _, d := range []string{"d1", "d2"} {
			if _, err := pub.PublishResult(ctx, events.Result{Type: events.TypeFailed, BundleEventID: ev.ID, PipelineID: "p.one",
				DestinationID: d, Reason: events.ReasonRootMissing, Message: "the root is gone", Attempts: 1, Original: &ev}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := e.bundleMsgs(t)

	const replays = 5
	outs := make([]string, replays)
	var wg sync.WaitGroup
	for i := range replays {
		wg.Go(func() {
			code, stdout, stderr := e.cmd(t, "replay", "--reason", "root_missing")
			if code != 0 {
				t.Errorf("replay %d: exit %d: %s", i, code, stderr)
			}
			outs[i] = stdout
		})
	}
	wg.Wait()
	all := strings.Join(outs, "")
	if got := e.bundleMsgs(t) - before; got != originals {
		t.Errorf("%d concurrent replays announced %d bundle events, want %d (one per original)\n%s", replays, got, originals, all)
	}
	if n, dup := len(regexp.MustCompile(`(?m)^replayed `).FindAllString(all, -1)), strings.Count(all, " was already replayed as "); n != originals || dup != (replays-1)*originals {
		t.Errorf("replays said %d replayed and %d already replayed, want %d and %d:\n%s", n, dup, originals, (replays-1)*originals, all)
	}
}
