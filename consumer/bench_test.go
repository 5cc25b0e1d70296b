package consumer_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/stores"
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

// BenchmarkThroughput measures events/s with one and three consumers:
// b.N events (run with -benchtime=500x) announced up front, spread over 50
// pipelines with one destination root each, every event writing one file.
func BenchmarkThroughput(b *testing.B) {
	if testing.Short() {
		b.Skip("measurement")
	}
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("consumers=%d", nodes), func(b *testing.B) {
			const roots = 50
			var yaml strings.Builder
			yaml.WriteString("pipelines:\n")
			for i := range roots {
				fmt.Fprintf(&yaml, "  - {id: p%d, destinations: [d%d]}\n", i, i)
			}
			yaml.WriteString("destinations:\n")
			for i := range roots {
				fmt.Fprintf(&yaml, "  - {id: d%d, backend: local, path: \"@r%d@\", workflow: replacement}\n", i, i)
			}
			e := newEnv(b, yaml.String(), false)
			w := e.publishedWaiter(b)
			chans := make([]chan events.Result, b.N)
			for i := range b.N {
				loc, digest := e.bundle(fmt.Sprintf("src.s%d", i%roots), map[string]string{"report.md": fmt.Sprintf("# run %d\n", i)})
				id := events.NewEventID()
				chans[i] = w.expect(id)
				e.announce(events.BundleReady{ID: id, PipelineID: fmt.Sprintf("p%d", i%roots), Bundle: loc, ManifestDigest: digest})
			}
			b.ResetTimer()
			start := time.Now()
			for i := range nodes {
				e.start(nodeConfig{name: fmt.Sprintf("node%d", i), opts: fastOptions()})
			}
			for i, ch := range chans {
				select {
				case r := <-ch:
					if r.Type != events.TypePublished {
						b.Fatalf("event %d: %s (%s)", i, r.Type, r.Message)
					}
				case <-time.After(60 * time.Second):
					b.Fatalf("event %d: no result", i)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkEngineDirect is BenchmarkLatency's work without the consumer:
// Runner.Publish (lease, recover, plan, durable writes, commit) called
// directly, for comparison (run with -benchtime=200x).
func BenchmarkEngineDirect(b *testing.B) {
	if testing.Short() {
		b.Skip("measurement")
	}
	e := newEnv(b, archiveYAML, false)
	r := &engine.Runner{
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
		req := engine.Request{PipelineID: "weather.daily", Bundle: srcs[i].loc, ManifestDigest: srcs[i].digest, BundleEventID: events.NewEventID()}
		bd, err := r.OpenBundle(e.ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		res, err := r.Publish(e.ctx, req, bd, d)
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
