package consumer_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// Rule: a bundle whose created time lies more than max_clock_skew past the
// clock gets one failed/invalid_bundle result per destination on the first
// delivery, naming the time and the limit, and writes nothing, on a local
// and an S3 root; a correctly stamped bundle publishes after it as usual.
func TestRuleBundleFromTheFuture(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
pipelines:
  - id: weather.daily
    destinations: [disk, bucket]
destinations:
  - id: disk
    backend: local
    path: @disk@
  - id: bucket
    backend: s3
    bucket: @bucket@
    path: weather/
    region: us-east-1
`, true)
	e.start(nodeConfig{opts: fastOptions()})
	d, _ := e.cfg.Destination("bucket")
	bucket, err := (&testStores{s3: e.s3}).Destination(e.ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	disk := localRoot(t, e.roots["disk"])
	roots := map[string]func() map[string]string{
		"disk":   func() map[string]string { return files(t, disk) },
		"bucket": func() map[string]string { return files(t, bucket) },
	}

	// A first version, so that the roots hold a catalog (and take the
	// lock object) when the bundle from the future comes.
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	for _, r := range e.wait(id, 2, 30*time.Second) {
		if r.Type != events.TypePublished {
			t.Fatalf("v1 to %s: %s/%s %s", r.DestinationID, r.Type, r.Reason, r.Message)
		}
	}
	before := map[string]map[string]string{"disk": roots["disk"](), "bucket": roots["bucket"]()}

	future := filepath.Join(e.base, "bundles", "future")
	futureDigest := testenv.WriteBundle(t, future, "weather.tomorrow", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), v2)
	id = e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: future, ManifestDigest: futureDigest})
	res := e.wait(id, 2, 30*time.Second)
	for _, r := range res {
		if r.Type != events.TypeFailed || r.Reason != events.ReasonInvalidBundle || r.Attempts != 1 || r.Original == nil ||
			!strings.Contains(r.Message, "created 2099-01-01T00:00:00Z") || !strings.Contains(r.Message, "max_clock_skew (5m0s)") {
			t.Errorf("%s: %s/%s after %d attempt(s): %q, want failed/%s naming the time and the limit on the first delivery",
				r.DestinationID, r.Type, r.Reason, r.Attempts, r.Message, events.ReasonInvalidBundle)
		}
	}
	if info := e.settled(10 * time.Second); info.NumRedelivered != 0 {
		t.Errorf("%d redeliveries, want none: invalid_bundle is final", info.NumRedelivered)
	}
	for id, list := range roots {
		if got := list(); !maps.Equal(got, before[id]) {
			t.Errorf("%s changed after the bundle from the future:\nnow    %v\nbefore %v", id, got, before[id])
		}
	}

	// A correctly stamped version publishes as usual.
	loc, digest = e.bundle("weather.tomorrow", v2)
	id = e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	for _, r := range e.wait(id, 2, 30*time.Second) {
		if r.Type != events.TypePublished || r.Written == 0 {
			t.Errorf("v2 to %s: %s/%s written %d: %s", r.DestinationID, r.Type, r.Reason, r.Written, r.Message)
		}
	}
	e.checkNoBadEvents()
}

// Rule: serve hosts whose clocks disagree answer a bundle's created time
// alike: it is judged against the time NATS stored the bundle-ready event,
// not against the clock of the host that happens to take it. A host an
// hour behind and one an hour ahead both refuse a bundle created 30
// minutes from now and both publish one created a minute from now.
func TestRuleClockSkewJudgedAgainstTheStoredEvent(t *testing.T) {
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
	hosts := []nodeConfig{
		{name: "behind", opts: fastOptions(), now: func() time.Time { return time.Now().Add(-time.Hour) }},
		{name: "ahead", opts: fastOptions(), now: func() time.Time { return time.Now().Add(time.Hour) }},
	}
	for i, c := range []struct {
		created time.Time
		want    string
	}{
		{time.Now().Add(30 * time.Minute), events.TypeFailed},
		{time.Now().Add(time.Minute), events.TypePublished},
	} {
		for _, h := range hosts {
			n := e.start(h)
			loc := filepath.Join(e.base, "bundles", fmt.Sprintf("b%d-%s", i, h.name))
			digest := testenv.WriteBundle(t, loc, fmt.Sprintf("src%d.%s", i, h.name), c.created, v1)
			id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
			r := e.wait(id, 1, 30*time.Second)[0]
			if r.Type != c.want || c.want == events.TypeFailed && r.Reason != events.ReasonInvalidBundle {
				t.Errorf("bundle created %s from now, on the host %s: %s/%s %q, want %s",
					time.Until(c.created).Round(time.Minute), h.name, r.Type, r.Reason, r.Message, c.want)
			}
			if c.want == events.TypeFailed && !strings.Contains(r.Message, "the time NATS stored its bundle-ready event") {
				t.Errorf("host %s: %q does not say what the time was judged against", h.name, r.Message)
			}
			if err := n.stop(t, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
}
