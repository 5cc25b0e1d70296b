package consumer_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/stores"
)

// Rule: a published result that could not be delivered is kept in the
// root; when no next attempt of its event comes (NATS lost the event),
// serve's sweep delivers it once it is older than KeptResultAge and
// forgets it. A younger one is left to the next attempt.
func TestRuleKeptResultWithoutAnAttemptIsDelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
pipelines:
  - id: weather.daily
    destinations: [disk]
destinations:
  - id: disk
    backend: local
    path: @disk@
`, false)
	d, _ := e.cfg.Destination("disk")
	root := localRoot(t, e.roots["disk"])
	svc := &service.Service{Engine: &engine.Engine{Version: "test"}, Config: e.cfg, Stores: &testStores{open: stores.New(e.cfg)}}
	kept := func() []engine.KeptResult {
		t.Helper()
		k, err := svc.Engine.KeptResults(e.ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}

	// An attempt finished while NATS was away: its result is kept.
	ev := events.BundleReady{ID: events.NewEventID(), PipelineID: "weather.daily", Bundle: "/bundles/b1", ManifestDigest: "sha256:" + zeros}
	done := service.Done{Destination: d, Result: engine.Result{Root: root.String()}}
	nc := e.nats.Conn(t)
	away, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	offline := service.NewLedger(svc, away, e.streams.Subjects, zerolog.Nop())
	r := offline.ResultFor(done, service.Delivery{Event: ev, Attempt: 1})
	if st := offline.Deliver(e.ctx, done, r, false, nil); st != service.Retry {
		t.Fatalf("Deliver without NATS: status %d, want Retry", st)
	}
	if k := kept(); len(k) != 1 || k[0].EventID != ev.ID || k[0].Owner.DestinationID != "disk" {
		t.Fatalf("kept results %+v, want the one of %s", k, ev.ID)
	}

	// Younger than the age: left for the next attempt.
	live := service.NewLedger(svc, e.js, e.streams.Subjects, zerolog.Nop())
	if n, err := live.DeliverKept(e.ctx, []config.Destination{d}, time.Hour, func(string) bool { return false }); n != 0 || err != nil || len(kept()) != 1 {
		t.Fatalf("DeliverKept of a young result: %d delivered, %v; %d kept, want 0 and 1", n, err, len(kept()))
	}

	// NATS lost the event: no attempt comes, serve's sweep delivers it.
	opts := fastOptions()
	opts.KeptSweepEvery, opts.KeptResultAge = 50*time.Millisecond, time.Millisecond
	e.start(nodeConfig{opts: opts})
	got := e.wait(ev.ID, 1, 30*time.Second)
	if len(got) != 1 || got[0].Type != events.TypePublished || got[0].DestinationID != "disk" || got[0].PipelineID != "weather.daily" {
		t.Fatalf("results of %s: %+v, want one published to disk", ev.ID, got)
	}
	e.waitFor(10*time.Second, func() bool { return len(kept()) == 0 }, "the delivered result to be forgotten")
}

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"
