package service_test

// Places whose events do not come (yet): they must not keep a root's
// lease, nor hold the root's line once their destination is over.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// TestALeaseIsNotLeftForAPlaceWhoseEventHasNotArrived: v1's publication
// ends while the next place in the root's line belongs to an event that
// has not reached its publication (it is still opening its bundle, or
// waits for a worker). The lease is released, not left idle (and renewed)
// for that event: another process may take the root at once.
func TestALeaseIsNotLeftForAPlaceWhoseEventHasNotArrived(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
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
	r := pr.h.Service
	ctx := context.Background()
	first := r.Queue([]config.Destination{pr.live, pr.side})
	defer first.Release(ctx) // the side destination: still running
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	next := pr.publishAt("p", "live", v1, r.Queue([]config.Destination{pr.live}))
	req := service.Request{PipelineID: "p", Bundle: v1, BundleEventID: "ev-bad", Places: first}
	b, err := r.OpenBundle(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	bad := pr.live // a transform it does not know: its outputs cannot be built
	bad.Publish.HTML, bad.Transforms = true, []config.Transform{{Name: "nope"}}
	if _, err := r.PublishTo(ctx, req, b, bad); err == nil {
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

// TestPastLeaseWaitTheLeaseStillExcludes: a publication that waits past
// LeaseWait behind a holder of this process leaves the line and asks for
// the lease anyway; the lease, still held, refuses it: two publications
// of one process never run in one root at once.
func TestPastLeaseWaitTheLeaseStillExcludes(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
	r.LeaseWait = 200 * time.Millisecond
	logs := captureLog(r)
	ctx := context.Background()
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- r.WithLease(ctx, pr.live, func(storage.Backend, lease.Lease) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	err := <-pr.publishAt("p", "live", v1, r.Queue([]config.Destination{pr.live}))
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("publication past LeaseWait behind a holder: err %v, want lease.ErrHeld", err)
	}
	wantContents(t, pr.liveRoot, map[string]string{})
	wantLineWaitLog(t, logs, 1, 0)
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if got := r.Queued(pr.live.RootKey()); got != 0 {
		t.Fatalf("%d places left in the root's line, want 0", got)
	}
}

// TestAWaitBehindAnEventOnItsWaySaysSo: the event ahead in the root's
// line never reaches its publication (its bundle store hangs): the next
// publication waits LeaseWait, no more, then publishes, and its log says
// what held the line up: one event on its way, none publishing.
func TestAWaitBehindAnEventOnItsWaySaysSo(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
	r.LeaseWait = 200 * time.Millisecond
	logs := captureLog(r)
	hung := r.Queue([]config.Destination{pr.live})
	defer hung.Release(context.Background())
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	start := time.Now()
	wantDone(t, pr.publishAt("p", "live", v1, r.Queue([]config.Destination{pr.live})), "v1")
	if took := time.Since(start); took < r.LeaseWait || took > r.LeaseWait+5*time.Second {
		t.Fatalf("published after %v, want LeaseWait (%v) and the publication's own time", took, r.LeaseWait)
	}
	wantLineWaitLog(t, logs, 0, 1)
}

// logLines splits what the log sink holds into its lines.
func logLines(l *testenv.SyncBuffer) []string {
	return strings.Split(strings.TrimSpace(l.String()), "\n")
}

func captureLog(r *service.Service) *testenv.SyncBuffer {
	buf := &testenv.SyncBuffer{}
	r.Engine.Log = zerolog.New(buf)
	return buf
}

// wantLineWaitLog: exactly one warning that a wait in the root's line
// ran out, with who was ahead.
func wantLineWaitLog(t *testing.T, logs *testenv.SyncBuffer, publishing, onTheWay int) {
	t.Helper()
	var found []map[string]any
	for _, l := range logLines(logs) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "waited the lease wait for the root's turn; asking for the lease anyway" {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d warnings of a wait in the line run out, want 1; log:\n%s", len(found), strings.Join(logLines(logs), "\n"))
	}
	m := found[0]
	if m["level"] != "warn" || m["ahead_publishing"] != float64(publishing) || m["ahead_on_their_way"] != float64(onTheWay) {
		t.Fatalf("warning %v, want level warn, ahead_publishing %d, ahead_on_their_way %d", m, publishing, onTheWay)
	}
}

// TestTwoDestinationsOfOneEventOnOneRoot: an event's two destinations
// share a root, so it holds two places in that root's line; its two
// publications run at once, whichever claims first takes the first place,
// and both end; the next event's publication, started before them, waits
// for both. No place is left behind.
func TestTwoDestinationsOfOneEventOnOneRoot(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
	twin := pr.h.AddDest(named(config.Destination{Backend: "local", Path: pr.liveRoot.String()}, "twin", planner.Additive), pr.liveRoot, "p")
	if twin.RootKey() != pr.live.RootKey() {
		t.Fatalf("twin's root %s, want live's %s", twin.RootKey(), pr.live.RootKey())
	}
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	v2, _ := makeBundleAt(t, "weather", t0.Add(time.Hour), map[string]string{"report.md": "# v2\n"})
	both := r.Queue([]config.Destination{pr.live, twin})
	next := pr.publishAt("p", "live", v2, r.Queue([]config.Destination{pr.live}))
	notYet(t, next, "the next event")
	onTwin := pr.publishAt("p", "twin", v1, both)
	onLive := pr.publishAt("p", "live", v1, both)
	wantDone(t, onTwin, "the twin destination")
	wantDone(t, onLive, "the live destination")
	wantDone(t, next, "the next event")
	both.Release(context.Background())
	if got := r.Queued(pr.live.RootKey()); got != 0 {
		t.Fatalf("%d places left in the root's line, want 0", got)
	}
}

// TestEventsOverTwoRootsInOppositeOrdersDoNotDeadlock: one event names
// roots L and S, the next S and L; the later event's publications start
// first. Each root's line follows delivery order, so the earlier event
// goes first in both and all four publications end.
func TestEventsOverTwoRootsInOppositeOrdersDoNotDeadlock(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	v2, _ := makeBundleAt(t, "weather", t0.Add(time.Hour), map[string]string{"report.md": "# v2\n"})
	s1, _ := makeBundleAt(t, "tides", t0, map[string]string{"tides.md": "# 1\n"})
	s2, _ := makeBundleAt(t, "tides", t0.Add(time.Hour), map[string]string{"tides.md": "# 2\n"})
	first := r.Queue([]config.Destination{pr.live, pr.side})
	second := r.Queue([]config.Destination{pr.side, pr.live})
	late := []<-chan error{pr.publishAt("q", "side", s2, second), pr.publishAt("p", "live", v2, second)}
	notYet(t, late[0], "the later event on the side root")
	wantDone(t, pr.publishAt("p", "live", v1, first), "the earlier event on the live root")
	wantDone(t, pr.publishAt("q", "side", s1, first), "the earlier event on the side root")
	for _, done := range late {
		wantDone(t, done, "the later event")
	}
	wantContents(t, pr.liveRoot, map[string]string{"report.md": "# v2\n"})
	for _, d := range []config.Destination{pr.live, pr.side} {
		if got := r.Queued(d.RootKey()); got != 0 {
			t.Fatalf("%s: %d places left in the root's line, want 0", d.ID, got)
		}
	}
}

// TestACancelledWaitLeavesTheLine: a publication waiting in the root's
// line behind an event on its way ends when its context does, well
// before LeaseWait, leaves the line, and logs no lease-wait warning.
func TestACancelledWaitLeavesTheLine(t *testing.T) {
	pr := newPlacesRoot(t)
	r := pr.h.Service
	logs := captureLog(r)
	ahead := r.Queue([]config.Destination{pr.live})
	defer ahead.Release(context.Background())
	v1, _ := makeBundleAt(t, "weather", t0, map[string]string{"report.md": "# v1\n"})
	req := service.Request{PipelineID: "p", Bundle: v1, BundleEventID: "ev-cancelled", Places: r.Queue([]config.Destination{pr.live})}
	b, err := r.OpenBundle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := r.PublishTo(ctx, req, b, pr.live); done <- err }()
	testenv.Eventually(t, 10*time.Second, func() bool { return r.Waiting(pr.live.RootKey()) == 1 }, "the publication to wait in the line")
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a publication whose context was cancelled while it waited succeeded")
		}
	case <-time.After(r.LeaseWait / 2):
		t.Fatalf("the cancelled publication still waits after %v", time.Since(start))
	}
	if got := r.Queued(pr.live.RootKey()); got != 1 {
		t.Fatalf("%d places in the root's line, want 1 (the one ahead)", got)
	}
	for _, l := range logLines(logs) {
		if strings.Contains(l, "waited the lease wait") {
			t.Fatalf("a cancelled wait logged %s", l)
		}
	}
}
