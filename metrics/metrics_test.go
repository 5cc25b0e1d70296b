package metrics

import (
	"strings"
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

	want := `
# HELP distributor_events_in_flight Bundle-ready events being handled now.
# TYPE distributor_events_in_flight gauge
distributor_events_in_flight 1
# HELP distributor_failures_total Failed publications reported, by destination and reason code.
# TYPE distributor_failures_total counter
distributor_failures_total{destination="",reason="unknown_pipeline"} 1
distributor_failures_total{destination="site",reason="max_deliveries"} 1
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
	names := []string{"distributor_events_in_flight", "distributor_failures_total", "distributor_leases_lost_total",
		"distributor_outputs_total", "distributor_publications_total", "distributor_redeliveries_total",
		"distributor_retries_total", "distributor_written_bytes_total"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
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
