package consumer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// clusterYAML: five pipelines of two destinations each, every destination
// on its own local root: one additive (a folder per source), one
// replacement.
func clusterYAML() string {
	var b strings.Builder
	b.WriteString("pipelines:\n")
	for p := 1; p <= 5; p++ {
		fmt.Fprintf(&b, "  - {id: p%d, destinations: [d%d, d%d]}\n", p, 2*p-1, 2*p)
	}
	b.WriteString("destinations:\n")
	for d := 1; d <= 10; d++ {
		if d%2 == 1 {
			fmt.Fprintf(&b, "  - {id: d%d, backend: local, path: \"@r%d@\", layout: {prefix: \"{source_name}/\"}}\n", d, d)
		} else {
			fmt.Fprintf(&b, "  - {id: d%d, backend: local, path: \"@r%d@\", workflow: replacement}\n", d, d)
		}
	}
	return b.String()
}

// TestClusterLosesStreamLeader: on a 3-node JetStream cluster with the
// streams, the durable and the lease bucket on three replicas, two serve
// processes work through a burst of bundle-ready events over ten roots
// while the node leading the bundles stream is killed and later restarted.
// Every event still gets exactly one result per destination (counted in the
// events stream), every catalog is valid and describes its root's files,
// and no root was ever leased twice at once (fencing tokens only grow).
func TestClusterLosesStreamLeader(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster test")
	}
	cl := testenv.NewCluster(t)
	e := newEnvWith(t, cl, events.SetupConfig{Replicas: 3}, clusterYAML(), false)
	subj := e.streams.Subjects

	rec := newLeaseRecorder()
	opts := fastOptions()
	opts.Replicas = 3
	// Generous for 2 busy cores: a fail-over stalls acks and renewals for a
	// moment; retries are spread over ~15 s so none runs out of deliveries.
	opts.AckWait = 5 * time.Second
	opts.BackOff = []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second}
	opts.MaxDeliver = 20
	for i := range 2 {
		name := fmt.Sprintf("serve%d", i)
		e.start(nodeConfig{name: name, opts: opts, wrapLocker: rec.wrap(name), leaseTTL: 5 * time.Second, leaseWait: 15 * time.Second, log: logTo(t).Level(zerolog.WarnLevel).With().Str("node", name).Logger()})
	}

	// Everything is on three replicas.
	for _, stream := range []string{subj.BundlesStream(), subj.EventsStream(), "KV_" + subj.LeaseBucket()} {
		s, err := e.js.Stream(e.ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Fatalf("stream %s has %d replicas, want 3", stream, r)
		}
	}
	cons, err := e.js.Consumer(e.ctx, subj.BundlesStream(), subj.Durable())
	if err != nil {
		t.Fatal(err)
	}
	if r := cons.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("durable %s has %d replicas, want 3", subj.Durable(), r)
	}

	type src struct{ id, loc, digest string }
	pipelines := []string{"p1", "p2", "p3", "p4", "p5"}
	bundles := map[string][]src{}
	for _, p := range pipelines {
		for k := range 4 {
			id := fmt.Sprintf("%s.s%d", p, k)
			loc, digest := e.bundle(id, map[string]string{
				"report.md":                    fmt.Sprintf("# %s source %d\n", p, k),
				fmt.Sprintf("data/s%d.csv", k): fmt.Sprintf("%s,%d\n", p, k),
			})
			bundles[p] = append(bundles[p], src{id, loc, digest})
		}
	}
	var sent []events.BundleReady
	sourceOf := map[string]string{} // event id -> source id
	announce := func(p string, b src) {
		t.Helper()
		ev := events.BundleReady{ID: events.NewEventID(), PipelineID: p, Bundle: b.loc, ManifestDigest: b.digest}
		// A producer retries through a fail-over; the event id makes a
		// retried announce land once.
		testenv.Retry(t, 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
			defer cancel()
			_, _, err := e.pub.AnnounceBundle(ctx, ev)
			return err
		}, "announcing %s", ev.ID)
		sent = append(sent, ev)
		sourceOf[ev.ID] = b.id
	}
	outcomes := func() int { return len(e.results.all()) }

	rng := rand.New(rand.NewPCG(3, 4))
	burst := func(n int) {
		for range n {
			p := pipelines[rng.IntN(len(pipelines))]
			announce(p, bundles[p][rng.IntN(3)])
		}
	}
	start := time.Now()
	burst(120)
	e.waitFor(90*time.Second, func() bool { return outcomes() >= 40 }, "the first outcomes")
	// A busy cluster may be between two leaders of the stream right now.
	leader := cl.WaitStreamLeader(t, subj.BundlesStream())
	before := outcomes()
	cl.Kill(leader)
	t.Logf("killed node %d (leader of %s) after %d outcomes, %s", leader, subj.BundlesStream(), before, time.Since(start).Round(time.Millisecond))
	burst(100)
	// Work goes on with one node down before the node comes back.
	e.waitFor(90*time.Second, func() bool { return outcomes() >= before+100 }, "outcomes with node %d down", leader)
	cl.Restart(leader)
	t.Logf("restarted node %d after %d outcomes, %s", leader, outcomes(), time.Since(start).Round(time.Millisecond))
	e.waitFor(180*time.Second, func() bool { return complete(e, sent) }, "every burst event's outcomes")
	// A last bundle to every destination, announced after all others: the
	// replacement roots must end with it.
	for _, p := range pipelines {
		announce(p, bundles[p][3])
	}
	e.waitFor(90*time.Second, func() bool { return complete(e, sent) }, "the final events' outcomes")
	e.settled(90 * time.Second)
	// The restarted node has caught up with everything.
	for _, stream := range []string{subj.BundlesStream(), subj.EventsStream(), "KV_" + subj.LeaseBucket()} {
		cl.WaitStreamCurrent(t, stream)
	}
	t.Logf("%d events, %d outcomes in %s", len(sent), outcomes(), time.Since(start).Round(time.Millisecond))

	// Exactly one result per (event, destination) in the events stream, and
	// it is published.
	type key struct{ event, dest string }
	stored := storedResults(t, e)
	seen := map[key]events.Result{}
	for _, r := range stored {
		k := key{r.BundleEventID, r.DestinationID}
		if prev, dup := seen[k]; dup {
			t.Errorf("event %s destination %s: two results, %s and %s", k.event, k.dest, prev.Type, r.Type)
		}
		seen[k] = r
		if r.Type != events.TypePublished {
			t.Errorf("event %s destination %s: %s %s: %s", k.event, k.dest, r.Type, r.Reason, r.Message)
		}
	}
	want := 0
	sourcesOf := map[string]map[string]bool{} // destination -> source ids sent to it
	for _, ev := range sent {
		for _, d := range targets(e.cfg, ev) {
			want++
			if _, ok := seen[key{ev.ID, d}]; !ok {
				t.Errorf("event %s destination %s: no result", ev.ID, d)
			}
			if sourcesOf[d] == nil {
				sourcesOf[d] = map[string]bool{}
			}
			sourcesOf[d][sourceOf[ev.ID]] = true
		}
	}
	if len(seen) != want || len(stored) != want {
		t.Errorf("%d results (%d distinct), want %d", len(stored), len(seen), want)
	}
	e.checkNoBadEvents()

	// No root was ever held twice; tokens only grew.
	rec.mu.Lock()
	for _, v := range rec.violations {
		t.Error(v)
	}
	for k, m := range rec.max {
		if m != 1 {
			t.Errorf("root %s: %d concurrent leases", k, m)
		}
	}
	t.Logf("leases: %d acquired, %d refused (held)", rec.acquired, rec.refused)
	rec.mu.Unlock()

	pipelineOf := map[string]string{}
	for _, p := range e.cfg.Pipelines {
		for _, d := range p.Destinations {
			pipelineOf[d] = p.ID
		}
	}
	// Every catalog is valid and describes exactly its root's files: the
	// union of every source for additive roots, the last one for
	// replacement roots.
	for _, d := range e.cfg.Destinations {
		root := localRoot(t, d.Path)
		cat := readCatalog(t, root)
		fs := files(t, root)
		delete(fs, catalog.FileName)
		described := map[string]string{}
		sources := map[string]bool{}
		for _, o := range cat.Outputs {
			described[o.Path] = o.SHA256
			sources[o.Source.ID] = true
			if o.DestinationID != d.ID {
				t.Errorf("%s: output %s belongs to %s", d.ID, o.Path, o.DestinationID)
			}
		}
		if !reflect.DeepEqual(described, fs) {
			t.Errorf("%s: catalog describes %v, root holds %v", d.ID, described, fs)
		}
		wantSources := sourcesOf[d.ID]
		if d.Workflow == "replacement" {
			wantSources = map[string]bool{bundles[pipelineOf[d.ID]][3].id: true}
		}
		if !reflect.DeepEqual(sources, wantSources) {
			t.Errorf("%s (%s): catalog has sources %v, want %v", d.ID, d.Workflow, sortedKeys(sources), sortedKeys(wantSources))
		}
	}
}

// storedResults reads every result event stored in the events stream. A
// read that fails (the cluster may still be settling after the restart) is
// retried.
func storedResults(t *testing.T, e *env) []events.Result {
	t.Helper()
	var out []events.Result
	testenv.Retry(t, 30*time.Second, func() (err error) {
		out, err = readStoredResults(e)
		return err
	}, "reading the result events")
	return out
}

func readStoredResults(e *env) ([]events.Result, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	info, err := e.streams.Events.Info(ctx)
	if err != nil {
		return nil, err
	}
	oc, err := e.js.OrderedConsumer(ctx, e.streams.Subjects.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var out []events.Result
	for uint64(len(out)) < info.State.Msgs {
		batch, err := oc.Fetch(256, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			r, err := events.DecodeResult(m.Data())
			if err != nil {
				return nil, fmt.Errorf("result event %s: %w", m.Subject(), err)
			}
			out = append(out, r)
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("read %d of %d result events", len(out), info.State.Msgs)
		}
	}
	return out, nil
}
