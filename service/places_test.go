package service_test

// Places in a root's line taken when events are delivered (Runner.Queue):
// this process then publishes into the root in delivery order, whichever
// publication starts first.

import (
	"context"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// placesRoot is one local root with a replacement destination "live"
// (pipeline p) and a second root with an additive destination "side"
// (pipeline q).
type placesRoot struct {
	h          *harness
	live, side config.Destination
	liveRoot   storage.Backend
}

func newPlacesRoot(t *testing.T) *placesRoot {
	t.Helper()
	h := newHarness(t)
	h.Service.LeaseWait = 30 * time.Second
	h.Service.HandOver = service.DefaultHandOver
	pr := &placesRoot{h: h}
	for _, r := range []struct {
		d    *config.Destination
		root *storage.Backend
		id   string
		wf   planner.Workflow
		pipe string
	}{{&pr.live, &pr.liveRoot, "live", planner.Replacement, "p"}, {&pr.side, nil, "side", planner.Additive, "q"}} {
		root, err := local.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if r.root != nil {
			*r.root = root
		}
		*r.d = h.AddDest(named(config.Destination{Backend: "local", Path: root.String()}, r.id, r.wf), root, r.pipe)
	}
	return pr
}

// publishAt publishes dir to dest at the places given.
func (pr *placesRoot) publishAt(pipe, dest, dir string, places *service.Places) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := pr.h.Publish(t2, pipe, dest, dir, func(r *service.Request) { r.Places = places })
		done <- err
	}()
	return done
}

// notYet fails if done reports within a while: the publication must be
// waiting for an earlier place.
func notYet(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s ran before the earlier place was used or given up (err %v)", what, err)
	case <-time.After(300 * time.Millisecond):
	}
}

func wantDone(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never ended", what)
	}
}

// TestPlacesKeepDeliveryOrder: v1 and v2 of one source are delivered in
// that order; v2's publication starts first, yet it waits for v1's, so
// both are published (v1 is not superseded by a v2 that overtook it) and
// the root ends up holding v2.
func TestPlacesKeepDeliveryOrder(t *testing.T) {
	pr := newPlacesRoot(t)
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	v2, _ := makeBundleAt(t, "weather", t0.Add(time.Hour), map[string]string{"report.md": "# v2\n"})
	r := pr.h.Service
	p1, p2 := r.Queue([]config.Destination{pr.live}), r.Queue([]config.Destination{pr.live})
	second := pr.publishAt("p", "live", v2, p2)
	notYet(t, second, "v2")
	if got := r.Queued(pr.live.RootKey()); got != 2 {
		t.Fatalf("%d places in the root's line, want 2", got)
	}
	wantDone(t, pr.publishAt("p", "live", v1, p1), "v1") // superseded would be an error
	wantDone(t, second, "v2")
	wantContents(t, pr.liveRoot, map[string]string{"report.md": "# v2\n"})
	if got := r.Queued(pr.live.RootKey()); got != 0 {
		t.Fatalf("%d places left in the root's line, want 0", got)
	}
}

// TestUnusedPlacesPassTheTurnOn: a place given up without a publication
// (Release) lets the next one run; Keep gives up only the places of the
// destinations not kept, so the other root's line moves on while the
// kept place still holds its own.
func TestUnusedPlacesPassTheTurnOn(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
	ctx := context.Background()
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	side, _ := makeBundleAt(t, "tides", t0, map[string]string{"tides.md": "# tides\n"})

	first := r.Queue([]config.Destination{pr.live, pr.side})
	onLive := pr.publishAt("p", "live", v1, r.Queue([]config.Destination{pr.live}))
	onSide := pr.publishAt("q", "side", side, r.Queue([]config.Destination{pr.side}))
	notYet(t, onSide, "the side publication")
	first.Keep(ctx, []config.Destination{pr.live})
	wantDone(t, onSide, "the side publication")
	notYet(t, onLive, "the live publication")
	first.Release(ctx)
	wantDone(t, onLive, "the live publication")
	for _, d := range []config.Destination{pr.live, pr.side} {
		if got := r.Queued(d.RootKey()); got != 0 {
			t.Fatalf("%s: %d places left in the root's line, want 0", d.ID, got)
		}
	}
	first.Release(ctx) // twice: nothing left to give up
}

// TestAPlaceGivenUpPastLeaseWaitLeavesTheLine: a publication whose
// earlier place is never used waits LeaseWait, then leaves the line and
// asks for the lease anyway (it is free), as a publication does behind a
// holder that takes too long.
func TestAPlaceGivenUpPastLeaseWaitLeavesTheLine(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
	r.LeaseWait = 200 * time.Millisecond
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	stuck := r.Queue([]config.Destination{pr.live})
	start := time.Now()
	wantDone(t, pr.publishAt("p", "live", v1, r.Queue([]config.Destination{pr.live})), "v1")
	if took := time.Since(start); took < r.LeaseWait {
		t.Fatalf("the publication ran after %v, before LeaseWait (%v) passed", took, r.LeaseWait)
	}
	wantContents(t, pr.liveRoot, map[string]string{"report.md": "# v1\n"})
	if got := r.Queued(pr.live.RootKey()); got != 1 {
		t.Fatalf("%d places in the root's line, want 1 (the unused one)", got)
	}
	stuck.Release(context.Background())
	if got := r.Queued(pr.live.RootKey()); got != 0 {
		t.Fatalf("%d places in the root's line, want 0", got)
	}
}

// TestALineThatMovesIsWaitedForPastLeaseWait: eight places ahead of a
// publication leave the line one every 100 ms, 800 ms in all, with a
// LeaseWait of 600 ms: the publication keeps its place while the line
// moves, and runs only after the last place ahead left it, never out of
// turn.
func TestALineThatMovesIsWaitedForPastLeaseWait(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
	r.LeaseWait = 600 * time.Millisecond
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	var ahead []*service.Places
	for range 8 {
		ahead = append(ahead, r.Queue([]config.Destination{pr.live}))
	}
	done := pr.publishAt("p", "live", v1, r.Queue([]config.Destination{pr.live}))
	for _, p := range ahead {
		select {
		case err := <-done:
			t.Fatalf("the publication ran with %d places still ahead of it (err %v)", r.Queued(pr.live.RootKey()), err)
		case <-time.After(100 * time.Millisecond):
		}
		p.Release(context.Background())
	}
	wantDone(t, done, "v1")
	wantContents(t, pr.liveRoot, map[string]string{"report.md": "# v1\n"})
}
