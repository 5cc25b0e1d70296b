package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/stores"
	"github.com/distributor/distributor/testenv"
)

// publishedWaiter signals published events by bundle event id, as they
// arrive on the subject (no polling, so latencies are not rounded up).
type publishedWaiter struct {
	mu      sync.Mutex
	pending map[string]chan events.Result
}

func (e *env) publishedWaiter(b *testing.B) *publishedWaiter {
	w := &publishedWaiter{pending: map[string]chan events.Result{}}
	nc := e.nats.Conn(b)
	sub, err := nc.Subscribe(e.streams.Subjects.ResultFilter("", "", ""), func(m *nats.Msg) {
		r, err := events.DecodeResult(m.Data)
		if err != nil {
			return
		}
		w.mu.Lock()
		ch := w.pending[r.BundleEventID]
		delete(w.pending, r.BundleEventID)
		w.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	return w
}

// expect registers an event id before it is announced.
func (w *publishedWaiter) expect(id string) chan events.Result {
	ch := make(chan events.Result, 1)
	w.mu.Lock()
	w.pending[id] = ch
	w.mu.Unlock()
	return ch
}

// BenchmarkLatency measures announce → published for a one-file bundle,
// one event at a time, each one writing (run with -benchtime=200x).
func BenchmarkLatency(b *testing.B) {
	if testing.Short() {
		b.Skip("measurement")
	}
	e := newEnv(b, archiveYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	w := e.publishedWaiter(b)
	type src struct{ loc, digest string }
	srcs := make([]src, b.N)
	for i := range srcs {
		srcs[i].loc, srcs[i].digest = e.bundle("weather.tomorrow", map[string]string{"report.md": fmt.Sprintf("# run %d\n", i)})
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := events.NewEventID()
		ch := w.expect(id)
		start := time.Now()
		e.announce(events.BundleReady{ID: id, PipelineID: "weather.daily", Bundle: srcs[i].loc, ManifestDigest: srcs[i].digest})
		select {
		case r := <-ch:
			lat = append(lat, time.Since(start))
			if r.Type != events.TypePublished || r.Written != 1 {
				b.Fatalf("event %d: %s written %d (%s)", i, r.Type, r.Written, r.Message)
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("event %d: no result", i)
		}
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkLatencyNothingChanged measures announce → published for a new
// version of a 10,000-file bundle whose bytes all stay the same, one
// event at a time: serve's "nothing changed" (every record is rewritten
// with the new source, no file is). Two versions alternate, announced by
// an operator with allow_older, after an untimed first publication.
func BenchmarkLatencyNothingChanged(b *testing.B) {
	if testing.Short() {
		b.Skip("measurement")
	}
	e := newEnv(b, archiveYAML, false)
	e.start(nodeConfig{opts: fastOptions()})
	w := e.publishedWaiter(b)
	files := make(map[string]string, 10_000)
	body := strings.Repeat("x", 4096)
	for i := range 10_000 {
		files[fmt.Sprintf("dir%02d/file%06d.bin", i%50, i)] = fmt.Sprintf("%06d", i) + body[6:]
	}
	var locs, digests [2]string
	for i := range locs {
		locs[i], digests[i] = e.bundle("weather.tomorrow", files)
	}
	publish := func(i int) time.Duration {
		id := events.NewEventID()
		ch := w.expect(id)
		start := time.Now()
		ev := events.BundleReady{ID: id, PipelineID: "weather.daily", Bundle: locs[i%2], ManifestDigest: digests[i%2], AllowOlder: true}
		if _, _, err := e.pub.AnnounceAsOperator(e.ctx, ev); err != nil {
			b.Fatal(err)
		}
		select {
		case r := <-ch:
			if want := 10_000 * (1 - min(i, 1)); r.Type != events.TypePublished || r.Written != want {
				b.Fatalf("event %d: %s written %d, want %d (%s)", i, r.Type, r.Written, want, r.Message)
			}
		case <-time.After(time.Minute):
			b.Fatalf("event %d: no result", i)
		}
		return time.Since(start)
	}
	publish(0)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		lat = append(lat, publish(i))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkThroughput measures events/s: b.N events (run with
// -benchtime=500x) announced up front, spread over pipelines with one
// destination root each, every event writing one file. workers=0 is the
// consumer's default.
func BenchmarkThroughput(b *testing.B) {
	if testing.Short() {
		b.Skip("measurement")
	}
	// serveLock: the lease serve takes (the KV lease and the lock object
	// in the root, lease.Both), not the KV lease alone.
	// noHandOver: every publication acquires and releases the lease
	// (service.Service.HandOver off).
	for _, c := range []struct {
		roots, nodes, workers int
		serveLock, noHandOver bool
	}{
		{50, 1, 4, false, false}, {16, 1, 0, false, false}, {50, 1, 0, false, false}, {50, 3, 0, false, false},
		{16, 1, 0, true, false}, {16, 1, 16, false, false}, {50, 1, 16, false, false}, {16, 1, 4, false, false},
		{16, 1, 4, true, false}, {16, 1, 32, false, false}, {16, 1, 32, true, false}, {50, 1, 32, false, false},
		{16, 1, 32, false, true}, {16, 1, 32, true, true}, {16, 1, 0, false, true}, {16, 1, 0, true, true},
		{50, 1, 0, true, false}, {16, 1, 16, true, false}, {50, 1, 64, true, false}, {16, 1, 64, true, false}, {50, 1, 16, true, false},
	} {
		name := fmt.Sprintf("roots=%d/consumers=%d/workers=%d", c.roots, c.nodes, c.workers)
		if c.serveLock {
			name += "/lock=serve"
		}
		if c.noHandOver {
			name += "/handover=off"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, rootsYAML(c.roots), false)
			w := e.publishedWaiter(b)
			chans := make([]chan events.Result, b.N)
			for i := range b.N {
				loc, digest := e.bundle(fmt.Sprintf("src.s%d", i%c.roots), map[string]string{"report.md": fmt.Sprintf("# run %d\n", i)})
				id := events.NewEventID()
				chans[i] = w.expect(id)
				e.announce(events.BundleReady{ID: id, PipelineID: fmt.Sprintf("p%d", i%c.roots), Bundle: loc, ManifestDigest: digest})
			}
			opts := fastOptions()
			opts.Workers = c.workers
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime(b)
			acquired := &acquisitions{}
			var nodes []*node
			for i := range c.nodes {
				nc := nodeConfig{name: fmt.Sprintf("node%d", i), opts: opts}
				if c.noHandOver {
					nc.handOver = service.HandOver{Max: -1}
				}
				nc.wrapLocker = func(kv lease.Locker) lease.Locker {
					if c.serveLock {
						kv = lease.Both(kv, lease.NewStorageLocker(nc.name, 2*time.Second))
					}
					return acquired.count(kv)
				}
				nodes = append(nodes, e.start(nc))
			}
			superseded := 0
			for i, ch := range chans {
				select {
				case r := <-ch:
					// Two events for one root in flight at once may take
					// its lease in either order: the older one is then
					// superseded (newest wins), correct and counted.
					if r.Type == events.TypeSuperseded {
						superseded++
					} else if r.Type != events.TypePublished {
						b.Fatalf("event %d: %s (%s)", i, r.Type, r.Message)
					}
				case <-time.After(60 * time.Second):
					b.Fatalf("event %d: no result", i)
				}
			}
			elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
			b.StopTimer()
			// Messages each consumer's connection sent and received:
			// deliveries, pull requests, acks, lease and result publishes
			// and their replies.
			var msgs uint64
			for _, n := range nodes {
				st := n.nc.Stats()
				msgs += st.InMsgs + st.OutMsgs
			}
			b.ReportMetric(float64(msgs)/float64(b.N), "nats-msgs/event")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(superseded), "superseded")
			// Publications that took a lease another one handed them
			// (service.HandOver) instead of acquiring it.
			b.ReportMetric(float64(b.N-int(acquired.n.Load())), "handed-over")
			// CPU time (user + system) of the whole process, NATS server
			// included: on a shared machine it varies far less than the rate.
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/event")
		})
	}
}

// acquisitions counts the lease acquisitions that succeeded, over every
// locker it wraps.
type acquisitions struct{ n atomic.Int64 }

func (a *acquisitions) count(l lease.Locker) lease.Locker { return countedLocker{l, a} }

type countedLocker struct {
	lease.Locker
	a *acquisitions
}

func (c countedLocker) Acquire(ctx context.Context, root lease.Root) (lease.Lease, error) {
	l, err := c.Locker.Acquire(ctx, root)
	if err == nil {
		c.a.n.Add(1)
	}
	return l, err
}

// BenchmarkRate measures announce → published latency at a steady 100
// events/s over 16 roots (run with -benchtime=1000x), default options.
func BenchmarkRate(b *testing.B) {
	if testing.Short() {
		b.Skip("measurement")
	}
	const roots, rate = 16, 100
	e := newEnv(b, rootsYAML(roots), false)
	w := e.publishedWaiter(b)
	type src struct{ loc, digest string }
	srcs := make([]src, b.N)
	for i := range srcs {
		srcs[i].loc, srcs[i].digest = e.bundle(fmt.Sprintf("src.s%d", i%roots), map[string]string{"report.md": fmt.Sprintf("# run %d\n", i)})
	}
	opts := fastOptions()
	opts.Workers = 0
	e.start(nodeConfig{opts: opts})
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		id := events.NewEventID()
		ch := w.expect(id)
		start := time.Now()
		e.announce(events.BundleReady{ID: id, PipelineID: fmt.Sprintf("p%d", i%roots), Bundle: srcs[i].loc, ManifestDigest: srcs[i].digest})
		wg.Go(func() {
			select {
			case r := <-ch:
				lat[i] = time.Since(start)
				if r.Type != events.TypePublished {
					b.Errorf("event %d: %s (%s)", i, r.Type, r.Message)
				}
			case <-time.After(30 * time.Second):
				b.Errorf("event %d: no result", i)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportLatencies(b, lat)
}

// rootsYAML configures n pipelines p<i>, each publishing to its own local
// root d<i> (replacement).
func rootsYAML(n int) string {
	var yaml strings.Builder
	yaml.WriteString("pipelines:\n")
	for i := range n {
		fmt.Fprintf(&yaml, "  - {id: p%d, destinations: [d%d]}\n", i, i)
	}
	yaml.WriteString("destinations:\n")
	for i := range n {
		fmt.Fprintf(&yaml, "  - {id: d%d, backend: local, path: \"@r%d@\", workflow: replacement}\n", i, i)
	}
	return yaml.String()
}

// BenchmarkEngineDirect is BenchmarkLatency's work without the consumer:
// Runner.Publish (lease, recover, plan, durable writes, commit) called
// directly, for comparison (run with -benchtime=200x).
func BenchmarkEngineDirect(b *testing.B) {
	if testing.Short() {
		b.Skip("measurement")
	}
	e := newEnv(b, archiveYAML, false)
	r := &service.Service{
		Engine: &engine.Engine{Version: "test"},
		Config: e.cfg,
		Stores: &testStores{open: stores.New(e.cfg)},
		Locker: lease.NewKV(e.js, e.streams.Leases, "bench", 2*time.Second),
	}
	d, _ := e.cfg.Destination("archive")
	type src struct{ loc, digest string }
	srcs := make([]src, b.N)
	for i := range srcs {
		srcs[i].loc, srcs[i].digest = e.bundle("weather.tomorrow", map[string]string{"report.md": fmt.Sprintf("# run %d\n", i)})
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		req := service.Request{PipelineID: "weather.daily", Bundle: srcs[i].loc, ManifestDigest: srcs[i].digest, BundleEventID: events.NewEventID()}
		bd, err := r.OpenBundle(e.ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		res, err := r.PublishTo(e.ctx, req, bd, d)
		if err != nil || len(res.Written) != 1 {
			b.Fatalf("event %d: %v (written %d)", i, err, len(res.Written))
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	d, err := testenv.CPUTime()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
