// Package metrics is serve's Prometheus instrumentation: a registry of its
// own (no global state) with the Go and process collectors, the consumer's
// Observer, the lease-wait hook and a collector of the durable consumer's
// backlog. Labels are bounded: destination ids come from the
// configuration, outcomes, actions and reasons from fixed sets; paths and
// event ids never become labels.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/events"
)

// Metrics holds serve's metrics. It implements consumer.Observer.
type Metrics struct {
	reg *prometheus.Registry

	publications *prometheus.CounterVec
	failures     *prometheus.CounterVec
	retries      *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	outputs      *prometheus.CounterVec
	bytes        *prometheus.CounterVec
	lastSuccess  *prometheus.GaugeVec
	leaseWait    prometheus.Histogram
	leasesLost   prometheus.Counter
	redeliveries prometheus.Counter
	inFlight     prometheus.Gauge
	recreated    prometheus.Counter
	notify       *notifyMetrics // nil without notify targets
}

var _ consumer.Observer = (*Metrics)(nil)

// actionUnchanged counts outputs a publication kept as they were.
const actionUnchanged = "unchanged"

// New registers every metric. destinations (the configured ids) get their
// counters at zero from the start, so that rates and alerts work before
// the first event; distributor_failures_total starts at zero for every
// destination and reason, and for "" (a failure of a whole event) too, so
// that increase() sees the first failure of each.
func New(destinations []string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		publications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distributor_publications_total",
			Help: "Publications reported, by destination and outcome (published, superseded, collision, failed).",
		}, []string{"destination", "outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distributor_failures_total",
			Help: "Failed publications reported, by destination and reason code.",
		}, []string{"destination", "reason"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distributor_retries_total",
			Help: "Transient publication failures that are retried with back-off, by destination.",
		}, []string{"destination"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "distributor_publication_duration_seconds",
			Help:    "How long one publication to a destination ran, lease wait included.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"destination"}),
		outputs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distributor_outputs_total",
			Help: "Outputs handled by publications, by destination and action (written, updated, deleted, unchanged).",
		}, []string{"destination", "action"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "distributor_written_bytes_total",
			Help: "Bytes of outputs written, by destination.",
		}, []string{"destination"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "distributor_last_success_timestamp_seconds",
			Help: "Unix time of the last publication reported published, by destination.",
		}, []string{"destination"}),
		leaseWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "distributor_lease_wait_seconds",
			Help:    "How long taking a destination root's lease took, waiting for another holder included.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30},
		}),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "distributor_leases_lost_total",
			Help: "Publications stopped because their root's lease was lost.",
		}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "distributor_redeliveries_total",
			Help: "Bundle-ready events handled again (delivery attempt above 1).",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "distributor_events_in_flight",
			Help: "Bundle-ready events being handled now.",
		}),
		recreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "distributor_jetstream_recreated_total",
			Help: "Times serve found its durable consumer, a stream or the lease bucket gone from NATS and created them again.",
		}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.publications, m.failures, m.retries, m.duration, m.outputs, m.bytes, m.lastSuccess,
		m.leaseWait, m.leasesLost, m.redeliveries, m.inFlight, m.recreated,
	)

	m.startAtZero(destinations)
	return m
}

// startAtZero creates the labelled series of destinations at zero (see
// New).
func (m *Metrics) startAtZero(destinations []string) {
	// The outcomes of distributor_publications_total and the actions of
	// distributor_outputs_total.
	outcomes := []string{events.TypePublished, events.TypeSuperseded, events.TypeCollision, events.TypeFailed}
	actions := []string{events.ActionWritten, events.ActionUpdated, events.ActionDeleted, actionUnchanged}
	for _, d := range destinations {
		for _, o := range outcomes {
			m.publications.WithLabelValues(d, o)
		}
		for _, a := range actions {
			m.outputs.WithLabelValues(d, a)
		}
		m.bytes.WithLabelValues(d)
		m.retries.WithLabelValues(d)
	}
	for _, d := range append([]string{""}, destinations...) {
		for _, r := range events.Reasons() {
			m.failures.WithLabelValues(d, r)
		}
	}
	m.publications.WithLabelValues("", events.TypeFailed)
}

// Registry is where the metrics are registered (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// EventStarted implements consumer.Observer.
func (m *Metrics) EventStarted(attempt int) {
	m.inFlight.Inc()
	if attempt > 1 {
		m.redeliveries.Inc()
	}
}

// EventDone implements consumer.Observer.
func (m *Metrics) EventDone() { m.inFlight.Dec() }

// Recreated implements consumer.Observer.
func (m *Metrics) Recreated() { m.recreated.Inc() }

// Observe implements consumer.Observer.
func (m *Metrics) Observe(o consumer.Observation) {
	d := o.Destination
	if o.Duration > 0 {
		m.duration.WithLabelValues(d).Observe(o.Duration.Seconds())
	}
	if o.LeaseLost {
		m.leasesLost.Inc()
	}
	res := o.Result
	if n := len(res.Written); n > 0 {
		m.outputs.WithLabelValues(d, events.ActionWritten).Add(float64(n))
		var size int64
		for _, it := range res.Written {
			size += it.Record.Size
		}
		m.bytes.WithLabelValues(d).Add(float64(size))
	}
	if n := len(res.Updated); n > 0 {
		m.outputs.WithLabelValues(d, events.ActionUpdated).Add(float64(n))
	}
	if n := len(res.Deleted); n > 0 {
		m.outputs.WithLabelValues(d, events.ActionDeleted).Add(float64(n))
	}
	if res.Unchanged > 0 {
		m.outputs.WithLabelValues(d, actionUnchanged).Add(float64(res.Unchanged))
	}
	switch o.Type {
	case consumer.Retry:
		m.retries.WithLabelValues(d).Inc()
		return
	case events.TypePublished:
		m.lastSuccess.WithLabelValues(d).SetToCurrentTime()
	case events.TypeFailed:
		m.failures.WithLabelValues(d, o.Reason).Inc()
	}
	m.publications.WithLabelValues(d, o.Type).Inc()
}

// LeaseWaited records one lease acquisition (service.Service.LeaseWaited).
func (m *Metrics) LeaseWaited(d time.Duration) { m.leaseWait.Observe(d.Seconds()) }

// ConsumerInfo returns the durable consumer's backlog: messages not yet
// delivered, and delivered but not acknowledged.
type ConsumerInfo func(ctx context.Context) (pending, ackPending uint64, err error)

// WatchConsumer adds what serve knows of NATS: distributor_nats_connected
// (1 while connected() says so, read at each scrape), and
// distributor_consumer_pending and distributor_consumer_ack_pending, asked
// from the server every `every` in the background (each request bounded by
// timeout) until ctx ends, with distributor_consumer_last_refresh_timestamp_seconds,
// the time of the last answer. A scrape reads what is cached and never
// waits for NATS: during an outage the backlog keeps its last values (a
// backlog alert stays firing) while its timestamp stops moving and
// distributor_nats_connected says why. Before the first answer the three
// are left out.
func (m *Metrics) WatchConsumer(ctx context.Context, info ConsumerInfo, connected func() bool, every, timeout time.Duration) {
	c := &consumerCollector{
		pending: prometheus.NewDesc("distributor_consumer_pending",
			"Bundle-ready events in the stream not yet delivered to the durable consumer, as of the last refresh.", nil, nil),
		ackPending: prometheus.NewDesc("distributor_consumer_ack_pending",
			"Bundle-ready events delivered and not yet acknowledged (being handled or waiting for redelivery), as of the last refresh.", nil, nil),
		refreshed: prometheus.NewDesc("distributor_consumer_last_refresh_timestamp_seconds",
			"Unix time of the last answer of NATS that distributor_consumer_pending and distributor_consumer_ack_pending hold.", nil, nil),
	}
	m.reg.MustRegister(c, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "distributor_nats_connected",
		Help: "1 while serve's connection to NATS is up, 0 while it is down or not yet made.",
	}, func() float64 {
		if connected() {
			return 1
		}
		return 0
	}))
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if connected() { // a request to a server that is gone waits its whole timeout
				c.refresh(ctx, info, timeout)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// consumerCollector serves the consumer's backlog as last asked.
type consumerCollector struct {
	pending, ackPending, refreshed *prometheus.Desc

	mu       sync.Mutex
	known    bool // an answer came
	backlog  [2]uint64
	answered time.Time
}

// refresh asks for the backlog once, within timeout, and keeps an answer.
func (c *consumerCollector) refresh(ctx context.Context, info ConsumerInfo, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending, ack, err := info(ctx)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known, c.backlog, c.answered = true, [2]uint64{pending, ack}, time.Now()
}

func (c *consumerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.ackPending
	ch <- c.refreshed
}

func (c *consumerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	known, backlog, answered := c.known, c.backlog, c.answered
	c.mu.Unlock()
	if !known {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(backlog[0]))
	ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, float64(backlog[1]))
	ch <- prometheus.MustNewConstMetric(c.refreshed, prometheus.GaugeValue, float64(answered.UnixNano())/1e9)
}
