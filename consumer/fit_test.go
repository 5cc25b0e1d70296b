package consumer_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// publishBundleReady puts ev on the producer subject the way any NATS
// client could, past the producer API's own checks, and returns its
// stream sequence.
func (e *env) publishBundleReady(ev events.BundleReady) uint64 {
	e.t.Helper()
	ev.SchemaVersion, ev.Type = events.SchemaVersion, events.TypeBundleReady
	data, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	ack, err := e.js.Publish(e.ctx, e.streams.Subjects.BundleReady("weather.daily"), data, jetstream.WithMsgID(ev.ID))
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

// Rule: a bundle-ready event over a decode-time limit (a 600 KB bundle
// path, 60,000 destinations, an event just under NATS' max_payload, ...)
// gets exactly one failed/invalid_event result naming the limit at its
// first delivery and is terminated: nothing stays pending.
func TestOversizedEventFailsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	dests := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("d%05d", i)
		}
		return out
	}
	digest := digestOf("x")
	// Headers (the message id) count towards max_payload too.
	underPayload := int(e.nats.Conn(t).MaxPayload()) - 1024
	cases := []struct {
		name string
		ev   events.BundleReady
		want string
	}{
		{"600 KB bundle path", events.BundleReady{Bundle: "/" + strings.Repeat("b", 600<<10)}, "bytes, over the limit of 65536"},
		{"event just under max_payload", events.BundleReady{Bundle: "/" + strings.Repeat("b", underPayload-200)}, "bytes, over the limit of 65536"},
		{"60,000 destinations", events.BundleReady{Bundle: "/b", Destinations: dests(60000)}, "bytes, over the limit of 65536"},
		{"300 destinations", events.BundleReady{Bundle: "/b", Destinations: dests(300)}, "300 destinations, over the limit of 256"},
		{"5,000-byte bundle path", events.BundleReady{Bundle: "/" + strings.Repeat("b", 4999)}, "is 5000 bytes, over the limit of 4096"},
	}
	ids := map[string]string{} // invalid result id -> case
	for i, c := range cases {
		c.ev.ID, c.ev.PipelineID, c.ev.ManifestDigest = fmt.Sprintf("big%d", i), "weather.daily", digest
		seq := e.publishBundleReady(c.ev)
		ids[fmt.Sprintf("invalid.%s.%d", e.streams.Subjects.BundlesStream(), seq)] = c.name
	}
	e.waitFor(30*time.Second, func() bool { return len(e.results.all()) >= len(cases) }, "%d results", len(cases))
	info := e.settled(10 * time.Second)
	got := map[string]int{}
	for _, r := range e.results.all() {
		name, ok := ids[r.ID]
		if !ok {
			t.Errorf("unexpected result %s %s: %s", r.Type, r.ID, r.Message)
			continue
		}
		got[name]++
		var want string
		for _, c := range cases {
			if c.name == name {
				want = c.want
			}
		}
		if r.Type != events.TypeFailed || r.Reason != events.ReasonInvalidEvent || r.Attempts != 1 || !strings.Contains(r.Message, want) || len(r.Message) > 1000 {
			t.Errorf("%s: got %s reason %q attempts %d message %q, want failed invalid_event at attempt 1 naming %q", name, r.Type, r.Reason, r.Attempts, r.Message, want)
		}
	}
	for _, c := range cases {
		if got[c.name] != 1 {
			t.Errorf("%s: %d results, want exactly 1", c.name, got[c.name])
		}
	}
	if info.NumAckPending != 0 || info.NumPending != 0 || info.NumRedelivered != 0 || info.Delivered.Consumer != uint64(len(cases)) {
		t.Errorf("consumer: %d ack pending, %d pending, %d redelivered, %d delivered; want 0, 0, 0, %d",
			info.NumAckPending, info.NumPending, info.NumRedelivered, info.Delivered.Consumer, len(cases))
	}
	e.checkNoBadEvents()
}

// Rule: a failed result that would exceed the result size limit is still
// published, with a reference to the stored bundle-ready message instead of
// the embedded original, at the first delivery.
func TestOversizedResultCarriesReference(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	opts := fastOptions()
	opts.MaxResultBytes = 4096
	e.start(nodeConfig{opts: opts})
	// A missing bundle whose path is long (but within the limits): the
	// failure would embed it twice (original and message).
	gone := filepath.Join(e.base, "gone", strings.Repeat("abcdefghi/", 300))
	ev := events.BundleReady{ID: "long-path", PipelineID: "weather.daily", Bundle: gone, ManifestDigest: digestOf("x"), Destinations: []string{"archive"}}
	seq := e.publishBundleReady(ev)
	res := e.wait(ev.ID, 1, 20*time.Second)
	info := e.settled(5 * time.Second)
	r := res[0]
	want := events.MsgRef{Stream: e.streams.Subjects.BundlesStream(), Seq: seq}
	if len(res) != 1 || r.Type != events.TypeFailed || r.Reason != events.ReasonBundleMissing || r.Attempts != 1 ||
		r.Original != nil || r.OriginalRef == nil || *r.OriginalRef != want || !strings.Contains(r.Message, gone) {
		t.Fatalf("got %d result(s): %s reason %q attempts %d original %v ref %+v message %q; want one failed bundle_missing with reference %+v, without the original, naming the path",
			len(res), r.Type, r.Reason, r.Attempts, r.Original != nil, r.OriginalRef, r.Message, want)
	}
	data, _ := r.Encode()
	if len(data) > opts.MaxResultBytes {
		t.Errorf("result is %d bytes, limit %d", len(data), opts.MaxResultBytes)
	}
	if info.NumRedelivered != 0 || info.Delivered.Consumer != 1 {
		t.Errorf("consumer: %d redelivered, %d delivered; want 0 and 1", info.NumRedelivered, info.Delivered.Consumer)
	}
	e.checkNoBadEvents()
}

// Rule: a result that can never be published (here a published result
// whose longest allowed source id makes it exceed the size limit, or NATS'
// max_payload) is
// not retried: a minimal failed/internal result with the reference to the
// bundle-ready message takes its place and the message is terminated at
// its first delivery.
func TestUnpublishableResultBecomesFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		maxResult  int
		maxPayload int32
		want       string
	}{
		{"over the result size limit", 700, 0, "result event too large"},
		// Cut to the server's max_payload less room for headers.
		{"over max_payload", 4 << 20, 1536, "exceeds 512 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := testenv.NewNATS(t)
			if c.maxPayload > 0 {
				n = testenv.NewNATSWithMaxPayload(t, c.maxPayload)
			}
			e := newEnvOn(t, n, weatherYAML, false)
			opts := fastOptions()
			opts.MaxResultBytes = c.maxResult
			e.start(nodeConfig{opts: opts})
			loc, digest := e.bundle(strings.Repeat("s", bundle.MaxIDBytes), v1)
			ev := events.BundleReady{ID: "long-source", PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest, Destinations: []string{"archive"}}
			seq := e.publishBundleReady(ev)
			res := e.wait(ev.ID, 1, 20*time.Second)
			info := e.settled(5 * time.Second)
			r := res[0]
			want := events.MsgRef{Stream: e.streams.Subjects.BundlesStream(), Seq: seq}
			if len(res) != 1 || r.Type != events.TypeFailed || r.Reason != events.ReasonInternal || r.Attempts != 1 || r.DestinationID != "archive" ||
				r.OriginalRef == nil || *r.OriginalRef != want || !strings.HasPrefix(r.Message, "could not publish the published result event: ") || !strings.Contains(r.Message, c.want) {
				t.Fatalf("got %d result(s): %s %s reason %q attempts %d ref %+v message %.300q; want one failed internal result with reference %+v naming %q",
					len(res), r.Type, r.DestinationID, r.Reason, r.Attempts, r.OriginalRef, r.Message, want, c.want)
			}
			if info.NumRedelivered != 0 || info.Delivered.Consumer != 1 {
				t.Errorf("consumer: %d redelivered, %d delivered; want 0 and 1 (a permanent failure is not retried)", info.NumRedelivered, info.Delivered.Consumer)
			}
			// The publication itself happened.
			if cat := readCatalog(t, localRoot(t, e.roots["archive"])); len(cat.Outputs) != 2 {
				t.Errorf("archive catalog has %d outputs, want 2", len(cat.Outputs))
			}
			e.checkNoBadEvents()
		})
	}
}

// Rule: when no result can be published at all (here the events stream is
// gone), the last delivery still ends the message: it is terminated, not
// left unacknowledged.
func TestNoResultStreamLastDeliveryTerminates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	opts := fastOptions()
	opts.MaxDeliver = 3
	e.start(nodeConfig{opts: opts})
	if err := e.js.DeleteStream(e.ctx, e.streams.Subjects.EventsStream()); err != nil {
		t.Fatal(err)
	}
	loc, digest := e.bundle("weather.tomorrow", v1)
	e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest, Destinations: []string{"archive"}})
	info := e.settled(20 * time.Second)
	if info.Delivered.Consumer != 3 || info.NumRedelivered != 0 {
		t.Errorf("consumer: delivered %d, redelivered %d; want 3 deliveries and none outstanding", info.Delivered.Consumer, info.NumRedelivered)
	}
}

// Rule: result events fit the server they go to. On a server whose
// max_payload is 64 KiB, a 2,000-file bundle publishes, and its result
// (about 300 KB with every output) is published with its outputs cut to
// fit, never reported failed because of its size.
func TestResultFitsTheServersMaxPayload(t *testing.T) {
	t.Parallel()
	const maxPayload = 64 << 10
	e := newEnvOn(t, testenv.NewNATSWithMaxPayload(t, maxPayload), archiveYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	files := map[string]string{}
	for i := range 2000 {
		files[fmt.Sprintf("data/part-%04d.csv", i)] = fmt.Sprintf("%d\n", i)
	}
	loc, digest := e.bundle("weather.tomorrow", files)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	res := e.wait(id, 1, 60*time.Second)
	e.settled(10 * time.Second)
	r := res[0]
	data, _ := r.Encode()
	if len(res) != 1 || r.Type != events.TypePublished || r.Written != len(files) || !r.OutputsTruncated || len(r.Outputs) == 0 || len(data) > maxPayload {
		t.Fatalf("got %d result(s): %s %s written %d, %d outputs (truncated %v), %d bytes; want one published result of %d outputs within %d bytes",
			len(res), r.Type, r.Reason, r.Written, len(r.Outputs), r.OutputsTruncated, len(data), len(files), maxPayload)
	}
}
