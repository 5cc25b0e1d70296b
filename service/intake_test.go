package service_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/stores"
	"github.com/distributor/distributor/testenv"
)

// intake is a ledger on a fresh JetStream, over a service whose one
// destination is an empty local folder.
type intake struct {
	ctx      context.Context
	root     string
	stores   *bundleCounter
	js       jetstream.JetStream
	subjects events.Subjects
	ledger   *service.Ledger
}

func newIntake(t *testing.T) *intake {
	t.Helper()
	ctx := context.Background()
	js := testenv.NewNATS(t).JetStream(t)
	st, err := events.Setup(ctx, js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cfg, err := config.Parse([]byte("pipelines:\n  - id: weather.daily\n    destinations: [site]\ndestinations:\n  - id: site\n    backend: local\n    path: "+
		root+"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	bc := &bundleCounter{Opener: stores.New(cfg)}
	svc := &service.Service{Engine: &engine.Engine{Version: "test"}, Config: cfg, Stores: bc}
	return &intake{ctx: ctx, root: root, stores: bc, js: js, subjects: st.Subjects, ledger: service.NewLedger(svc, js, st.Subjects, zerolog.Nop())}
}

// bundleCounter counts the bundles opened: a publication opens its
// bundle.
type bundleCounter struct {
	*stores.Opener
	opened atomic.Int32
}

func (b *bundleCounter) Bundle(ctx context.Context, location string) (storage.Backend, error) {
	b.opened.Add(1)
	return b.Opener.Bundle(ctx, location)
}

// results returns every result event stored, "type reason pipeline destination id-or-event".
func (in *intake) results(t *testing.T) []string {
	t.Helper()
	oc, err := in.js.OrderedConsumer(in.ctx, in.subjects.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		batch, err := oc.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			r, err := events.DecodeResult(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			id := r.BundleEventID
			if id == "" {
				id = r.ID
			}
			out = append(out, strings.Join([]string{r.Type, r.Reason, r.PipelineID, r.DestinationID, id}, " "))
		}
		if n == 0 {
			return out
		}
	}
}

// Handle decides what becomes of a delivered message in one call: a
// message refused as a whole gets one failed result and Term, an unknown
// pipeline one failed result and Ack, and a redelivery whose destinations
// were all reported runs nothing and is acked.
func TestHandleAnswersWhatToAcknowledge(t *testing.T) {
	t.Parallel()
	in := newIntake(t)
	encode := func(ev events.BundleReady) []byte {
		ev.SchemaVersion, ev.Type = events.SchemaVersion, events.TypeBundleReady
		if ev.Bundle == "" {
			ev.Bundle, ev.ManifestDigest = "/bundles/b1", "sha256:"+strings.Repeat("0", 64)
		}
		data, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	ref := &events.MsgRef{Stream: "DISTRIBUTOR_BUNDLES", Seq: 7}
	for _, tc := range []struct {
		name     string
		data     []byte
		subject  string
		verdict  service.Verdict
		why      string
		reported string // the report's "destination type reason"
		result   string
	}{
		{"undecodable", []byte("x"), in.subjects.BundleReady("weather.daily"), service.Term, "invalid event",
			" failed invalid_event", "failed invalid_event   invalid.DISTRIBUTOR_BUNDLES.7"},
		{"other pipeline", encode(events.BundleReady{ID: "e-other", PipelineID: "weather.daily"}), in.subjects.BundleReady("ocean.daily"), service.Term,
			"pipeline_id is not the subject's pipeline", " failed invalid_event", "failed invalid_event ocean.daily  e-other"},
		{"operator flags", encode(events.BundleReady{ID: "e-flags", PipelineID: "weather.daily", TakeOwnership: true}), in.subjects.BundleReady("weather.daily"),
			service.Term, "operator flags on a producer subject", " failed invalid_event", "failed invalid_event weather.daily  e-flags"},
		{"unknown pipeline", encode(events.BundleReady{ID: "e-unknown", PipelineID: "ocean.daily"}), in.subjects.BundleReady("ocean.daily"), service.Ack,
			"", " failed unknown_pipeline", "failed unknown_pipeline ocean.daily  e-unknown"},
	} {
		before := in.results(t)
		a := in.ledger.Handle(in.ctx, in.ledger.Arrive(tc.data, nil), service.Message{Subject: tc.subject, Attempt: 1, Ref: ref, RetryDelay: time.Second})
		var reports []string
		for _, r := range a.Reports {
			reports = append(reports, strings.Join([]string{r.Destination, r.Type, r.Reason}, " "))
		}
		if a.Verdict != tc.verdict || a.Why != tc.why || !slices.Equal(reports, []string{tc.reported}) {
			t.Errorf("%s: verdict %d %q, reports %q; want %d %q, [%q]", tc.name, a.Verdict, a.Why, reports, tc.verdict, tc.why, tc.reported)
		}
		if got := in.results(t)[len(before):]; !slices.Equal(got, []string{tc.result}) {
			t.Errorf("%s: results %q, want [%q]", tc.name, got, tc.result)
		}
	}

	// A redelivery of an event whose one destination is reported: nothing
	// runs (no bundle is opened, the root stays empty), nothing more is
	// reported.
	ev := events.BundleReady{ID: "e-done", PipelineID: "weather.daily"}
	if _, err := in.ledger.Publish(in.ctx, events.Result{Type: events.TypePublished, BundleEventID: ev.ID, PipelineID: ev.PipelineID, DestinationID: "site",
		Bundle: "/bundles/b1", Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	before := in.results(t)
	a := in.ledger.Handle(in.ctx, in.ledger.Arrive(encode(ev), nil), service.Message{Subject: in.subjects.BundleReady("weather.daily"), Attempt: 2,
		StoredAt: time.Now(), Ref: ref, RetryDelay: time.Second})
	if a.Verdict != service.Ack || len(a.Reports) != 0 {
		t.Errorf("redelivery of a reported event: verdict %d, reports %+v; want Ack and none", a.Verdict, a.Reports)
	}
	if got := in.results(t); len(got) != len(before) {
		t.Errorf("redelivery of a reported event reported %q", got[len(before):])
	}
	if n := in.stores.opened.Load(); n != 0 {
		t.Errorf("a redelivery of a reported event opened its bundle %d time(s); want none", n)
	}
	if left, err := os.ReadDir(in.root); err != nil || len(left) != 0 {
		t.Errorf("the root after a redelivery of a reported event: %v, %v; want it empty", left, err)
	}
}
