package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// lanesYAML has two pipelines, each with its own destination and its own
// bundle folder.
const lanesYAML = `
pipelines:
  - id: weather.daily
    destinations: [site]
    bundle_locations: ["@weatherin@"]
  - id: tides.hourly
    destinations: [tides]
    bundle_locations: ["@tidesin@"]
destinations:
  - id: site
    backend: local
    path: @site@
  - id: tides
    backend: local
    path: @tides@
`

// bundleIn writes a bundle of files into a fresh folder under dir (see
// env.bundle).
func (e *env) bundleIn(dir, id string, files map[string]string) (location, digest string) {
	e.t.Helper()
	n := e.nbundle.Add(1)
	loc := filepath.Join(dir, fmt.Sprintf("b%d", n))
	return loc, testenv.WriteBundle(e.t, loc, id, created.Add(time.Duration(n-1)*time.Second), files)
}

// checkEmpty fails the test when the root folder of dest holds anything:
// no output, no catalog, no lease or lock object.
func (e *env) checkEmpty(dest string) {
	e.t.Helper()
	entries, err := os.ReadDir(e.roots[dest])
	if err != nil {
		e.t.Fatal(err)
	}
	if len(entries) != 0 {
		e.t.Errorf("root of %s holds %v, want nothing", dest, entries)
	}
}

// onlyResult waits for the results of id and checks there is exactly one
// (the durable settled: no other will come), failed with reason for
// pipeline and dest on the first delivery, keeping its original.
func (e *env) onlyResult(id, pipeline, dest, reason string) events.Result {
	e.t.Helper()
	e.wait(id, 1, 20*time.Second)
	e.quiet(10 * time.Second)
	res := e.results.of(id)
	if len(res) != 1 {
		e.dump()
		e.t.Fatalf("%s: %d results, want 1", id, len(res))
	}
	r := res[0]
	if r.Type != events.TypeFailed || r.Reason != reason || r.PipelineID != pipeline || r.DestinationID != dest || r.Attempts != 1 ||
		r.Written != 0 || r.ID != id+"."+orUnderscore(dest) || r.Original == nil || r.Original.ID != id {
		e.t.Fatalf("%s: %s/%s pipeline %q dest %q attempts %d written %d id %q original %v (%s)\nwant one failed/%s for pipeline %q dest %q on attempt 1",
			id, r.Type, r.Reason, r.PipelineID, r.DestinationID, r.Attempts, r.Written, r.ID, r.Original, r.Message, reason, pipeline, dest)
	}
	return r
}

func orUnderscore(s string) string {
	if s == "" {
		return "_"
	}
	return s
}

// Rule: serve accepts a bundle-ready event only when the pipeline of its
// subject, producer or admin, is its pipeline_id. Otherwise one
// failed/invalid_event result, under the subject's pipeline and naming
// both, and nothing of the bundle is read: nothing is written, and a
// bundle that does not exist is not reported missing.
func TestRuleSubjectNamesThePipeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, lanesYAML, false)
	subj := e.streams.Subjects
	e.start(nodeConfig{opts: fastOptions()})
	tidesBundle, digest := e.bundleIn(e.roots["tidesin"], "tides.today", map[string]string{"t.csv": "t,1\n"})
	missing := filepath.Join(e.roots["weatherin"], "never-written")

	for _, c := range []struct {
		id, subject, subjectPipeline, pipeline, bundle string
	}{
		{"weather-claims-tides", subj.BundleReady("weather.daily"), "weather.daily", "tides.hourly", tidesBundle},
		{"tides-claims-weather", subj.BundleReady("tides.hourly"), "tides.hourly", "weather.daily", missing},
		{"admin-claims-tides", subj.AdminBundleReady("weather.daily"), "weather.daily", "tides.hourly", tidesBundle},
	} {
		e.publishRaw(c.subject, events.BundleReady{ID: c.id, PipelineID: c.pipeline, Bundle: c.bundle, ManifestDigest: digest})
		r := e.onlyResult(c.id, c.subjectPipeline, "", events.ReasonInvalidEvent)
		want := fmt.Sprintf("bundle.ready %s on %s is for pipeline %q, but the subject is pipeline %q's: announce a pipeline's bundles on its own subject, %s",
			c.id, c.subject, c.pipeline, c.subjectPipeline, subj.BundleReady(c.pipeline))
		if r.Message != want || r.Original.PipelineID != c.pipeline {
			t.Errorf("%s: message %q (original for %q)\nwant %q", c.id, r.Message, r.Original.PipelineID, want)
		}
	}
	e.checkEmpty("site")
	e.checkEmpty("tides")
	if info := e.settled(5 * time.Second); info.NumRedelivered != 0 {
		t.Errorf("%d redeliveries, want none: rejected events are final", info.NumRedelivered)
	}

	// The same bundle on its own pipeline's subject publishes.
	ok := e.announce(events.BundleReady{PipelineID: "tides.hourly", Bundle: tidesBundle, ManifestDigest: digest})
	if r := e.wait(ok, 1, 20*time.Second)[0]; r.Type != events.TypePublished || r.DestinationID != "tides" || r.Written != 1 {
		t.Fatalf("own subject: %s dest %q written %d (%s %s), want published to tides, 1 written", r.Type, r.DestinationID, r.Written, r.Reason, r.Message)
	}
	e.checkEmpty("site")
	e.checkNoBadEvents()
}

// Rule: a bundle outside its pipeline's bundle_locations, directly,
// through "..", through a symlink, in another bucket or under another key
// prefix, gets one failed/bundle_not_allowed result per destination on the
// first delivery and writes nothing; a replay on the admin subject obeys
// the same rule. Bundles inside publish.
func TestRuleBundleLocations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, strings.Replace(lanesYAML, `["@weatherin@"]`, `["@weatherin@", "s3://@bucket@/weather/"]`, 1), true)
	subj := e.streams.Subjects
	e.start(nodeConfig{opts: fastOptions()})
	content := map[string]string{"report.md": "# Today\n"}
	weatherIn, tidesIn := e.roots["weatherin"], e.roots["tidesin"]

	outside, digest := e.bundle("weather.today", content) // <base>/bundles/b1
	// The same folder spelled from inside the allowed one.
	dotdot := weatherIn + "/../../bundles/" + filepath.Base(outside)
	// A symlink in the weather folder to the tides folder.
	tidesBundle, tidesDigest := e.bundleIn(tidesIn, "weather.today", content)
	if err := os.Symlink(tidesIn, filepath.Join(weatherIn, "tides")); err != nil {
		t.Fatal(err)
	}
	viaLink := filepath.Join(weatherIn, "tides", filepath.Base(tidesBundle))
	otherBucket, obDigest := e.s3BundleIn(e.s3.Bucket(t), "weather/b1/", "weather.today", content)
	otherPrefix, opDigest := e.s3Bundle("tides/b1/", "weather.today", content)

	allowed := weatherIn + ", s3://" + e.bucket + "/weather/"
	refusal := func(loc, why string) string {
		return "bundle location not allowed: bundle " + loc + ` of pipeline "weather.daily" ` + why + " (bundle_locations: " + allowed +
			`): publish it from one of them, or add a folder or s3:// prefix that holds it to the bundle_locations of pipeline "weather.daily" in the configuration`
	}
	for _, c := range []struct {
		id, bundle, digest, why string
		admin                   bool
	}{
		{"outside", outside, digest, "lies outside them", false},
		{"dotdot", dotdot, digest, "is " + outside + ", outside them", false},
		{"symlink", viaLink, tidesDigest, "is " + tidesBundle + ", outside them", false},
		{"other-bucket", otherBucket, obDigest, "lies outside them", false},
		{"other-prefix", otherPrefix, opDigest, "lies outside them", false},
		{"replay-outside", outside, digest, "lies outside them", true},
	} {
		ev := events.BundleReady{ID: c.id, PipelineID: "weather.daily", Bundle: c.bundle, ManifestDigest: c.digest}
		if c.admin {
			// As `distributor replay` sends it.
			ev.ReplayOf = "outside"
			e.publishRaw(subj.AdminBundleReady(ev.PipelineID), ev)
		} else {
			e.announce(ev)
		}
		r := e.onlyResult(c.id, "weather.daily", "site", events.ReasonBundleNotAllowed)
		if want := refusal(c.bundle, c.why); r.Message != want {
			t.Errorf("%s: message\n %q\nwant\n %q", c.id, r.Message, want)
		}
	}
	e.checkEmpty("site")
	e.checkEmpty("tides")
	if info := e.settled(5 * time.Second); info.NumRedelivered != 0 {
		t.Errorf("%d redeliveries, want none: bundle_not_allowed is final", info.NumRedelivered)
	}

	// Inside: a folder of the weather folder, and a key under the prefix.
	inside, insideDigest := e.bundleIn(weatherIn, "weather.today", content)
	inS3, inS3Digest := e.s3Bundle("weather/b9/", "weather.tomorrow", map[string]string{"tomorrow.md": "# Tomorrow\n"})
	for _, ev := range []events.BundleReady{
		{PipelineID: "weather.daily", Bundle: inside, ManifestDigest: insideDigest},
		{PipelineID: "weather.daily", Bundle: inS3, ManifestDigest: inS3Digest},
	} {
		id := e.announce(ev)
		checkPublished(t, e.wait(id, 1, 20*time.Second)[0], id, "site", 1, 0, 0, nil)
	}
	if got := sortedKeys(files(t, localRoot(t, e.roots["site"]))); !slices.Equal(got, []string{".distributor.json", "report.md", "tomorrow.md"}) {
		t.Errorf("site holds %v, want both allowed bundles' files and the catalog", got)
	}
	e.checkEmpty("tides")
	e.checkNoBadEvents()
}

// Rule: an event's destinations stay within its pipeline's: naming the
// destination of another pipeline fails the event as a whole
// (failed/unknown_destination), and nothing is written anywhere, not even
// to the pipeline's own destination named beside it.
func TestRuleDestinationsStayInThePipeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, lanesYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	loc, digest := e.bundleIn(e.roots["weatherin"], "weather.today", map[string]string{"report.md": "# Today\n"})
	for _, dests := range [][]string{{"tides"}, {"site", "tides"}} {
		id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest, Destinations: dests})
		r := e.onlyResult(id, "weather.daily", "", events.ReasonUnknownDestination)
		if want := `unknown destination "tides": pipeline "weather.daily" publishes to [site]`; r.Message != want {
			t.Errorf("%v: message %q, want %q", dests, r.Message, want)
		}
	}
	e.checkEmpty("site")
	e.checkEmpty("tides")
	e.checkNoBadEvents()
}

// TestNATSPermissionsDocIsolatesPipelines runs the two producer sets of
// docs/nats-permissions.md against pipelines that declare bundle_locations:
// the weather producer gets nothing published for tides.hourly, neither on
// the tides subject (the server refuses it), nor by naming tides.hourly on
// its own subject (invalid_event), nor by announcing a bundle of the tides
// folder for its own pipeline (bundle_not_allowed). Its own announcement
// and the tides producer's publish.
func TestNATSPermissionsDocIsolatesPipelines(t *testing.T) {
	t.Parallel()
	n := testenv.NewNATSWithUsers(t, append([]*server.User{{Username: "test", Password: "test"}}, testenv.NATSUsersFromDoc(t, "../docs/nats-permissions.md")...))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newEnvOn(t, n, strings.ReplaceAll(lanesYAML, "weather.daily", docPipeline), false)
	subj := e.streams.Subjects
	e.start(nodeConfig{user: "serve", opts: fastOptions()})

	var mu sync.Mutex
	var async []error
	weatherJS, err := jetstream.New(n.ConnAs(t, "weather-producer", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		defer mu.Unlock()
		async = append(async, err)
	})))
	if err != nil {
		t.Fatal(err)
	}
	tidesJS, err := jetstream.New(n.ConnAs(t, "tides-producer"))
	if err != nil {
		t.Fatal(err)
	}
	weather, tides := events.NewPublisher(weatherJS, subj), events.NewPublisher(tidesJS, subj)
	content := map[string]string{"report.md": "# Today\n"}
	own, ownDigest := e.bundleIn(e.roots["weatherin"], "weather.today", content)
	theirs, theirsDigest := e.bundleIn(e.roots["tidesin"], "tides.today", map[string]string{"tides.csv": "t,1\n"})

	// Its own: published.
	if _, _, err := weather.AnnounceBundle(ctx, events.BundleReady{ID: "w-own", PipelineID: docPipeline, Bundle: own, ManifestDigest: ownDigest}); err != nil {
		t.Fatal(err)
	}
	if r := e.wait("w-own", 1, 20*time.Second)[0]; r.Type != events.TypePublished || r.DestinationID != "site" || r.Written != 1 {
		t.Fatalf("own announcement: %s dest %q written %d (%s %s)", r.Type, r.DestinationID, r.Written, r.Reason, r.Message)
	}
	siteBefore := files(t, localRoot(t, e.roots["site"]))

	// By subject: the server refuses it, nothing is stored.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, _, err = weather.AnnounceBundle(pctx, events.BundleReady{ID: "w-subject", PipelineID: "tides.hourly", Bundle: theirs, ManifestDigest: theirsDigest})
	pcancel()
	if err == nil {
		t.Fatal("weather producer: an announcement on the tides subject was acknowledged")
	}
	mu.Lock()
	violation := slices.ContainsFunc(async, func(err error) bool {
		return errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"distributor.bundle.ready.tides.hourly"`)
	})
	mu.Unlock()
	if !violation {
		t.Errorf("publish error %v, async errors %v; want a permissions violation for the tides subject", err, async)
	}
	if _, err := e.streams.Bundles.GetLastMsgForSubject(ctx, subj.BundleReady("tides.hourly")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("tides subject in the stream: err = %v, want nothing stored", err)
	}

	// By pipeline_id, on its own subject: stored, and refused by serve.
	ev := events.BundleReady{SchemaVersion: events.SchemaVersion, Type: events.TypeBundleReady, ID: "w-pipeline-id", PipelineID: "tides.hourly",
		Bundle: theirs, ManifestDigest: theirsDigest, ProducedAt: time.Now().UTC()}
	data, err := ev.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weatherJS.Publish(ctx, subj.BundleReady(docPipeline), data, jetstream.WithMsgID(ev.ID)); err != nil {
		t.Fatal(err)
	}
	e.onlyResult(ev.ID, docPipeline, "", events.ReasonInvalidEvent)

	// By bundle, for its own pipeline: refused before it is read.
	if _, _, err := weather.AnnounceBundle(ctx, events.BundleReady{ID: "w-bundle", PipelineID: docPipeline, Bundle: theirs, ManifestDigest: theirsDigest}); err != nil {
		t.Fatal(err)
	}
	e.onlyResult("w-bundle", docPipeline, "site", events.ReasonBundleNotAllowed)

	e.checkEmpty("tides")
	if got := files(t, localRoot(t, e.roots["site"])); !equalDigests(got, siteBefore) {
		t.Errorf("site changed: %v, was %v", got, siteBefore)
	}
	// Nothing was reported under tides.hourly either.
	for _, r := range e.results.all() {
		if r.PipelineID == "tides.hourly" {
			t.Errorf("a %s result under tides.hourly: %s", r.Type, r.Message)
		}
	}

	// The tides producer's own announcement publishes.
	if _, _, err := tides.AnnounceBundle(ctx, events.BundleReady{ID: "t-own", PipelineID: "tides.hourly", Bundle: theirs, ManifestDigest: theirsDigest}); err != nil {
		t.Fatal(err)
	}
	if r := e.wait("t-own", 1, 20*time.Second)[0]; r.Type != events.TypePublished || r.DestinationID != "tides" || r.Written != 1 {
		t.Fatalf("tides producer: %s dest %q written %d (%s %s)", r.Type, r.DestinationID, r.Written, r.Reason, r.Message)
	}
	e.checkNoBadEvents()
}

func equalDigests(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
