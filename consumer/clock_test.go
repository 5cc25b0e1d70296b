package consumer_test

import (
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
