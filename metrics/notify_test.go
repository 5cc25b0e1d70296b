package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Notify metrics exist only with notify targets, start at zero and count
// each outcome; delivered calls feed the latency histogram.
func TestNotifyMetrics(t *testing.T) {
	m := New([]string{"site"})
	m.NotifyDone("site", "webhook", "delivered", time.Second) // no targets: ignored
	if n, _ := testutil.GatherAndCount(m.Registry(), "distributor_notify_total"); n != 0 {
		t.Fatalf("%d notify series without targets, want 0", n)
	}
	m.NotifyTargets(map[string][]string{"site": {"webhook"}})
	m.NotifyDone("site", "webhook", "retried", 0)
	m.NotifyDone("site", "webhook", "delivered", 1500*time.Millisecond)
	want := `
# HELP distributor_notify_total Notify delivery attempts, by destination, target and outcome (delivered, retried, failed: given up after max_age).
# TYPE distributor_notify_total counter
distributor_notify_total{destination="site",outcome="delivered",target="webhook"} 1
distributor_notify_total{destination="site",outcome="failed",target="webhook"} 0
distributor_notify_total{destination="site",outcome="retried",target="webhook"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "distributor_notify_total"); err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(m.Registry(), "distributor_notify_latency_seconds"); n != 1 {
		t.Errorf("latency series %d, want 1", n)
	}
}
