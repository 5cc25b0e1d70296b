package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

func setup(t *testing.T) (jetstream.JetStream, *events.Streams) {
	t.Helper()
	js := testenv.NewNATS(t).JetStream(t)
	st, err := events.Setup(context.Background(), js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return js, st
}

func TestSetupIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.NewNATS(t).JetStream(t)
	cfg := events.SetupConfig{Subjects: events.Subjects{Prefix: "acme"}}
	if _, err := events.Setup(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	st, err := events.Setup(ctx, js, cfg)
	if err != nil {
		t.Fatalf("second Setup: %v", err)
	}

	b, err := st.Bundles.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Config; c.Name != "ACME_BUNDLES" || !slices.Equal(c.Subjects, []string{"acme.bundle.ready.>", "acme.admin.bundle.ready.>"}) ||
		c.Retention != jetstream.LimitsPolicy || c.MaxAge != 7*24*time.Hour || c.Duplicates != 2*time.Minute || c.Storage != jetstream.FileStorage {
		t.Fatalf("bundles stream config = %+v", c)
	}
	e, err := st.Events.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := e.Config; c.Name != "ACME_EVENTS" || len(c.Subjects) != 1 || c.Subjects[0] != "acme.events.>" ||
		c.Retention != jetstream.LimitsPolicy || c.MaxAge != 30*24*time.Hour || c.Duplicates != time.Hour {
		t.Fatalf("events stream config = %+v", c)
	}
	kvs, err := st.Leases.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if kvs.Bucket() != "ACME_LEASES" || kvs.LimitMarkerTTL() != time.Minute || kvs.History() != 1 {
		t.Fatalf("lease bucket %s marker TTL %s history %d", kvs.Bucket(), kvs.LimitMarkerTTL(), kvs.History())
	}
	// Per-key TTL works (it needs the marker TTL).
	if _, err := st.Leases.Create(ctx, "k", []byte("v"), jetstream.KeyTTL(time.Second)); err != nil {
		t.Fatalf("create with per-key TTL: %v", err)
	}

	// Unchanged settings: nothing to report.
	if len(st.Differences) != 0 {
		t.Fatalf("second Setup found differences %+v", st.Differences)
	}
	// Messages survive a re-run of Setup.
	if _, _, err := events.NewPublisher(js, cfg.Subjects).AnnounceBundle(ctx, events.BundleReady{PipelineID: "p", Bundle: "/b", ManifestDigest: digest}); err != nil {
		t.Fatal(err)
	}
	if st, err = events.Setup(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	if b, _ := st.Bundles.Info(ctx); b.State.Msgs != 1 {
		t.Fatalf("bundles stream has %d messages after re-Setup, want 1", b.State.Msgs)
	}

	if _, err := events.Setup(ctx, js, events.SetupConfig{Subjects: events.Subjects{Prefix: "a.b"}}); err == nil {
		t.Fatal("Setup with prefix a.b succeeded")
	}
}

func TestAnnounceBundleDedup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, st := setup(t)
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	p := events.NewPublisher(js, st.Subjects, events.WithPublisherClock(func() time.Time { return now }))

	ev := events.BundleReady{ID: "evt-1", PipelineID: "weatherreporter.daily", Bundle: "s3://b/p/", ManifestDigest: digest}
	seq, dup, err := p.AnnounceBundle(ctx, ev)
	if err != nil || seq != 1 || dup {
		t.Fatalf("first announce: seq %d dup %v err %v, want 1 false nil", seq, dup, err)
	}
	seq, dup, err = p.AnnounceBundle(ctx, ev)
	if err != nil || seq != 1 || !dup {
		t.Fatalf("second announce: seq %d dup %v err %v, want 1 true nil", seq, dup, err)
	}
	ev.ID = "evt-2"
	if seq, dup, err = p.AnnounceBundle(ctx, ev); err != nil || seq != 2 || dup {
		t.Fatalf("other id: seq %d dup %v err %v, want 2 false nil", seq, dup, err)
	}

	m, err := st.Bundles.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "distributor.bundle.ready.weatherreporter.daily" || m.Header.Get("Nats-Msg-Id") != "evt-1" {
		t.Fatalf("stored subject %q msg id %q", m.Subject, m.Header.Get("Nats-Msg-Id"))
	}
	got, err := events.DecodeBundleReady(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "evt-1" || got.SchemaVersion != 1 || got.Type != "bundle.ready" || !got.ProducedAt.Equal(now) {
		t.Fatalf("stored event %+v", got)
	}

	// An empty id is filled with a fresh one.
	ev.ID = ""
	if seq, _, err = p.AnnounceBundle(ctx, ev); err != nil || seq != 3 {
		t.Fatalf("announce without id: seq %d err %v", seq, err)
	}
	m, _ = st.Bundles.GetMsg(ctx, 3)
	got, _ = events.DecodeBundleReady(m.Data)
	if len(got.ID) != 32 || m.Header.Get("Nats-Msg-Id") != got.ID {
		t.Fatalf("generated id %q, msg id %q", got.ID, m.Header.Get("Nats-Msg-Id"))
	}

	// An invalid event is refused before anything is published.
	ev.ManifestDigest = "sha256:nope"
	if _, _, err := p.AnnounceBundle(ctx, ev); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("invalid announce: err = %v, want ErrInvalidEvent", err)
	}
	if info, _ := st.Bundles.Info(ctx); info.State.Msgs != 3 {
		t.Fatalf("stream has %d messages, want 3", info.State.Msgs)
	}
}

// Rule: a bundles stream made before the admin subject existed is extended
// by Setup to capture it, keeping its messages; Setup stays idempotent.
func TestSetupAddsAdminSubjectToExistingStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.NewNATS(t).JetStream(t)
	old, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DISTRIBUTOR_BUNDLES", Subjects: []string{"distributor.bundle.ready.>"},
		Duplicates: 2 * time.Minute, MaxAge: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "distributor.bundle.ready.p", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := events.Setup(ctx, js, events.SetupConfig{}); err != nil {
			t.Fatalf("Setup #%d over the old stream: %v", i+1, err)
		}
	}
	info, err := old.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"distributor.bundle.ready.>", "distributor.admin.bundle.ready.>"}; !slices.Equal(info.Config.Subjects, want) || info.State.Msgs != 1 {
		t.Fatalf("after Setup: subjects %v, %d messages; want %v and 1", info.Config.Subjects, info.State.Msgs, want)
	}
	if _, err := js.Publish(ctx, "distributor.admin.bundle.ready.p", []byte("{}")); err != nil {
		t.Fatalf("publish on the admin subject after Setup: %v", err)
	}
}

// Rule: the producer API cannot carry operator flags; AnnounceAsOperator
// puts them on the admin subject.
func TestAnnounceOperatorFlags(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, st := setup(t)
	p := events.NewPublisher(js, st.Subjects)
	for _, ev := range []events.BundleReady{
		{ID: "take", PipelineID: "w.daily", Bundle: "/b", ManifestDigest: digest, TakeOwnership: true},
		{ID: "older", PipelineID: "w.daily", Bundle: "/b", ManifestDigest: digest, AllowOlder: true},
	} {
		_, _, err := p.AnnounceBundle(ctx, ev)
		if !errors.Is(err, events.ErrOperatorFlags) || !strings.Contains(err.Error(), "accepted only on distributor.admin.bundle.ready.>") {
			t.Errorf("AnnounceBundle(%s): err = %v, want ErrOperatorFlags naming the admin subject", ev.ID, err)
		}
	}
	if info, _ := st.Bundles.Info(ctx); info.State.Msgs != 0 {
		t.Fatalf("the refused announcements stored %d messages", info.State.Msgs)
	}

	ev := events.BundleReady{ID: "op-1", PipelineID: "w.daily", Bundle: "/b", ManifestDigest: digest, TakeOwnership: true, AllowOlder: true}
	if seq, dup, err := p.AnnounceAsOperator(ctx, ev); err != nil || seq != 1 || dup {
		t.Fatalf("AnnounceAsOperator: seq %d dup %v err %v, want 1 false nil", seq, dup, err)
	}
	m, err := st.Bundles.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.DecodeBundleReady(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "distributor.admin.bundle.ready.w.daily" || m.Header.Get("Nats-Msg-Id") != "op-1" || !got.TakeOwnership || !got.AllowOlder {
		t.Fatalf("stored on %q (msg id %q): %+v", m.Subject, m.Header.Get("Nats-Msg-Id"), got)
	}
	if !st.Subjects.IsAdmin(m.Subject) || st.Subjects.IsAdmin("distributor.bundle.ready.w.daily") || st.Subjects.IsAdmin("other.admin.bundle.ready.w") {
		t.Fatal("IsAdmin does not tell the admin subject from others")
	}
}

func TestAnnounceWithoutStreams(t *testing.T) {
	t.Parallel()
	js := testenv.NewNATS(t).JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, _, err := events.NewPublisher(js, events.Subjects{}).AnnounceBundle(ctx, events.BundleReady{ID: "e", PipelineID: "p", Bundle: "/b", ManifestDigest: digest})
	if err == nil || !strings.Contains(err.Error(), "stream DISTRIBUTOR_BUNDLES does not exist") {
		t.Fatalf("err = %v, want the missing stream named", err)
	}

	// A missing stream elects no leader: no waiting for one.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the announce took %s to fail, want at once", took)
	}
}

// TestAnnounceRidesOutALeaderElection: an announce to a bundle stream that
// lost its quorum waits for its leader (a node comes back a second later)
// and stores the event once, instead of failing the producer.
func TestAnnounceRidesOutALeaderElection(t *testing.T) {
	c, st, sjs, leader := withoutQuorum(t, events.Subjects{}.BundlesStream())
	ctx := context.Background()

	type announced struct {
		seq uint64
		err error
	}
	done := make(chan announced, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		seq, _, err := events.NewPublisher(sjs, st.Subjects).AnnounceBundle(actx, events.BundleReady{ID: "during-election", PipelineID: "p", Bundle: "/b", ManifestDigest: digest})
		done <- announced{seq, err}
	}()
	time.Sleep(time.Second)
	c.Restart(leader)
	got := <-done
	if got.err != nil {
		t.Fatalf("announce while the stream elected a leader: %v", got.err)
	}
	info, err := sjs.Stream(ctx, st.Subjects.BundlesStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("stream holds %d messages, want the event once", n)
	}
}

func published(bundleID, dest, pipeline string) events.Result {
	return events.Result{
		Type: events.TypePublished, BundleEventID: bundleID, PipelineID: pipeline, DestinationID: dest,
		Source:  &events.SourceRef{ID: "weatherreporter.tomorrow", Digest: digest},
		Written: 1, Outputs: []events.OutputRef{{Path: "tomorrow/report.md", SHA256: digest, Size: 10, Action: events.ActionWritten}},
	}
}

func TestPublishResultDeterministicID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, st := setup(t)
	p := events.NewPublisher(js, st.Subjects)

	r := published("evt-1", "latest-html", "weatherreporter.daily")
	if got := events.ResultMsgID(r); got != "evt-1.latest-html" {
		t.Fatalf("ResultMsgID = %q", got)
	}
	for i := 0; i < 3; i++ { // a redelivered bundle publishes its result again
		dup, err := p.PublishResult(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if dup != (i > 0) {
			t.Fatalf("publish %d: dup = %v", i+1, dup)
		}
	}
	// A second result of another type for the same destination of the
	// same event (a redelivery that found a newer version landed since)
	// is a duplicate too: downstream hears of the first only.
	later := r
	later.Type, later.Written, later.Outputs = events.TypeSuperseded, 0, nil
	later.SupersededBy = &events.SourceRef{ID: "weatherreporter.tomorrow", Digest: digest}
	if dup, err := p.PublishResult(ctx, later); err != nil || !dup {
		t.Fatalf("superseded after published: dup = %v, err = %v", dup, err)
	}
	info, _ := st.Events.Info(ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("events stream has %d messages after 3 identical publishes, want 1", info.State.Msgs)
	}
	m, err := st.Events.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.DecodeResult(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "distributor.events.published.latest-html.weatherreporter.daily" ||
		m.Header.Get("Nats-Msg-Id") != "evt-1.latest-html" || got.ID != "evt-1.latest-html" || got.Type != events.TypePublished || got.Time.IsZero() {
		t.Fatalf("stored %s msg-id %s event %+v", m.Subject, m.Header.Get("Nats-Msg-Id"), got)
	}

	// Another destination, another type: separate events.
	if _, err := p.PublishResult(ctx, published("evt-1", "archive", "weatherreporter.daily")); err != nil {
		t.Fatal(err)
	}
	orig := sampleBundle()
	failed := events.Result{Type: events.TypeFailed, BundleEventID: "evt-1", PipelineID: "weatherreporter.daily",
		Reason: events.ReasonUnknownPipeline, Message: "pipeline not configured", Attempts: 1, Original: &orig}
	if _, err := p.PublishResult(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishResult(ctx, failed); err != nil {
		t.Fatal(err)
	}
	// Maintenance results are not tied to a bundle event: each is new.
	for i := 0; i < 2; i++ {
		if _, err := p.PublishResult(ctx, events.Result{Type: events.TypePruned, PipelineID: "w.daily", DestinationID: "archive", Deleted: 3}); err != nil {
			t.Fatal(err)
		}
	}
	info, _ = st.Events.Info(ctx, jetstream.WithSubjectFilter(">"))
	want := map[string]uint64{
		"distributor.events.published.latest-html.weatherreporter.daily": 1,
		"distributor.events.published.archive.weatherreporter.daily":     1,
		"distributor.events.failed._.weatherreporter.daily":              1,
		"distributor.events.pruned.archive.w.daily":                      2,
	}
	if fmt.Sprint(info.State.Subjects) != fmt.Sprint(want) {
		t.Fatalf("subjects %v, want %v", info.State.Subjects, want)
	}
	m, _ = st.Events.GetMsg(ctx, 3)
	if m.Header.Get("Nats-Msg-Id") != "evt-1._" {
		t.Fatalf("failed msg id %q", m.Header.Get("Nats-Msg-Id"))
	}
	if got, err := events.DecodeResult(m.Data); err != nil || got.Original == nil || got.Original.ID != orig.ID {
		t.Fatalf("failed event lost its original: %+v %v", got, err)
	}

	// Invalid results are refused.
	if _, err := p.PublishResult(ctx, events.Result{Type: "done"}); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("unknown type: err = %v", err)
	}
	if _, err := p.PublishResult(ctx, events.Result{Type: events.TypeFailed, BundleEventID: "x"}); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("failed without reason: err = %v", err)
	}
}

func TestResultFilterMatchesStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, st := setup(t)
	p := events.NewPublisher(js, st.Subjects)
	for _, r := range []events.Result{
		published("e1", "html", "w.daily"),
		published("e1", "archive", "w.daily"),
		published("e2", "html", "w.daily.eu"),
		published("e3", "html", "w"),
		{Type: events.TypeCollision, BundleEventID: "e4", DestinationID: "html", PipelineID: "w.daily"},
		{Type: events.TypeFailed, BundleEventID: "e5", PipelineID: "w.daily", Reason: events.ReasonInvalidEvent},
	} {
		if _, err := p.PublishResult(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	s := st.Subjects
	cases := []struct {
		filter string
		want   uint64
	}{
		{s.ResultFilter("", "", ""), 6},
		{s.ResultFilter("published", "", ""), 4},
		{s.ResultFilter("", "html", ""), 4},
		{s.ResultFilter("", "", "w.daily"), 4},
		{s.ResultFilter("published", "html", "w.daily"), 1},
		{s.ResultFilter("", "", "w"), 1},
		{s.ResultFilter("failed", "_", ""), 1},
		{s.ResultFilter("collision", "", "w.daily"), 1},
	}
	for _, c := range cases {
		info, err := st.Events.Info(ctx, jetstream.WithSubjectFilter(c.filter))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, v := range info.State.Subjects {
			n += v
		}
		if n != c.want {
			t.Errorf("filter %s matched %d events (%v), want %d", c.filter, n, info.State.Subjects, c.want)
		}
	}
}

func TestResultTruncation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, st := setup(t)
	const limit = 4096
	p := events.NewPublisher(js, st.Subjects, events.WithMaxResultBytes(limit))

	r := published("big", "html", "w.daily")
	r.Outputs = nil
	for i := range 200 {
		r.Outputs = append(r.Outputs, events.OutputRef{Path: fmt.Sprintf("dir/file-%03d.html", i), SHA256: digest, Size: int64(i), Action: events.ActionWritten})
	}
	r.Written = 200
	if _, err := p.PublishResult(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Under the limit nothing is cut.
	small := published("small", "html", "w.daily")
	if _, err := p.PublishResult(ctx, small); err != nil {
		t.Fatal(err)
	}

	m, _ := st.Events.GetMsg(ctx, 1)
	if len(m.Data) > limit {
		t.Fatalf("encoded %d bytes, limit %d", len(m.Data), limit)
	}
	got, err := events.DecodeResult(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !got.OutputsTruncated || got.ListsTruncated || got.Written != 200 || len(got.Outputs) == 0 || len(got.Outputs) >= 200 {
		t.Fatalf("truncated=%v lists=%v written=%d outputs=%d", got.OutputsTruncated, got.ListsTruncated, got.Written, len(got.Outputs))
	}
	if got.Outputs[0].Path != "dir/file-000.html" {
		t.Fatalf("kept outputs start at %q, want the first", got.Outputs[0].Path)
	}
	// As many as fit: one more would not.
	more := got
	more.Outputs = r.Outputs[:len(got.Outputs)+1]
	if d, _ := more.Encode(); len(d) <= limit {
		t.Fatalf("kept %d outputs but %d fit (%d bytes)", len(got.Outputs), len(more.Outputs), len(d))
	}
	if len(r.Outputs) != 200 || r.Outputs[199].Path != "dir/file-199.html" {
		t.Fatal("PublishResult changed the caller's outputs")
	}

	m, _ = st.Events.GetMsg(ctx, 2)
	got, _ = events.DecodeResult(m.Data)
	if got.OutputsTruncated || len(got.Outputs) != 1 {
		t.Fatalf("small event: truncated=%v outputs=%d", got.OutputsTruncated, len(got.Outputs))
	}

	// A collision with a huge path list keeps the event publishable.
	c := events.Result{Type: events.TypeCollision, BundleEventID: "col", DestinationID: "html", PipelineID: "w.daily"}
	for i := range 500 {
		c.Collisions = append(c.Collisions, fmt.Sprintf("unmanaged/path-%04d.txt", i))
	}
	if _, err := p.PublishResult(ctx, c); err != nil {
		t.Fatal(err)
	}
	m, _ = st.Events.GetMsg(ctx, 3)
	got, _ = events.DecodeResult(m.Data)
	if len(m.Data) > limit || !got.ListsTruncated || got.OutputsTruncated || len(got.Collisions) == 0 || len(got.Collisions) >= 500 {
		t.Fatalf("collision event: %d bytes, lists truncated %v, %d collisions", len(m.Data), got.ListsTruncated, len(got.Collisions))
	}

	// Nothing left to cut but a fixed field: a clear error, nothing published.
	f := published("huge", "html", "w.daily")
	f.Source.ID = strings.Repeat("s", limit)
	if _, err := p.PublishResult(ctx, f); !errors.Is(err, events.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if info, _ := st.Events.Info(ctx); info.State.Msgs != 3 {
		t.Fatalf("events stream has %d messages, want 3", info.State.Msgs)
	}
}

// Rule: a failed result too large even with its lists cut is still
// published: its original is replaced by the reference to the stored
// bundle-ready message, then its message is cut; without a reference the
// original stays and only the message is cut.
func TestResultOverLimitKeepsReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, st := setup(t)
	const limit = 4096
	p := events.NewPublisher(js, st.Subjects, events.WithMaxResultBytes(limit))
	orig := events.BundleReady{SchemaVersion: 1, Type: events.TypeBundleReady, ID: "e1", PipelineID: "w.daily",
		Bundle: "/bundles/" + strings.Repeat("b", 3000), ManifestDigest: digest}
	ref := &events.MsgRef{Stream: st.Subjects.BundlesStream(), Seq: 7}
	msg := "open bundle " + orig.Bundle + ": " + strings.Repeat("é", 1000)
	cases := []struct {
		name        string
		r           events.Result
		wantOrig    bool
		wantMessage string // "": the whole message
	}{
		{"original fits", events.Result{BundleEventID: "e1", Message: "bundle missing", Original: &orig, OriginalRef: ref}, true, ""},
		{"original left out", events.Result{BundleEventID: "e2", Message: strings.Repeat("m", 1500), Original: &orig, OriginalRef: ref}, false, ""},
		{"message cut too", events.Result{BundleEventID: "e3", Message: msg, Original: &orig, OriginalRef: ref}, false, "cut"},
		{"no reference: message cut", events.Result{BundleEventID: "e4", Message: msg, Original: &orig}, true, "cut"},
	}
	// The first case must fit: a short bundle.
	small := orig
	small.Bundle = "/bundles/b"
	cases[0].r.Original = &small
	for i, c := range cases {
		c.r.Type, c.r.PipelineID, c.r.DestinationID, c.r.Reason = events.TypeFailed, "w.daily", "html", events.ReasonBundleMissing
		if c.name == "original left out" {
			c.r.Collisions = []string{strings.Repeat("c", 2000)} // a list that is cut first
		}
		if _, err := p.PublishResult(ctx, c.r); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m, err := st.Events.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		got, err := events.DecodeResult(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > limit {
			t.Errorf("%s: %d bytes, limit %d", c.name, len(m.Data), limit)
		}
		if (got.Original != nil) != c.wantOrig || (c.wantOrig && got.Original.Bundle != c.r.Original.Bundle) {
			t.Errorf("%s: original = %+v, want kept %v", c.name, got.Original, c.wantOrig)
		}
		if (c.r.OriginalRef == nil) != (got.OriginalRef == nil) || (got.OriginalRef != nil && *got.OriginalRef != *ref) {
			t.Errorf("%s: original_ref = %+v, want %+v", c.name, got.OriginalRef, c.r.OriginalRef)
		}
		if c.wantMessage == "" && got.Message != c.r.Message {
			t.Errorf("%s: message %q, want it whole", c.name, got.Message)
		}
		if c.r.Collisions != nil && (!got.ListsTruncated || len(got.Collisions) != 0) {
			t.Errorf("%s: collisions %d, lists truncated %v: want the list cut before the original", c.name, len(got.Collisions), got.ListsTruncated)
		}
		if c.wantMessage == "cut" {
			kept := strings.TrimSuffix(got.Message, " … (truncated)")
			if kept == got.Message || !strings.HasPrefix(c.r.Message, kept) || len(kept) < 500 || !utf8.ValidString(got.Message) {
				t.Errorf("%s: message %q (%d bytes), want a valid prefix of the original ending in the truncation mark", c.name, got.Message, len(got.Message))
			}
		}
	}
}

// Rule: a producer cannot announce an event over the limits: the announce
// fails with ErrInvalidEvent naming the limit and stores nothing.
func TestAnnounceBundleRefusesOversizedEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, st := setup(t)
	p := events.NewPublisher(js, st.Subjects)
	base := events.BundleReady{ID: "e1", PipelineID: "w.daily", Bundle: "/b", ManifestDigest: digest, ProducedAt: time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)}
	long := base
	long.Bundle = "/" + strings.Repeat("b", 5000)
	big := base
	big.ReplayOf = strings.Repeat("r", 70<<10)
	for _, c := range []struct {
		ev   events.BundleReady
		want string
	}{
		{long, "bundle location \"/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb…\" is 5001 bytes, over the limit of 4096"},
		{big, "the event is 71914 bytes, over the limit of 65536"},
	} {
		if _, _, err := p.AnnounceBundle(ctx, c.ev); !errors.Is(err, events.ErrInvalidEvent) || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("announce: err = %v, want ErrInvalidEvent ending in %q", err, c.want)
		}
	}
	if info, _ := st.Bundles.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("bundles stream has %d messages, want 0", info.State.Msgs)
	}
}

// TestPublishWithoutQuorumSaysSo: a stream that exists but has no leader
// (two of three nodes gone) is not called missing.
func TestPublishWithoutQuorumSaysSo(t *testing.T) {
	t.Parallel()
	_, st, sjs, _ := withoutQuorum(t, events.Subjects{}.EventsStream())
	ctx := context.Background()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := events.NewPublisher(sjs, st.Subjects).PublishResult(pctx, published("evt-q", "archive", "weatherreporter.daily"))
	if err == nil || strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "stream DISTRIBUTOR_EVENTS does not answer: ") {
		t.Fatalf("err = %v, want the stream's missing leader, not a missing stream", err)
	}
}

// withoutQuorum sets up the R3 streams on a new 3-node cluster and kills
// every node but one that does not lead stream: it returns the cluster, the
// streams, a JetStream client connected to the survivor alone (so a publish
// is not also waiting for a reconnect) and the index of stream's leader,
// now killed.
func withoutQuorum(t *testing.T, stream string) (*testenv.Cluster, *events.Streams, jetstream.JetStream, int) {
	t.Helper()
	c := testenv.NewCluster(t)
	js := c.JetStream(t)

	// Setup is idempotent: retried while the freshly started (and busy)
	// cluster still settles its first leaders.
	var st *events.Streams
	testenv.Retry(t, time.Minute, func() (err error) {
		st, err = events.Setup(context.Background(), js, events.SetupConfig{Replicas: 3})
		return err
	}, "setting up the streams")
	leader := c.WaitStreamLeader(t, stream)
	survivor := (leader + 1) % testenv.ClusterSize
	nc, err := nats.Connect(c.NodeURL(survivor))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sjs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range testenv.ClusterSize {
		if i != survivor {
			c.Kill(i)
		}
	}
	return c, st, sjs, leader
}

// TestConcurrentPublishesOfOneResultOnAClusterLandOnce: two attempts of
// one event may publish the same result at once (a redelivery while the
// first attempt still runs). On an R3 events stream the server answers a
// publish whose message id is still being stored by another with
// "duplicate message id is in process"; PublishResult asks again until
// the first is stored, so every publish returns, exactly one stores the
// result and the others report a duplicate.
func TestConcurrentPublishesOfOneResultOnAClusterLandOnce(t *testing.T) {
	t.Parallel()
	c := testenv.NewCluster(t)
	js := c.JetStream(t)
	var st *events.Streams
	testenv.Retry(t, time.Minute, func() (err error) {
		st, err = events.Setup(context.Background(), js, events.SetupConfig{Replicas: 3})
		return err
	}, "setting up the streams")
	c.WaitStreamLeader(t, st.Subjects.EventsStream())
	var conns []jetstream.JetStream
	for i := range testenv.ClusterSize {
		nc, err := nats.Connect(c.NodeURL(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		njs, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, njs)
	}
	for round := range 20 {
		r := published(fmt.Sprintf("evt-race-%d", round), "archive", "weatherreporter.daily")
		const n = 12
		type answer struct {
			dup bool
			err error
		}
		answers := make(chan answer, n)
		start := make(chan struct{})
		for i := range n {
			go func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				dup, err := events.NewPublisher(conns[i%len(conns)], st.Subjects).PublishResult(ctx, r)
				answers <- answer{dup, err}
			}()
		}
		close(start)
		stored := 0
		for range n {
			a := <-answers
			if a.err != nil {
				t.Fatalf("round %d: %v", round, a.err)
			}
			if !a.dup {
				stored++
			}
		}
		if stored != 1 {
			t.Fatalf("round %d: %d publishes stored the result, want 1", round, stored)
		}
	}
}
