package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
)

func item(path string, size int64) planner.Item {
	return planner.Item{Path: path, Record: catalog.Output{Path: path, Size: size}}
}

// TestObserve: each observation lands in exactly the counters it should,
// with bounded labels only.
func TestObserve(t *testing.T) {
	m := New([]string{"archive", "site"})
	m.EventStarted(1)
	m.EventStarted(2)
	m.EventDone()
	m.Observe(consumer.Observation{Destination: "archive", Type: events.TypePublished, Duration: 1500 * time.Millisecond,
		Result: engine.Result{Written: []planner.Item{item("a", 10), item("b", 5)}, Updated: []planner.Item{item("c", 1)},
			Deleted: []string{"d"}, Unchanged: 4}})
	m.Observe(consumer.Observation{Destination: "archive", Type: consumer.Retry, Duration: time.Second, LeaseLost: true})
	m.Observe(consumer.Observation{Destination: "site", Type: events.TypeFailed, Reason: events.ReasonMaxDeliveries, Duration: time.Second})
	m.Observe(consumer.Observation{Type: events.TypeFailed, Reason: events.ReasonUnknownPipeline})
	m.LeaseWaited(20 * time.Millisecond)
	m.Recreated()

	want := `
# HELP distributor_events_in_flight Bundle-ready events being handled now.
# TYPE distributor_events_in_flight gauge
distributor_events_in_flight 1
# HELP distributor_jetstream_recreated_total Times serve found its durable consumer, a stream or the lease bucket gone from NATS and created them again.
# TYPE distributor_jetstream_recreated_total counter
distributor_jetstream_recreated_total 1
# HELP distributor_leases_lost_total Publications stopped because their root's lease was lost.
# TYPE distributor_leases_lost_total counter
distributor_leases_lost_total 1
# HELP distributor_outputs_total Outputs handled by publications, by destination and action (written, updated, deleted, unchanged).
# TYPE distributor_outputs_total counter
distributor_outputs_total{action="deleted",destination="archive"} 1
distributor_outputs_total{action="deleted",destination="site"} 0
distributor_outputs_total{action="unchanged",destination="archive"} 4
distributor_outputs_total{action="unchanged",destination="site"} 0
distributor_outputs_total{action="updated",destination="archive"} 1
distributor_outputs_total{action="updated",destination="site"} 0
distributor_outputs_total{action="written",destination="archive"} 2
distributor_outputs_total{action="written",destination="site"} 0
# HELP distributor_publications_total Publications reported, by destination and outcome (published, superseded, collision, failed).
# TYPE distributor_publications_total counter
distributor_publications_total{destination="",outcome="failed"} 1
distributor_publications_total{destination="archive",outcome="collision"} 0
distributor_publications_total{destination="archive",outcome="failed"} 0
distributor_publications_total{destination="archive",outcome="published"} 1
distributor_publications_total{destination="archive",outcome="superseded"} 0
distributor_publications_total{destination="site",outcome="collision"} 0
distributor_publications_total{destination="site",outcome="failed"} 1
distributor_publications_total{destination="site",outcome="published"} 0
distributor_publications_total{destination="site",outcome="superseded"} 0
# HELP distributor_redeliveries_total Bundle-ready events handled again (delivery attempt above 1).
# TYPE distributor_redeliveries_total counter
distributor_redeliveries_total 1
# HELP distributor_retries_total Transient publication failures that are retried with back-off, by destination.
# TYPE distributor_retries_total counter
distributor_retries_total{destination="archive"} 1
distributor_retries_total{destination="site"} 0
# HELP distributor_written_bytes_total Bytes of outputs written, by destination.
# TYPE distributor_written_bytes_total counter
distributor_written_bytes_total{destination="archive"} 15
distributor_written_bytes_total{destination="site"} 0
`
	names := []string{"distributor_events_in_flight", "distributor_jetstream_recreated_total", "distributor_leases_lost_total",
		"distributor_outputs_total", "distributor_publications_total", "distributor_redeliveries_total",
		"distributor_retries_total", "distributor_written_bytes_total"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	for _, d := range []string{"", "archive", "site"} {
		for _, r := range events.Reasons() {
			want := 0.0
			if d == "site" && r == events.ReasonMaxDeliveries || d == "" && r == events.ReasonUnknownPipeline {
				want = 1
			}
			if got := testutil.ToFloat64(m.failures.WithLabelValues(d, r)); got != want {
				t.Errorf("distributor_failures_total{destination=%q,reason=%q} = %v, want %v", d, r, got, want)
			}
		}
	}
	if n := testutil.CollectAndCount(m.duration); n != 2 {
		t.Errorf("duration histograms: %d series, want 2 (archive, site)", n)
	}
	if got := testutil.ToFloat64(m.lastSuccess.WithLabelValues("archive")); time.Since(time.Unix(int64(got), 0)) > time.Minute {
		t.Errorf("last success of archive = %v, want about now", got)
	}
	if n := testutil.CollectAndCount(m.lastSuccess); n != 1 {
		t.Errorf("last success: %d series, want 1 (archive only)", n)
	}
	if n := testutil.CollectAndCount(m.leaseWait); n != 1 {
		t.Errorf("lease wait: %d series, want 1", n)
	}
}

// TestConsumerBacklogDuringAnOutage: the backlog is asked from NATS in the
// background; a scrape answers at once with the last values and their
// time, whatever NATS does (a request that hangs, a connection that is
// down), and distributor_nats_connected says whether it is up.
func TestConsumerBacklogDuringAnOutage(t *testing.T) {
	t.Parallel()
	var connected atomic.Bool
	var hang atomic.Bool
	answers := make(chan struct{}, 100)
	info := func(ctx context.Context) (uint64, uint64, error) {
		if hang.Load() {
			<-ctx.Done() // a server that does not answer
			return 0, 0, ctx.Err()
		}
		defer func() { answers <- struct{}{} }()
		return 7, 3, nil
	}
	m := New(nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	// Cancelled before the server closes, which waits for its scrapes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A scrape that waits for NATS waits the refresh's timeout, an hour
	// here; one that reads what is cached answers in milliseconds, which
	// a loaded machine (parallel tests, -race) stretches to a second or
	// more. The client gives up at the bound, so a scrape that waits
	// fails the test instead of hanging it.
	const scrapeBound = 10 * time.Second
	client := &http.Client{Timeout: scrapeBound}
	scrape := func() (string, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatalf("a scrape: %v (want an answer within %s, without waiting for NATS)", err, scrapeBound)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body), time.Since(start)
	}

	m.WatchConsumer(ctx, info, connected.Load, 10*time.Millisecond, time.Hour)
	body, _ := scrape()
	if !strings.Contains(body, "\ndistributor_nats_connected 0\n") || strings.Contains(body, "distributor_consumer_pending") {
		t.Fatalf("before any answer: want connected 0 and no backlog\n%s", body)
	}
	connected.Store(true)
	<-answers
	before := time.Now()
	<-answers // an answer after before
	body, _ = scrape()
	for _, want := range []string{"distributor_nats_connected 1", "distributor_consumer_pending 7", "distributor_consumer_ack_pending 3"} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("connected: /metrics lacks %s", want)
		}
	}
	refreshed := func(body string) float64 {
		t.Helper()
		m := regexp.MustCompile(`\ndistributor_consumer_last_refresh_timestamp_seconds (\S+)\n`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics lacks distributor_consumer_last_refresh_timestamp_seconds\n%s", body)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	if at := refreshed(body); at < float64(before.UnixNano())/1e9-0.001 || at > float64(time.Now().UnixNano())/1e9 {
		t.Errorf("last refresh %f, want after %d", at, before.Unix())
	}

	// NATS hangs (the refresh waits its timeout, here an hour), then the
	// connection drops: every scrape answers at once with the last values.
	hang.Store(true)
	time.Sleep(50 * time.Millisecond)
	body, _ = scrape()
	last := refreshed(body)
	connected.Store(false)
	for range 5 {
		body, took := scrape()
		if took >= scrapeBound {
			t.Errorf("a scrape during the outage took %s, want under %s", took, scrapeBound)
		}
		for _, want := range []string{"distributor_nats_connected 0", "distributor_consumer_pending 7", "distributor_consumer_ack_pending 3"} {
			if !strings.Contains(body, "\n"+want+"\n") {
				t.Errorf("during the outage: /metrics lacks %s", want)
			}
		}
		if at := refreshed(body); at != last {
			t.Errorf("last refresh moved from %f to %f without an answer", last, at)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFailuresStartAtZero: before any failure, /metrics has
// distributor_failures_total at 0 for every configured destination and
// every reason (and for "", a whole event's failure), so that
// increase(...) > 0 fires on the first failure of each.
func TestFailuresStartAtZero(t *testing.T) {
	m := New([]string{"archive", "site"})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"", "archive", "site"} {
		for _, r := range events.Reasons() {
			line := fmt.Sprintf("distributor_failures_total{destination=%q,reason=%q} 0\n", d, r)
			if !strings.Contains(string(body), line) {
				t.Errorf("/metrics has no %q", line)
			}
		}
	}
	if line := `distributor_publications_total{destination="",outcome="failed"} 0` + "\n"; !strings.Contains(string(body), line) {
		t.Errorf("/metrics has no %q", line)
	}
	if n := testutil.CollectAndCount(m.failures); n != 3*len(events.Reasons()) {
		t.Errorf("distributor_failures_total: %d series, want %d", n, 3*len(events.Reasons()))
	}
}
