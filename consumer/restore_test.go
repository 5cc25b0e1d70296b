package consumer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
)

const oneRootYAML = `
pipelines:
  - id: weather.daily
    destinations: [archive]
destinations:
  - id: archive
    backend: local
    path: @archive@
    workflow: replacement
`

// TestRunRecreatesADeletedDurable: three consumers share the durable; it
// is deleted under them. They recreate it (at once, without conflict)
// and the next event is published exactly once.
func TestRunRecreatesADeletedDurable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, oneRootYAML, false)
	for i := range 3 {
		e.start(nodeConfig{name: fmt.Sprintf("serve-%d", i), opts: fastOptions()})
	}
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	e.wait(id, 1, 10*time.Second)

	s := e.streams.Subjects
	if err := e.js.DeleteConsumer(e.ctx, s.BundlesStream(), s.Durable()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.waitFor(30*time.Second, func() bool { _, err := e.durableInfo(); return err == nil }, "the durable to be recreated")
	t.Logf("durable back after %s", time.Since(start).Round(time.Millisecond))
	loc, digest = e.bundle("weather.tomorrow", v2)
	id = e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	if rs := e.wait(id, 1, 30*time.Second); rs[0].Type != events.TypePublished {
		t.Fatalf("after the durable was recreated: %s %s: %s", rs[0].Type, rs[0].Reason, rs[0].Message)
	}
	e.quiet(10 * time.Second)
	if n := len(e.results.of(id)); n != 1 {
		t.Errorf("%d results of the event after the recreation, want 1", n)
	}
}

// TestRunRecreatesWhatAnEmptyStoreLacks: the durable, both streams and
// the lease bucket are gone, as after a NATS restart without its store.
// Three consumers with serve's set-up recreate all of them at once, and
// the next event announced is published exactly once.
func TestRunRecreatesWhatAnEmptyStoreLacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, oneRootYAML, false)
	setup := events.SetupConfig{Storage: jetstream.MemoryStorage}
	for i := range 3 {
		opts := fastOptions()
		opts.SetUp = func(ctx context.Context) error { _, err := events.Setup(ctx, e.js, setup); return err }
		e.start(nodeConfig{name: fmt.Sprintf("serve-%d", i), opts: opts})
	}
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	e.wait(id, 1, 10*time.Second)

	s := e.streams.Subjects
	for _, name := range []string{s.BundlesStream(), s.EventsStream(), "KV_" + s.LeaseBucket()} {
		if err := e.js.DeleteStream(e.ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	e.waitFor(30*time.Second, func() bool { _, err := e.durableInfo(); return err == nil }, "the durable to be recreated")
	t.Logf("durable back after %s", time.Since(start).Round(time.Millisecond))
	for _, check := range []func() error{
		func() error { _, err := e.js.Stream(e.ctx, s.EventsStream()); return err },
		func() error { _, err := e.js.KeyValue(e.ctx, s.LeaseBucket()); return err },
	} {
		e.waitFor(10*time.Second, func() bool { return check() == nil }, "the events stream and the lease bucket")
	}

	loc, digest = e.bundle("weather.tomorrow", v2)
	id = e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	var results []events.Result
	e.waitFor(30*time.Second, func() bool { results = resultsByGet(t, e); return len(results) > 0 }, "a result of the event announced after the recreation")
	e.settled(10 * time.Second)
	results = resultsByGet(t, e)
	if len(results) != 1 || results[0].BundleEventID != id || results[0].Type != events.TypePublished {
		t.Fatalf("results after the recreation: %+v, want one published of %s", results, id)
	}
}

// resultsByGet reads every result event the events stream holds, one
// request per message (none while the stream does not exist).
func resultsByGet(t *testing.T, e *env) []events.Result {
	t.Helper()
	st, err := e.js.Stream(e.ctx, e.streams.Subjects.EventsStream())
	if err != nil {
		return nil
	}
	var out []events.Result
	for seq := st.CachedInfo().State.FirstSeq; seq > 0 && seq <= st.CachedInfo().State.LastSeq; seq++ {
		msg, err := st.GetMsg(e.ctx, seq)
		if err != nil {
			t.Fatalf("result event %d: %v", seq, err)
		}
		r, err := events.DecodeResult(msg.Data)
		if err != nil {
			t.Fatalf("undecodable result event %s: %v", msg.Subject, err)
		}
		out = append(out, r)
	}
	return out
}
