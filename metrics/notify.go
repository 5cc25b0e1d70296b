package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// notifyMetrics count the deliveries to notify targets; registered only
// when a destination has one (NotifyTargets).
type notifyMetrics struct {
	total   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// Outcomes of distributor_notify_total (the notify package's).
var notifyOutcomes = []string{"delivered", "retried", "failed"}

// NotifyTargets registers distributor_notify_total and
// distributor_notify_latency_seconds, with every target's series at zero:
// targets maps each destination to its target names.
func (m *Metrics) NotifyTargets(targets map[string][]string) {
	if len(targets) == 0 || m.notify != nil {
		return
	}
	n := &notifyMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distributor_notify_total",
			Help: "Notify delivery attempts, by destination, target and outcome (delivered, retried, failed: given up after max_age).",
		}, []string{"destination", "target", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "distributor_notify_latency_seconds",
			Help:    "From a result's time to its delivered call, by destination and target.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"destination", "target"}),
	}
	m.reg.MustRegister(n.total, n.latency)
	for d, names := range targets {
		for _, t := range names {
			for _, o := range notifyOutcomes {
				n.total.WithLabelValues(d, t, o)
			}
		}
	}
	m.notify = n
}

// NotifyDone counts one delivery attempt (notify.Observer).
func (m *Metrics) NotifyDone(destination, target, outcome string, latency time.Duration) {
	if m.notify == nil {
		return
	}
	m.notify.total.WithLabelValues(destination, target, outcome).Inc()
	if outcome == "delivered" {
		m.notify.latency.WithLabelValues(destination, target).Observe(latency.Seconds())
	}
}
