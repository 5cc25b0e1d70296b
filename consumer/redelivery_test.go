package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

const archiveYAML = `
pipelines:
  - id: weather.daily
    destinations: [archive]
destinations:
  - id: archive
    backend: local
    path: @archive@
    workflow: replacement
`

// TestDuplicateAnnouncements: the same bundle announced twice under two ids
// is published twice, the second time as a no-op; the same id announced
// twice is stored and published once.
func TestDuplicateAnnouncements(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	loc, digest := e.bundle("weather.tomorrow", v1)
	ev := events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest}

	first := e.announce(ev)
	res := e.wait(first, 1, 10*time.Second)
	checkPublished(t, res[0], first, "archive", 2, 0, 0, nil)
	before, _, _ := localRoot(t, e.roots["archive"]).ReadVersion(e.ctx, catalog.FileName)

	second := e.announce(ev)
	res = e.wait(second, 1, 10*time.Second)
	checkPublished(t, res[0], second, "archive", 0, 2, 0, nil)
	if len(res[0].Outputs) != 0 {
		t.Errorf("no-op publication lists outputs %+v", res[0].Outputs)
	}
	after, _, _ := localRoot(t, e.roots["archive"]).ReadVersion(e.ctx, catalog.FileName)
	if !bytes.Equal(before, after) {
		t.Errorf("a no-op publication rewrote the catalog:\n%s\n->\n%s", before, after)
	}

	// Same Nats-Msg-Id: the producer's retried announce is dropped.
	ev.ID = "fixed-id-1"
	seq1, dup1, err := e.pub.AnnounceBundle(e.ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	seq2, dup2, err := e.pub.AnnounceBundle(e.ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if dup1 || !dup2 || seq1 != seq2 {
		t.Errorf("announce twice: (seq %d dup %v), (seq %d dup %v); want the second a duplicate of the first", seq1, dup1, seq2, dup2)
	}
	e.wait(ev.ID, 1, 10*time.Second)
	info := e.settled(5 * time.Second)
	if info.Delivered.Stream != 3 || info.Delivered.Consumer != 3 {
		t.Errorf("stream holds %d messages delivered %d times, want 3 and 3", info.Delivered.Stream, info.Delivered.Consumer)
	}
	if n := len(e.results.all()); n != 3 {
		t.Errorf("%d result events, want 3", n)
	}
}

// gate blocks every output Put of a node until open is closed or the call's
// context ends (unless stalled), and makes every storage call fail once
// dead is set (a killed process does nothing more).
type gate struct {
	entered chan struct{} // closed at the first blocked Put
	open    chan struct{}
	dead    atomic.Bool
	commits atomic.Int32
	once    sync.Once
	// stalled: a blocked Put ignores its context, as a stalled process
	// (SIGSTOP, a long pause) notices nothing until it runs again.
	stalled bool
}

func newGate() *gate { return &gate{entered: make(chan struct{}), open: make(chan struct{})} }

var errKilled = errors.New("process killed")

func (g *gate) wrap(_ config.Destination, b storage.Backend) storage.Backend {
	return &hooked{
		Backend: b,
		read: func(context.Context, string) error {
			if g.dead.Load() {
				return errKilled
			}
			return nil
		},
		put: func(ctx context.Context, _ string) error {
			if g.dead.Load() {
				return errKilled
			}
			g.once.Do(func() { close(g.entered) })
			done := ctx.Done()
			if g.stalled {
				done = nil
			}
			select {
			case <-g.open:
			case <-done:
				return ctx.Err()
			}
			if g.dead.Load() {
				return errKilled
			}
			return nil
		},
		commit: func(context.Context) error {
			if g.dead.Load() {
				return errKilled
			}
			return nil
		},
		commits: &g.commits,
	}
}

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the publication never reached its first write")
	}
}

// TestKilledConsumerRedelivered: a consumer dies in the middle of writing
// (no ack, nak, heartbeat, lease renewal or release); the event is
// redelivered to another consumer once the ack wait and the lease expire,
// which recovers the root and publishes; exactly one result event.
func TestKilledConsumerRedelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	opts := fastOptions()
	opts.AckWait = time.Second
	opts.ShutdownTimeout = 100 * time.Millisecond
	g := newGate()
	a := e.start(nodeConfig{name: "a", opts: opts, wrap: g.wrap, leaseTTL: time.Second})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	g.waitEntered(t)

	var bCommits atomic.Int32
	// b's lease need not expire: a TTL with slack keeps a loaded machine
	// (tests in parallel, -race) from costing b its lease and the event an
	// attempt.
	e.start(nodeConfig{name: "b", opts: opts, leaseTTL: 5 * time.Second, wrap: func(d config.Destination, b storage.Backend) storage.Backend {
		return &hooked{Backend: b, commits: &bCommits}
	}})
	g.dead.Store(true)
	a.kill(t)
	if a.stopped > 2*time.Second {
		t.Errorf("killed node's Run took %s to return", a.stopped)
	}

	res := e.wait(id, 1, 20*time.Second)
	if len(res) != 1 {
		t.Fatalf("%d results, want 1", len(res))
	}
	r := res[0]
	if r.Type != events.TypePublished || r.Attempts < 2 || r.Written != 2 || r.Unchanged != 0 {
		t.Errorf("got %s attempts %d written %d unchanged %d (%s), want published on a redelivery with 2 written", r.Type, r.Attempts, r.Written, r.Unchanged, r.Message)
	}
	if g.commits.Load() != 0 || bCommits.Load() != 1 {
		t.Errorf("catalog commits: killed node %d, survivor %d; want 0 and 1", g.commits.Load(), bCommits.Load())
	}
	root := localRoot(t, e.roots["archive"])
	checkFiles(t, root, map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])})
	if cat := readCatalog(t, root); len(cat.Outputs) != 2 {
		t.Errorf("catalog has %d outputs", len(cat.Outputs))
	}
	e.quiet(5 * time.Second)
	if n := len(e.results.of(id)); n != 1 {
		t.Errorf("%d result events, want 1", n)
	}
}

// TestStalledHolderLosesLease: a holder stalls mid-publication while its
// lease renewals cannot reach the server; the lease expires. When it wakes
// it must not commit: its run ends with a lease-lost error and the event is
// retried (not lost); the next holder commits the catalog exactly once.
func TestStalledHolderLosesLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	opts := fastOptions()
	opts.ShutdownTimeout = 20 * time.Second
	var logs testenv.SyncBuffer
	g := newGate()
	g.stalled = true
	kept := &keptLocker{}
	a := e.start(nodeConfig{name: "a", opts: opts, wrap: g.wrap, leaseTTL: time.Second, splitLock: true, log: zerolog.New(&logs), wrapLocker: kept.wrap})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	g.waitEntered(t)

	// Cut a's renewals (its consumer connection stays up: it keeps the
	// message with heartbeats) and wait until the lease has expired.
	d, _ := e.cfg.Destination("archive")
	a.lockNC.Close()
	e.waitFor(10*time.Second, func() bool { return e.leaseKeyGone(d.RootKey()) }, "the stalled holder's lease to expire")
	e.waitFor(10*time.Second, kept.lost, "the stalled holder to count its own lease as lost")

	// a stops fetching (so the retry goes to b) and wakes up.
	var bCommits atomic.Int32
	// b's lease need not expire: a TTL with slack keeps a loaded machine
	// (tests in parallel, -race) from costing b its lease and the event an
	// attempt.
	e.start(nodeConfig{name: "b", opts: opts, leaseTTL: 5 * time.Second, wrap: func(_ config.Destination, b storage.Backend) storage.Backend {
		return &hooked{Backend: b, commits: &bCommits}
	}})
	a.cancel() // stop calls it again, a no-op, and waits for Run
	close(g.open)
	_ = a.stop(t, time.Minute)

	res := e.wait(id, 1, 20*time.Second)
	r := res[0]
	if len(res) != 1 || r.Type != events.TypePublished || r.Attempts != 2 {
		t.Fatalf("got %d results: %s attempts %d (%s); want one published on attempt 2", len(res), r.Type, r.Attempts, r.Message)
	}
	if g.commits.Load() != 0 || bCommits.Load() != 1 {
		t.Errorf("catalog commits: stale holder %d, new holder %d; want 0 and 1", g.commits.Load(), bCommits.Load())
	}
	if !strings.Contains(logs.String(), "lease lost") || !strings.Contains(logs.String(), "will retry") {
		t.Errorf("the stale holder's run did not end with a lease-lost error to retry; its log:\n%s", logs.String())
	}
	root := localRoot(t, e.roots["archive"])
	checkFiles(t, root, map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])})
	if cat := readCatalog(t, root); len(cat.Outputs) != 2 {
		t.Errorf("catalog has %d outputs", len(cat.Outputs))
	}
	e.settled(5 * time.Second)
}

// keptLocker also keeps every lease its locker hands out, for the test.
type keptLocker struct {
	lease.Locker
	mu     sync.Mutex
	leases []lease.Lease
}

func (k *keptLocker) wrap(inner lease.Locker) lease.Locker { k.Locker = inner; return k }

func (k *keptLocker) Acquire(ctx context.Context, root lease.Root) (lease.Lease, error) {
	l, err := k.Locker.Acquire(ctx, root)
	if err == nil {
		k.mu.Lock()
		k.leases = append(k.leases, l)
		k.mu.Unlock()
	}
	return l, err
}

// lost reports whether the locker handed out leases and every one of them
// reports itself lost or released.
func (k *keptLocker) lost() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range k.leases {
		if l.Err() == nil {
			return false
		}
	}
	return len(k.leases) > 0
}

// TestRetryReportsRecoveredWrites: a consumer dies after its writes landed
// but before the catalog commit; the redelivery rolls them forward from the
// intent. Its published event must still report them as written: they are
// this bundle event's changes, and downstream learns of them only there.
func TestRetryReportsRecoveredWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	opts := fastOptions()
	opts.AckWait = time.Second
	opts.ShutdownTimeout = 100 * time.Millisecond
	var dead atomic.Bool
	committing := make(chan struct{})
	var once sync.Once
	a := e.start(nodeConfig{name: "a", opts: opts, leaseTTL: time.Second, wrap: func(_ config.Destination, b storage.Backend) storage.Backend {
		return &hooked{Backend: b, commit: func(ctx context.Context) error {
			once.Do(func() { close(committing) })
			<-ctx.Done()
			return errKilled
		}, read: func(context.Context, string) error {
			if dead.Load() {
				return errKilled
			}
			return nil
		}}
	}})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	select {
	case <-committing:
	case <-time.After(20 * time.Second):
		t.Fatal("never reached the commit")
	}
	e.start(nodeConfig{name: "b", opts: opts, leaseTTL: time.Second})
	dead.Store(true)
	a.kill(t)

	res := e.wait(id, 1, 20*time.Second)
	r := res[0]
	if r.Type != events.TypePublished || r.Attempts < 2 {
		t.Fatalf("got %s attempts %d (%s)", r.Type, r.Attempts, r.Message)
	}
	checkFiles(t, localRoot(t, e.roots["archive"]), map[string]string{catalog.FileName: "", "data/a.csv": digestOf(v1["data/a.csv"]), "report.md": digestOf(v1["report.md"])})
	if r.Written != 2 || r.Unchanged != 0 || len(r.Outputs) != 2 {
		t.Errorf("published after recovery: written %d unchanged %d outputs %+v; want the 2 outputs this event wrote", r.Written, r.Unchanged, r.Outputs)
	}
}

// TestGracefulShutdown: cancelling Run while a slow publication is in flight
// lets it finish within ShutdownTimeout; Run returns and the lease is gone.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	opts := fastOptions()
	opts.ShutdownTimeout = 10 * time.Second
	g := newGate()
	n := e.start(nodeConfig{opts: opts, wrap: g.wrap})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	g.waitEntered(t)
	// Cancel while the publication is held at its first write, and let it
	// go on only then: Run must wait for it rather than return at the
	// cancel (stop cancels again, a no-op, and waits for Run).
	n.cancel()
	select {
	case err := <-n.done:
		t.Fatalf("Run returned (%v) at the cancel, with a publication in flight", err)
	default:
	}
	close(g.open)
	if err := n.stop(t, 15*time.Second); err != nil {
		t.Errorf("Run: %v", err)
	}
	// The result was published before Run returned: it is in the events
	// stream already (a publish returns once the stream stored it).
	if info, err := e.streams.Events.Info(e.ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("events stream when Run returned: %+v, %v; want the one result", info, err)
	}
	res := e.wait(id, 1, 5*time.Second)
	checkPublished(t, res[0], id, "archive", 2, 0, 0, nil)
	d, _ := e.cfg.Destination("archive")
	if !e.leaseKeyGone(d.RootKey()) {
		t.Error("lease still held after Run returned")
	}
	e.settled(5 * time.Second)
}

// TestShutdownAbandonsSlowWork: work that outlasts ShutdownTimeout is
// abandoned: Run returns soon after the timeout, the lease is released, no
// result is reported for it, and the event is redelivered and published by
// the next consumer.
func TestShutdownAbandonsSlowWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	opts := fastOptions()
	opts.ShutdownTimeout = 200 * time.Millisecond
	g := newGate()
	n := e.start(nodeConfig{opts: opts, wrap: g.wrap})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	g.waitEntered(t)
	if err := n.stop(t, 15*time.Second); err != nil {
		t.Errorf("Run: %v", err)
	}
	if n.stopped < 200*time.Millisecond || n.stopped > 2*time.Second {
		t.Errorf("Run returned %s after cancel, want just over the 200ms shutdown timeout", n.stopped)
	}
	d, _ := e.cfg.Destination("archive")
	if !e.leaseKeyGone(d.RootKey()) {
		t.Error("lease still held after Run returned")
	}
	// Run has returned: whatever it reported is stored by now.
	e.caughtUp(5 * time.Second)
	if res := e.results.of(id); len(res) != 0 {
		e.dump()
		t.Fatalf("abandoned work reported %d result(s); it must be retried silently", len(res))
	}
	e.start(nodeConfig{name: "next", opts: opts})
	res := e.wait(id, 1, 10*time.Second)
	if len(res) != 1 || res[0].Type != events.TypePublished || res[0].Attempts != 2 || res[0].Written != 2 {
		t.Errorf("after restart: %d results, first %s attempts %d written %d", len(res), res[0].Type, res[0].Attempts, res[0].Written)
	}
	e.settled(5 * time.Second)
}

// TestLeaseStoreUnavailableIsTransient: when the lease bucket cannot be
// reached, the event is retried like any transient failure and, when that
// lasts, ends in max_deliveries, not in a terminal internal error.
func TestLeaseStoreUnavailableIsTransient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	opts := fastOptions()
	opts.MaxDeliver = 3
	n := e.start(nodeConfig{opts: opts, splitLock: true})
	n.lockNC.Close()
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	res := e.wait(id, 1, 20*time.Second)
	if r := res[0]; r.Type != events.TypeFailed || r.Reason != events.ReasonMaxDeliveries || r.Attempts != 3 {
		t.Errorf("got %s reason %q attempts %d (%s), want failed max_deliveries after 3 attempts", r.Type, r.Reason, r.Attempts, r.Message)
	}
	e.settled(5 * time.Second)
}

// TestResultPublishFailureRetried: a result event that cannot be published
// (the events stream is gone) must not be lost: the bundle event is retried
// and its result published once the stream is back.
func TestResultPublishFailureRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	if err := e.js.DeleteStream(e.ctx, e.streams.Subjects.EventsStream()); err != nil {
		t.Fatal(err)
	}
	e.start(nodeConfig{opts: fastOptions()})
	loc, digest := e.bundle("weather.tomorrow", v1)
	id := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc, ManifestDigest: digest})
	e.waitFor(10*time.Second, func() bool {
		return len(files(t, localRoot(t, e.roots["archive"]))) == 3
	}, "the publication to land")
	// The first attempt could not publish its result: the event is
	// delivered again (past nats.go's own publish retries).
	e.waitFor(10*time.Second, func() bool {
		info, err := e.durableInfo()
		return err == nil && info.Delivered.Consumer >= 2
	}, "a second delivery after the result could not be published")
	if _, err := events.Setup(e.ctx, e.js, events.SetupConfig{Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	var got []events.Result
	e.waitFor(10*time.Second, func() bool {
		got = readResults(t, e)
		return len(got) > 0
	}, "the result event after the events stream came back")
	// Acknowledged: every result of the work is in the stream now.
	e.settled(5 * time.Second)
	got = readResults(t, e)
	if len(got) != 1 || got[0].BundleEventID != id || got[0].Type != events.TypePublished || got[0].Attempts < 2 {
		t.Errorf("results: %+v", got)
	}
}

// TestUndeliveredResultSurvivesANewerVersion: an event whose publication
// finished but whose result could not be published (the events stream is
// gone) reports, once it can, what it wrote: published with its outputs,
// not superseded by the newer version that landed on the root meanwhile.
func TestUndeliveredResultSurvivesANewerVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, archiveYAML, false)
	if err := e.js.DeleteStream(e.ctx, e.streams.Subjects.EventsStream()); err != nil {
		t.Fatal(err)
	}
	e.start(nodeConfig{opts: fastOptions()})
	root := localRoot(t, e.roots["archive"])
	loc1, digest1 := e.bundle("weather.tomorrow", v1)
	id1 := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc1, ManifestDigest: digest1})
	e.waitFor(10*time.Second, func() bool { return files(t, root)["data/a.csv"] != "" }, "v1 to land")
	loc2, digest2 := e.bundle("weather.tomorrow", v2)
	id2 := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc2, ManifestDigest: digest2})
	e.waitFor(10*time.Second, func() bool { return files(t, root)["data/b.csv"] != "" }, "v2 to land")
	// Both wait for their results' delivery: v1's next attempt would now
	// find v2 there.
	e.waitFor(10*time.Second, func() bool {
		info, err := e.durableInfo()
		return err == nil && info.Delivered.Consumer >= 4
	}, "both events delivered again")
	if _, err := events.Setup(e.ctx, e.js, events.SetupConfig{Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	r1 := e.wait(id1, 1, 20*time.Second)[0]
	r2 := e.wait(id2, 1, 20*time.Second)[0]
	e.settled(5 * time.Second)
	if r1.Type != events.TypePublished || r1.Written != len(v1) || r1.Source == nil || r1.Source.Digest != digest1 || r1.Attempts < 2 {
		t.Errorf("v1: %s written %d source %+v attempts %d (%s); want published, %d written, source %s, reported by a later attempt",
			r1.Type, r1.Written, r1.Source, r1.Attempts, r1.Message, len(v1), digest1)
	}
	if r2.Type != events.TypePublished || r2.Source == nil || r2.Source.Digest != digest2 {
		t.Errorf("v2: %s source %+v (%s); want published", r2.Type, r2.Source, r2.Message)
	}
	if got := readResults(t, e); len(got) != 2 {
		t.Errorf("%d results for 2 events: %+v", len(got), got)
	}
	if left := files(t, root); len(left) != len(v2)+1 || left["data/b.csv"] == "" {
		t.Errorf("root holds %v, want v2's files and the catalog", left)
	}
	// The kept results are gone once delivered.
	if reports, _ := os.ReadDir(filepath.Join(e.roots["archive"], ".distributor", "reports")); len(reports) != 0 {
		t.Errorf("%d kept results left in the root", len(reports))
	}
	e.checkNoBadEvents()
}

// readResults reads the whole events stream.
func readResults(t *testing.T, e *env) []events.Result {
	t.Helper()
	oc, err := e.js.OrderedConsumer(e.ctx, e.streams.Subjects.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil
	}
	var out []events.Result
	for {
		batch, err := oc.FetchNoWait(100)
		if err != nil {
			return out
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			r, err := events.DecodeResult(msg.Data())
			if err != nil {
				t.Errorf("undecodable result: %v", err)
				continue
			}
			out = append(out, r)
		}
		if n == 0 {
			return out
		}
	}
}

// TestRetrySkipsReportedDestinations: when one destination of an event is
// retried, the destinations that already reported an outcome are not run
// again. Otherwise the retry silently re-publishes an older bundle over a
// newer one published meanwhile (its result event is dropped as a
// duplicate), or contradicts an earlier published event with a failed one.
func TestRetrySkipsReportedDestinations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weatherYAML, false)
	var failures atomic.Int32
	opts := fastOptions()
	opts.BackOff = []time.Duration{time.Second}
	e.start(nodeConfig{opts: opts, wrap: flaky(1, &failures)}) // archive fails once
	loc1, digest1 := e.bundle("weather.tomorrow", v1)
	old := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc1, ManifestDigest: digest1})
	e.waitFor(10*time.Second, func() bool { return len(e.results.of(old)) == 1 && failures.Load() == 1 }, "site's result and archive's failure")

	// While archive waits for its retry, a newer bundle reaches site.
	loc2, digest2 := e.bundle("weather.tomorrow", v2)
	newer := e.announce(events.BundleReady{PipelineID: "weather.daily", Bundle: loc2, ManifestDigest: digest2, Destinations: []string{"site"}})
	res := e.wait(newer, 1, 10*time.Second)
	checkPublished(t, res[0], newer, "site", 3, 0, 0, nil)
	site := localRoot(t, e.roots["site"])
	want := files(t, site)
	delete(want, catalog.FileName)

	res = e.wait(old, 2, 10*time.Second)
	if res[0].DestinationID != "archive" || res[0].Type != events.TypePublished || res[0].Attempts != 2 {
		t.Errorf("archive: %s attempts %d", res[0].Type, res[0].Attempts)
	}
	e.settled(5 * time.Second)
	got := files(t, site)
	delete(got, catalog.FileName)
	if got["tomorrow/report.md"] != digestOf(v2["report.md"]) {
		t.Errorf("site's report.md went back to the older bundle after the retry of %s", old)
	}
	for _, o := range readCatalog(t, site).Outputs {
		if o.Path == "tomorrow/report.md" && o.Source.Digest != digest2 {
			t.Errorf("site's report.md record names source %s, want the newer %s", o.Source.Digest, digest2)
		}
	}
}
