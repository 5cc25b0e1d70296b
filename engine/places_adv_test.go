package engine_test

// Places whose events do not come (yet): they must not keep a root's
// lease, nor hold the root's line once their destination is over.

import (
	"context"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
)

// TestALeaseIsNotLeftForAPlaceWhoseEventHasNotArrived: v1's publication
// ends while the next place in the root's line belongs to an event that
// has not reached its publication (it is still opening its bundle, or
// waits for a worker). The lease is released, not left idle (and renewed)
// for that event: another process may take the root at once.
func TestALeaseIsNotLeftForAPlaceWhoseEventHasNotArrived(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.runner
	ctx := context.Background()
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	p1, opening := r.Queue([]config.Destination{pr.live}), r.Queue([]config.Destination{pr.live})
	defer opening.Release(ctx)
	wantDone(t, pr.publishAt("p", "live", v1, p1), "v1")
	other := lease.NewStorageLocker("other-process", time.Minute)
	l, err := other.Acquire(ctx, lease.Root{Key: pr.live.RootKey(), Store: pr.liveRoot})
	if err != nil {
		t.Fatalf("the root's lease is still held for an event that has not arrived: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAPublicationThatFailsBeforeItsTurnGivesUpItsPlace: an event's
// publication into one root fails before it asks for the turn (its
// outputs cannot be built), while the event's other destination still
// runs: the failed one's place is given up at once, so the next event for
// that root does not wait for the whole event (up to LeaseWait).
func TestAPublicationThatFailsBeforeItsTurnGivesUpItsPlace(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.runner
	ctx := context.Background()
	first := r.Queue([]config.Destination{pr.live, pr.side})
	defer first.Release(ctx) // the side destination: still running
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	next := pr.publishAt("p", "live", v1, r.Queue([]config.Destination{pr.live}))
	req := engine.Request{PipelineID: "p", Bundle: v1, BundleEventID: "ev-bad", Places: first}
	b, err := r.OpenBundle(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	bad := pr.live // a transform it does not know: its outputs cannot be built
	bad.Publish.HTML, bad.Transforms = true, []config.Transform{{Name: "nope"}}
	if _, err := r.Publish(ctx, req, b, bad); err == nil {
		t.Fatal("a publication with an unknown transform succeeded; the test needs one that fails")
	}
	select {
	case err := <-next:
		if err != nil {
			t.Fatalf("the next event's publication: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the next event's publication still waits after 10 s (LeaseWait %v) for a place whose publication failed", r.LeaseWait)
	}
}
