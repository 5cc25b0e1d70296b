package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/stores"
)

// scaleYAML: three pipelines, ten destinations on seven roots (three share
// one root, two share another), additive and replacement. ROOT is replaced
// so that the same layout can be laid out twice (live and serial run).
// Prefixes keep each destination's paths apart inside a shared root; the
// additive ones add {source_name}, so their final state is the union of
// every bundle they received whatever the order.
const scaleYAML = `
pipelines:
  - id: p1
    destinations: [d1, d4, d6, d7]
  - id: p2
    destinations: [d2, d5, d8]
  - id: p3
    destinations: [d3, d9, d10]
destinations:
  - {id: d1, backend: local, path: "@ROOTshared1@", layout: {prefix: "d1/{source_name}/"}}
  - {id: d2, backend: local, path: "@ROOTshared1@", layout: {prefix: "d2/{source_name}/"}}
  - {id: d3, backend: local, path: "@ROOTshared1@", layout: {prefix: "d3/{source_name}/"}}
  - {id: d4, backend: local, path: "@ROOTshared2@", layout: {prefix: "d4/"}, workflow: replacement}
  - {id: d5, backend: local, path: "@ROOTshared2@", layout: {prefix: "d5/{source_name}/"}}
  - {id: d6, backend: local, path: "@ROOTr6@", workflow: replacement}
  - {id: d7, backend: local, path: "@ROOTr7@", layout: {prefix: "{source_name}/"}}
  - {id: d8, backend: local, path: "@ROOTr8@", workflow: replacement}
  - {id: d9, backend: local, path: "@ROOTr9@", layout: {prefix: "{source_name}/"}}
  - {id: d10, backend: local, path: "@ROOTr10@", workflow: replacement}
`

var scaleRoots = []string{"shared1", "shared2", "r6", "r7", "r8", "r9", "r10"}

// leaseRecorder wraps lockers and checks, per root key, that no Acquire
// succeeds while another lease on that root is unreleased, and that
// fencing tokens only grow.
type leaseRecorder struct {
	mu         sync.Mutex
	held       map[string]string // root key -> holder of the unreleased lease
	cur, max   map[string]int
	token      map[string]uint64
	acquired   int
	refused    int
	violations []string
}

func newLeaseRecorder() *leaseRecorder {
	return &leaseRecorder{held: map[string]string{}, cur: map[string]int{}, max: map[string]int{}, token: map[string]uint64{}}
}

func (r *leaseRecorder) wrap(holder string) func(lease.Locker) lease.Locker {
	return func(inner lease.Locker) lease.Locker { return &recordingLocker{inner: inner, holder: holder, r: r} }
}

type recordingLocker struct {
	inner  lease.Locker
	holder string
	r      *leaseRecorder
}

func (l *recordingLocker) Acquire(ctx context.Context, root lease.Root) (lease.Lease, error) {
	ls, err := l.inner.Acquire(ctx, root)
	r := l.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if errors.Is(err, lease.ErrHeld) {
			r.refused++
		}
		return nil, err
	}
	r.acquired++
	if h, ok := r.held[root.Key]; ok {
		r.violations = append(r.violations, fmt.Sprintf("%s acquired %s while %s still held it", l.holder, root.Key, h))
	}
	tok, perr := strconv.ParseUint(ls.Token(), 10, 64)
	if perr != nil || tok <= r.token[root.Key] {
		r.violations = append(r.violations, fmt.Sprintf("%s: token %q after %d", root.Key, ls.Token(), r.token[root.Key]))
	}
	r.token[root.Key] = tok
	r.held[root.Key] = l.holder
	r.cur[root.Key]++
	r.max[root.Key] = max(r.max[root.Key], r.cur[root.Key])
	return &recordedLease{Lease: ls, key: root.Key, r: r}, nil
}

type recordedLease struct {
	lease.Lease
	key  string
	r    *leaseRecorder
	once sync.Once
}

// Release marks the lease released before giving it up: from then on the
// holder no longer mutates and another may take it.
func (l *recordedLease) Release(ctx context.Context) error {
	l.once.Do(func() {
		l.r.mu.Lock()
		delete(l.r.held, l.key)
		l.r.cur[l.key]--
		l.r.mu.Unlock()
	})
	return l.Lease.Release(ctx)
}

// TestScale: three consumers on one durable, ten destinations on seven
// roots, ~200 events over a few bundles. Every event ends in exactly one
// published event per destination; no root is ever leased twice at once;
// the final catalogs and files equal a serial run of the same events.
func TestScale(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("scale test")
	}
	e := newEnv(t, strings.ReplaceAll(scaleYAML, "ROOT", "live"), false)
	serialCfg := e.parse(strings.ReplaceAll(scaleYAML, "ROOT", "serial"))
	rec := newLeaseRecorder()
	opts := fastOptions()
	// The production MaxDeliver: contention for the shared roots is waited
	// out (Runner.LeaseWait), not paid for with deliveries.
	opts.MaxDeliver = 5
	opts.AckWait = 5 * time.Second
	for i := range 3 {
		name := fmt.Sprintf("node%d", i)
		e.start(nodeConfig{name: name, opts: opts, wrapLocker: rec.wrap(name)})
	}

	// Four bundles per pipeline; the last one is published last, to all.
	type src struct{ loc, digest string }
	bundles := map[string][]src{}
	pipelines := []string{"p1", "p2", "p3"}
	for _, p := range pipelines {
		for k := range 4 {
			loc, digest := e.bundle(fmt.Sprintf("%s.s%d", p, k), map[string]string{
				"report.md":                    fmt.Sprintf("# %s source %d\n", p, k),
				fmt.Sprintf("data/s%d.csv", k): fmt.Sprintf("%s,%d\n", p, k),
			})
			bundles[p] = append(bundles[p], src{loc, digest})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var sent []events.BundleReady
	announce := func(ev events.BundleReady) {
		ev.ID = events.NewEventID()
		e.announce(ev)
		sent = append(sent, ev)
	}
	const phase1 = 190
	for range phase1 {
		p := pipelines[rng.IntN(len(pipelines))]
		b := bundles[p][rng.IntN(3)]
		ev := events.BundleReady{PipelineID: p, Bundle: b.loc, ManifestDigest: b.digest}
		if rng.IntN(5) == 0 { // a fifth go to one destination only
			pl, _ := e.cfg.Pipeline(p)
			ev.Destinations = []string{pl.Destinations[rng.IntN(len(pl.Destinations))]}
		}
		announce(ev)
	}
	start := time.Now()
	e.waitFor(60*time.Second, func() bool { return complete(e, sent) }, "every phase-1 event's outcomes")
	for _, p := range pipelines {
		announce(events.BundleReady{PipelineID: p, Bundle: bundles[p][3].loc, ManifestDigest: bundles[p][3].digest})
	}
	e.waitFor(30*time.Second, func() bool { return complete(e, sent) }, "the final events' outcomes")
	elapsed := time.Since(start)
	info := e.settled(10 * time.Second)

	// Exactly one outcome per (event, destination), and it is published.
	type key struct{ event, dest string }
	seen := map[key]events.Result{}
	maxAttempts := 0
	writtenBy := map[string]int{}
	for _, r := range e.results.all() {
		k := key{r.BundleEventID, r.DestinationID}
		if prev, dup := seen[k]; dup {
			t.Errorf("event %s destination %s: two outcomes, %s and %s", k.event, k.dest, prev.Type, r.Type)
		}
		seen[k] = r
		if r.Type != events.TypePublished {
			t.Errorf("event %s destination %s: %s %s: %s", k.event, k.dest, r.Type, r.Reason, r.Message)
		}
		maxAttempts = max(maxAttempts, r.Attempts)
		writtenBy[r.DestinationID] += r.Written
	}
	var outcomes int
	for _, ev := range sent {
		outcomes += len(targets(e.cfg, ev))
	}
	if len(seen) != outcomes {
		t.Errorf("%d outcomes, want %d", len(seen), outcomes)
	}
	e.checkNoBadEvents()

	rec.mu.Lock()
	for _, v := range rec.violations {
		t.Error(v)
	}
	for k, m := range rec.max {
		if m != 1 {
			t.Errorf("root %s: %d concurrent leases", k, m)
		}
	}
	t.Logf("%d events, %d outcomes in %s (%.0f outcomes/s); %d deliveries; leases: %d acquired, %d refused (held); max attempts %d",
		len(sent), outcomes, elapsed.Round(time.Millisecond), float64(outcomes)/elapsed.Seconds(), info.Delivered.Consumer, rec.acquired, rec.refused, maxAttempts)
	rec.mu.Unlock()

	// The serial run: the same events, one at a time, in announcement order.
	serialWritten := runSerial(t, e, serialCfg, sent)
	for _, d := range e.cfg.Destinations {
		if d.Workflow == "additive" && writtenBy[d.ID] != serialWritten[d.ID] {
			// Additive paths are written once each, whatever the order.
			t.Errorf("%s: %d outputs written in all, serial run %d", d.ID, writtenBy[d.ID], serialWritten[d.ID])
		}
	}
	for _, name := range scaleRoots {
		live, serial := localRoot(t, e.roots["live"+name]), localRoot(t, e.roots["serial"+name])
		lc, sc := normalised(readCatalog(t, live)), normalised(readCatalog(t, serial))
		if !reflect.DeepEqual(lc, sc) {
			t.Errorf("root %s: catalog differs from the serial run:\nlive   %+v\nserial %+v", name, lc, sc)
		}
		lf, sf := files(t, live), files(t, serial)
		delete(lf, catalog.FileName) // compared above, modulo times
		delete(sf, catalog.FileName)
		if !reflect.DeepEqual(lf, sf) {
			t.Errorf("root %s: files differ from the serial run:\nlive   %v\nserial %v", name, lf, sf)
		}
		if len(lc) == 0 {
			t.Errorf("root %s: empty catalog", name)
		}
	}
}

// targets are the destinations an event publishes to.
func targets(cfg *config.Config, ev events.BundleReady) []string {
	if len(ev.Destinations) > 0 {
		return ev.Destinations
	}
	p, _ := cfg.Pipeline(ev.PipelineID)
	return p.Destinations
}

// complete reports whether every sent event has an outcome per destination.
func complete(e *env, sent []events.BundleReady) bool {
	n := map[string]int{}
	for _, r := range e.results.all() {
		n[r.BundleEventID]++
	}
	for _, ev := range sent {
		if n[ev.ID] < len(targets(e.cfg, ev)) {
			return false
		}
	}
	return true
}

// runSerial publishes the events one after another, without NATS in the
// way, and returns the outputs written per destination.
func runSerial(t *testing.T, e *env, cfg *config.Config, sent []events.BundleReady) map[string]int {
	t.Helper()
	r := &service.Service{
		Engine: &engine.Engine{Version: "test"},
		Config: cfg,
		Stores: &testStores{open: stores.New(cfg)},
		Locker: lease.NewKV(e.js, e.streams.Leases, "serial", 2*time.Second),
	}
	written := map[string]int{}
	for _, ev := range sent {
		req := service.Request{PipelineID: ev.PipelineID, Bundle: ev.Bundle, ManifestDigest: ev.ManifestDigest, Destinations: ev.Destinations, BundleEventID: ev.ID}
		dests, err := r.Destinations(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.OpenBundle(e.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dests {
			res, err := r.PublishTo(e.ctx, req, b, d)
			if err != nil {
				t.Fatalf("serial %s → %s: %v", ev.ID, d.ID, err)
			}
			written[d.ID] += len(res.Written)
		}
	}
	return written
}

// normalised drops the times that differ between two runs.
func normalised(c *catalog.Catalog) []catalog.Output {
	out := make([]catalog.Output, len(c.Outputs))
	for i, o := range c.Outputs {
		o.CreatedAt, o.UpdatedAt = time.Time{}, time.Time{}
		out[i] = o
	}
	return out
}
