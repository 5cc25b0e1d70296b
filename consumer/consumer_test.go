package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

const weatherYAML = `
pipelines:
  - id: weather.daily
    destinations: [site, archive]
destinations:
  - id: site
    backend: local
    path: @site@
    layout: {prefix: "{source_name}/"}
    transforms:
      - {name: markdown_to_html, index: report.md}
    links: {base_url: "https://example.com/w/", pretty: true}
  - id: archive
    backend: local
    path: @archive@
    workflow: replacement
`

var (
	v1 = map[string]string{"report.md": "# Tomorrow\n\nSunny.\n", "data/a.csv": "t,1\n"}
	v2 = map[string]string{"report.md": "# Tomorrow\n\nRain.\n", "data/b.csv": "t,2\n"}
)

// checkPublished asserts the exact result of one publication; nil outputs
// are not checked.
func checkPublished(t *testing.T, r events.Result, eventID, dest string, written, unchanged, deleted int, outputs []events.OutputRef) {
	t.Helper()
	if r.Type != events.TypePublished || r.BundleEventID != eventID || r.DestinationID != dest || r.PipelineID != "weather.daily" {
		t.Fatalf("result = %s %s dest %q pipeline %q (reason %q: %s), want published %s %s", r.Type, r.BundleEventID, r.DestinationID, r.PipelineID, r.Reason, r.Message, eventID, dest)
	}
	if r.Written != written || r.Unchanged != unchanged || r.Deleted != deleted {
		t.Errorf("%s: written/unchanged/deleted = %d/%d/%d, want %d/%d/%d", dest, r.Written, r.Unchanged, r.Deleted, written, unchanged, deleted)
	}
	if outputs != nil && !reflect.DeepEqual(r.Outputs, outputs) {
		t.Errorf("%s: outputs =\n%+v\nwant\n%+v", dest, r.Outputs, outputs)
	}
	if r.ID != eventID+"."+dest || r.Reason != "" || r.Original != nil || r.Attempts != 1 {
		t.Errorf("%s: id %q reason %q original %v attempts %d", dest, r.ID, r.Reason, r.Original, r.Attempts)
	}
}

func written(path, content, url string) events.OutputRef {
	return events.OutputRef{Path: path, SHA256: digestOf(content), Size: int64(len(content)), URL: url, Action: events.ActionWritten}
}

// TestEndToEndLocal: announce → one published event per destination with
// exact counts and outputs → catalog and files on disk; then a second
// version updates, adds and (replacement) deletes.
func TestEndToEndLocal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})

	res := e.wait(id, 2, 20*time.Second)
	if len(res) != 2 {
		t.Fatalf("got %d results, want 2", len(res))
	}
	site := localRoot(t, e.roots["site"])
	html := files(t, site)["tomorrow/index.html"]
	checkPublished(t, res[0], id, "archive", 2, 0, 0, []events.OutputRef{
		written("data/a.csv", v1["data/a.csv"], ""), written("report.md", v1["report.md"], ""),
	})
	checkPublished(t, res[1], id, "site", 3, 0, 0, nil) // outputs checked below (HTML bytes are the renderer's)
	if got := res[1].Outputs; len(got) != 3 || got[0] != written("tomorrow/data/a.csv", v1["data/a.csv"], "https://example.com/w/tomorrow/data/a.csv") ||
		got[1].Path != "tomorrow/index.html" || got[1].SHA256 != html || got[1].URL != "https://example.com/w/tomorrow/" ||
		got[2] != written("tomorrow/report.md", v1["report.md"], "https://example.com/w/tomorrow/report.md") {
		t.Errorf("site outputs = %+v", got)
	}
	for _, r := range res {
		if r.Source == nil || *r.Source != (events.SourceRef{ID: "weather.tomorrow", Digest: digest, Created: created}) {
			t.Errorf("%s: source = %+v", r.DestinationID, r.Source)
		}
	}

	archive := localRoot(t, e.roots["archive"])
	cat := readCatalog(t, archive)
	if len(cat.Outputs) != 2 {
		t.Fatalf("archive catalog has %d outputs", len(cat.Outputs))
	}
	for _, o := range cat.Outputs {
		if o.PipelineID != "weather.daily" || o.DestinationID != "archive" || o.Kind != catalog.KindSource ||
			o.SHA256 != digestOf(v1[o.Path]) || o.Source.ID != "weather.tomorrow" || o.Source.Digest != digest {
			t.Errorf("archive record %+v", o)
		}
	}
	wantFiles := map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])}
	checkFiles(t, archive, wantFiles)
	siteCat := readCatalog(t, site)
	if idx := siteCat.Index(); len(idx) != 3 || idx["tomorrow/index.html"].Kind != catalog.KindGenerated ||
		idx["tomorrow/index.html"].SourcePath != "report.md" || idx["tomorrow/index.html"].SHA256 != html {
		t.Errorf("site catalog = %+v", siteCat.Outputs)
	}

	// Version 2: replacement deletes a.csv, additive keeps it.
	loc2, digest2 := e.bundle("weather.tomorrow", v2)
	id2 := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc2, ManifestDigest: digest2})
	res = e.wait(id2, 2, 20*time.Second)
	checkPublished(t, res[0], id2, "archive", 2, 0, 1, []events.OutputRef{
		written("data/b.csv", v2["data/b.csv"], ""), written("report.md", v2["report.md"], ""),
		{Path: "data/a.csv", Action: events.ActionDeleted},
	})
	checkPublished(t, res[1], id2, "site", 3, 0, 0, nil) // a.csv is kept, not desired
	checkFiles(t, archive, map[string]string{catalog.FileName: "", "data/b.csv": digestOf(v2["data/b.csv"]), "report.md": digestOf(v2["report.md"])})
	if got := sortedKeys(files(t, site)); !reflect.DeepEqual(got, []string{catalog.FileName, "tomorrow/data/a.csv", "tomorrow/data/b.csv", "tomorrow/index.html", "tomorrow/report.md"}) {
		t.Errorf("site files = %v", got)
	}
	if len(e.results.all()) != 4 {
		t.Errorf("%d result events, want 4", len(e.results.all()))
	}
	e.settled(5 * time.Second)
	for _, root := range []string{e.roots["site"], e.roots["archive"]} {
		if !e.leaseKeyGone(config.Destination{Backend: config.BackendLocal, Path: root}.RootKey()) {
			t.Errorf("lease on %s still held after the publications", root)
		}
	}
	e.checkNoBadEvents()
}

// checkFiles compares a root's objects with want (an empty digest accepts any bytes).
func checkFiles(t *testing.T, b storage.Backend, want map[string]string) {
	t.Helper()
	got := files(t, b)
	for p, d := range want {
		if d == "" {
			got[p] = ""
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s holds %v, want %v", b, got, want)
	}
}

// TestEndToEndS3: the same flow with the bundle and one destination on S3.
func TestEndToEndS3(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
pipelines:
  - id: weather.daily
    destinations: [bucket, disk]
destinations:
  - id: bucket
    backend: s3
    bucket: @bucket@
    path: weather/latest/
    region: us-east-1
    workflow: replacement
  - id: disk
    backend: local
    path: @disk@
`, true)
	e.start(nodeConfig{opts: fastOptions()})
	loc, digest := e.s3Bundle("in/b1/", "weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	res := e.wait(id, 2, 30*time.Second)
	want := []events.OutputRef{written("data/a.csv", v1["data/a.csv"], ""), written("report.md", v1["report.md"], "")}
	checkPublished(t, res[0], id, "bucket", 2, 0, 0, want)
	checkPublished(t, res[1], id, "disk", 2, 0, 0, want)

	d, _ := e.cfg.Destination("bucket")
	root, err := (&testStores{s3: e.s3}).Destination(e.ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	cat := readCatalog(t, root)
	if len(cat.Outputs) != 2 || cat.Outputs[0].Path != "data/a.csv" || cat.Outputs[1].SHA256 != digestOf(v1["report.md"]) {
		t.Errorf("S3 catalog = %+v", cat.Outputs)
	}
	checkFiles(t, root, map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])})

	// Replacement on S3: v2 deletes a.csv.
	loc2, digest2 := e.s3Bundle("in/b2/", "weather.tomorrow", v2)
	id2 := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc2, ManifestDigest: digest2, Destinations: []string{"bucket"}})
	res = e.wait(id2, 1, 30*time.Second)
	checkPublished(t, res[0], id2, "bucket", 2, 0, 1, []events.OutputRef{
		written("data/b.csv", v2["data/b.csv"], ""), written("report.md", v2["report.md"], ""), {Path: "data/a.csv", Action: events.ActionDeleted},
	})
	checkFiles(t, root, map[string]string{catalog.FileName: "", "data/b.csv": digestOf(v2["data/b.csv"]), "report.md": digestOf(v2["report.md"])})
	e.settled(5 * time.Second)
	e.checkNoBadEvents()
}

// TestPoisonInput: bad input gets exactly one failed event with the right
// reason, is never retried, leaves nothing pending, and the consumer stays
// healthy.
func TestPoisonInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	loc, digest := e.bundle("weather.tomorrow", v1)
	empty := filepath.Join(e.base, "empty-bundle")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}

	// Garbage bytes on the bundle-ready subject.
	ack, err := e.js.Publish(e.ctx, e.streams.Subjects.BundleReady("weather.daily"), []byte("\x00not json{"))
	if err != nil {
		t.Fatal(err)
	}
	garbageID := fmt.Sprintf("invalid.%s.%d", e.streams.Subjects.BundlesStream(), ack.Sequence)
	unknown := e.announce(events.BundleReady{PipelineID: "nobody.knows", Bundle: loc, ManifestDigest: digest})
	mismatch := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digestOf("other")})
	noManifest := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: empty, ManifestDigest: digest, Destinations: []string{"archive"}})
	unknownDest := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest, Destinations: []string{"nowhere"}})

	e.waitFor(20*time.Second, func() bool {
		for _, r := range e.results.all() {
			if r.ID == garbageID {
				return true
			}
		}
		return false
	}, "the invalid_event result")
	checkFailed := func(r events.Result, eventID, dest, reason string) {
		t.Helper()
		if r.Type != events.TypeFailed || r.DestinationID != dest || r.Reason != reason || r.Attempts != 1 || r.Message == "" {
			t.Errorf("%s: got %s dest %q reason %q attempts %d (%s), want failed %q %s", eventID, r.Type, r.DestinationID, r.Reason, r.Attempts, r.Message, dest, reason)
		}
		if eventID != "" && (r.Original == nil || r.Original.ID != eventID) {
			t.Errorf("%s: original = %+v", eventID, r.Original)
		}
	}
	for _, r := range e.results.all() {
		if r.ID == garbageID {
			checkFailed(r, "", "", events.ReasonInvalidEvent)
		}
	}
	res := e.wait(unknown, 1, 10*time.Second)
	checkFailed(res[0], unknown, "", events.ReasonUnknownPipeline)
	res = e.wait(unknownDest, 1, 10*time.Second)
	checkFailed(res[0], unknownDest, "", events.ReasonUnknownDestination)
	res = e.wait(mismatch, 2, 10*time.Second)
	checkFailed(res[0], mismatch, "archive", events.ReasonDigestMismatch)
	checkFailed(res[1], mismatch, "site", events.ReasonDigestMismatch)
	res = e.wait(noManifest, 1, 10*time.Second)
	checkFailed(res[0], noManifest, "archive", events.ReasonBundleMissing)

	// Healthy afterwards: a good event is published.
	good := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	res = e.wait(good, 2, 10*time.Second)
	checkPublished(t, res[0], good, "archive", 2, 0, 0, res[0].Outputs)
	info := e.settled(5 * time.Second)
	// Every message was delivered exactly once: no retry storm.
	if info.NumRedelivered != 0 || info.Delivered.Consumer != 6 || info.AckFloor.Consumer != 6 {
		t.Errorf("consumer info: redelivered %d delivered %d ack floor %d, want 0/6/6", info.NumRedelivered, info.Delivered.Consumer, info.AckFloor.Consumer)
	}
	// 1 + 1 + 1 + 2 + 1 failed, 2 published: nothing else.
	if n := len(e.results.all()); n != 8 {
		e.dump()
		t.Errorf("%d result events, want 8", n)
	}
	// Nothing was written by the bad events.
	cat := readCatalog(t, localRoot(t, e.roots["archive"]))
	if len(cat.Outputs) != 2 {
		t.Errorf("archive catalog has %d outputs", len(cat.Outputs))
	}
	e.checkNoBadEvents()
}

// TestBundleLocationMissing: a bundle folder that does not exist is a
// terminal bundle_missing failure, not an internal error.
func TestBundleLocationMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	gone := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: filepath.Join(e.base, "no-such-bundle"),
		ManifestDigest: digestOf("x"), Destinations: []string{"archive"}})
	res := e.wait(gone, 1, 10*time.Second)
	if r := res[0]; r.Type != events.TypeFailed || r.Reason != events.ReasonBundleMissing || r.Attempts != 1 {
		t.Errorf("got %s reason %q attempts %d: %s", r.Type, r.Reason, r.Attempts, r.Message)
	}
	e.settled(5 * time.Second)
}

// flaky makes the archive destination's storage unavailable for its first
// n publication attempts: their read of the catalog (one per attempt; the
// reads beside it pass) fails with storage.ErrUnavailable. failures counts
// the failed calls.
func flaky(n int32, failures *atomic.Int32) func(d config.Destination, b storage.Backend) storage.Backend {
	var calls atomic.Int32
	return func(d config.Destination, b storage.Backend) storage.Backend {
		if d.ID != "archive" {
			return b
		}
		return &hooked{Backend: b, read: func(_ context.Context, p string) error {
			if p != catalog.FileName {
				return nil
			}
			if calls.Add(1) <= n {
				failures.Add(1)
				return fmt.Errorf("s3 get: %w: 503 slow down", storage.ErrUnavailable)
			}
			return nil
		}}
	}
}

// TestTransientFailureRetried: a destination whose storage is unavailable
// twice is retried with a delay and published on the third delivery; the
// other destination is reported once.
func TestTransientFailureRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	var calls atomic.Int32
	opts := fastOptions()
	opts.MaxDeliver = 5
	opts.BackOff = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}
	e.start(nodeConfig{opts: opts, wrap: flaky(2, &calls)})
	loc, digest := e.bundle("weather.tomorrow", v1)
	start := time.Now()
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	res := e.wait(id, 2, 20*time.Second)
	elapsed := time.Since(start)
	if len(res) != 2 {
		t.Fatalf("%d results, want 2", len(res))
	}
	r := res[0]
	if r.Type != events.TypePublished || r.DestinationID != "archive" || r.Attempts != 3 || r.Written != 2 {
		t.Errorf("archive: %s attempts %d written %d (%s), want published on attempt 3 with 2 written", r.Type, r.Attempts, r.Written, r.Message)
	}
	// site succeeded on attempt 1; its redelivered re-runs were no-ops whose
	// events the dedup window dropped.
	if r := res[1]; r.Type != events.TypePublished || r.Attempts != 1 || r.Written != 3 {
		t.Errorf("site: %s attempts %d written %d", r.Type, r.Attempts, r.Written)
	}
	if elapsed < 400*time.Millisecond {
		t.Errorf("published after %s: the back-off (100ms, 300ms) was not applied", elapsed)
	}
	if calls.Load() != 2 {
		t.Errorf("%d failed attempts, want 2", calls.Load())
	}
	info := e.settled(5 * time.Second)
	if info.Delivered.Stream != 1 || info.Delivered.Consumer != 3 {
		t.Errorf("deliveries: stream seq %d consumer seq %d, want 1 message delivered 3 times", info.Delivered.Stream, info.Delivered.Consumer)
	}
	checkFiles(t, localRoot(t, e.roots["archive"]), map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])})
}

// TestMaxDeliveries: storage that never comes back ends in exactly one
// failed event with reason max_deliveries, after exactly MaxDeliver tries
// (the durable on the server says the same), spaced by the back-off.
func TestMaxDeliveries(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		max     int
		backoff []time.Duration
	}{
		{1, []time.Duration{time.Minute}},
		{3, []time.Duration{50 * time.Millisecond}},
		{4, []time.Duration{20 * time.Millisecond, 100 * time.Millisecond}},
	} {
		t.Run(strconv.Itoa(tt.max), func(t *testing.T) {
			e := newEnv(t, weatherYAML, false)
			var calls atomic.Int32
			opts := fastOptions()
			opts.MaxDeliver, opts.BackOff = tt.max, tt.backoff
			e.start(nodeConfig{opts: opts, wrap: flaky(1000, &calls)})
			if info, err := e.durableInfo(); err != nil || info.Config.MaxDeliver != tt.max {
				t.Fatalf("durable on the server: %+v %v, want max deliver %d", info, err, tt.max)
			}
			loc, digest := e.bundle("weather.tomorrow", v1)
			start := time.Now()
			id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest, Destinations: []string{"archive"}})
			e.wait(id, 1, 20*time.Second)
			took := time.Since(start)
			// Every result is published before its delivery is acked or
			// terminated: once the durable settled and the collector holds
			// every stored result, a wrong extra one would be among them.
			info := e.quiet(5 * time.Second)
			res := e.results.of(id)
			if len(res) != 1 {
				e.dump()
				t.Fatalf("%d results, want 1", len(res))
			}
			r := res[0]
			if r.Type != events.TypeFailed || r.Reason != events.ReasonMaxDeliveries || r.Attempts != tt.max || r.Original == nil || r.Original.ID != id {
				t.Errorf("got %s reason %q attempts %d original %v (%s)", r.Type, r.Reason, r.Attempts, r.Original, r.Message)
			}
			if info.Delivered.Consumer != uint64(tt.max) || calls.Load() != int32(tt.max) {
				t.Errorf("delivered %d times with %d failed attempts, want %d and %d", info.Delivered.Consumer, calls.Load(), tt.max, tt.max)
			}
			// The waits between deliveries: the back-off, its last entry repeating.
			var wait time.Duration
			for i := range tt.max - 1 {
				wait += tt.backoff[min(i, len(tt.backoff)-1)]
			}
			if took < wait || took > wait+10*time.Second {
				t.Errorf("failed after %s, want the back-off's %s and a little", took, wait)
			}
			if got := files(t, localRoot(t, e.roots["archive"])); len(got) != 0 {
				t.Errorf("archive holds %v after failed attempts", got)
			}
		})
	}
}

// TestDurableKeepsOperatorSettings: a durable whose max deliveries and ack
// wait an operator changed on the server keeps them when a consumer starts
// with other options; one warn line names both, and events are failed on
// the server's last delivery (not left unreported past it).
func TestDurableKeepsOperatorSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	var logs testenv.SyncBuffer
	subj := e.streams.Subjects
	first := consumer.New(e.js, subj, nil, fastOptions())
	if _, err := first.Durable(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The operator: `nats consumer edit DISTRIBUTOR_BUNDLES distributor-publisher --max-deliver 2 --wait 3s`.
	cons, err := e.js.Consumer(e.ctx, subj.BundlesStream(), subj.Durable())
	if err != nil {
		t.Fatal(err)
	}
	cfg := cons.CachedInfo().Config
	cfg.MaxDeliver, cfg.AckWait = 2, 3*time.Second
	if _, err := e.js.UpdateConsumer(e.ctx, subj.BundlesStream(), cfg); err != nil {
		t.Fatal(err)
	}

	var calls atomic.Int32
	opts := fastOptions()
	opts.MaxDeliver, opts.BackOff = 5, []time.Duration{20 * time.Millisecond}
	e.start(nodeConfig{opts: opts, wrap: flaky(1000, &calls), log: zerolog.New(&logs)})
	info, err := e.durableInfo()
	if err != nil || info.Config.MaxDeliver != 2 || info.Config.AckWait != 3*time.Second {
		t.Fatalf("durable after start: %+v %v, want the operator's max deliver 2 and ack wait 3s", info, err)
	}
	const msg = "consumer distributor-publisher differs from the configuration: max_deliver is 2 on the server, 5 configured; ack_wait is 3s on the server, 2s configured; keeping the server's values (an operator may have set them; docs/operations.md says how to apply the configuration)"
	var warns []string
	for raw := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var l struct{ Level, Message string }
		if json.Unmarshal([]byte(raw), &l) == nil && l.Level == "warn" {
			warns = append(warns, l.Message)
		}
	}
	if len(warns) != 1 || warns[0] != msg {
		t.Errorf("warn lines %q, want one: %s", warns, msg)
	}

	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest, Destinations: []string{"archive"}})
	res := e.wait(id, 1, 20*time.Second)
	e.settled(5 * time.Second)
	if r := res[0]; r.Type != events.TypeFailed || r.Reason != events.ReasonMaxDeliveries || r.Attempts != 2 || calls.Load() != 2 {
		t.Errorf("got %s reason %q attempts %d after %d tries, want failed max_deliveries on the server's last delivery, 2", r.Type, r.Reason, r.Attempts, calls.Load())
	}
}

// TestCollisionThenReplay: an unmanaged file at a planned path blocks the
// destination with a collision event carrying the original; after the file
// is removed, a replay (as `distributor replay` publishes it) is published.
func TestCollisionThenReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	stray := filepath.Join(e.roots["archive"], "report.md")
	if err := os.WriteFile(stray, []byte("hand-made\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	res := e.wait(id, 2, 20*time.Second)
	col := res[0]
	if col.Type != events.TypeCollision || col.DestinationID != "archive" || !reflect.DeepEqual(col.Collisions, []string{"report.md"}) ||
		col.Written != 0 || col.Original == nil || col.Original.ID != id || col.Original.Bundle != loc {
		t.Fatalf("archive: %+v", col)
	}
	if res[1].Type != events.TypePublished {
		t.Errorf("site (no collision) = %s", res[1].Type)
	}
	if data, _ := os.ReadFile(stray); string(data) != "hand-made\n" {
		t.Errorf("unmanaged file changed: %q", data)
	}
	if _, err := os.Stat(filepath.Join(e.roots["archive"], "data", "a.csv")); !os.IsNotExist(err) {
		t.Errorf("a blocked publication wrote data/a.csv")
	}
	e.settled(5 * time.Second)

	// The operator removes the file and replays: cmd/distributor/replay.go
	// re-announces the original with a new id, replay_of and the destination.
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	ev := *col.Original
	ev.ID = ev.ID + ".replay.1"
	ev.ReplayOf = col.Original.ID
	ev.ProducedAt = time.Time{}
	ev.Destinations = []string{col.DestinationID}
	replay := e.announce(ev)
	res = e.wait(replay, 1, 20*time.Second)
	checkPublished(t, res[0], replay, "archive", 2, 0, 0, []events.OutputRef{
		written("data/a.csv", v1["data/a.csv"], ""), written("report.md", v1["report.md"], ""),
	})
	checkFiles(t, localRoot(t, e.roots["archive"]), map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])})
}
