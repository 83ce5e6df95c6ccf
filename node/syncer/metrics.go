package syncer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	felixmetrics "github.com/tabbynet/tabby/felix/metrics"
)

// Metrics say what the datastore costs this node: the watch events it receives, by resource,
// the time a pass takes from the caches to the agents (its change stream), and how long an event
// waited for it.
type Metrics struct {
	events *prometheus.CounterVec
	pass   prometheus.Histogram
	lag    prometheus.Histogram
}

// NewMetrics registers the syncer's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_datastore_events_total",
			Help: "Watch events received from the API server, by resource."}, []string{"resource"}),
		// The name says snapshot: dashboards read it by that name.
		pass: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabby_datastore_snapshot_seconds",
			Help:    "Time of one pass over the datastore's changes: read from the caches and handed to felix and BGP as messages.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabby_datastore_lag_seconds",
			Help:    "Time from a watch event reaching tabby-node to felix and BGP being handed the pass that holds it, per pass, from its oldest event.",
			Buckets: felixmetrics.Buckets}),
	}
	reg.MustRegister(m.events, m.pass, m.lag)
	return m
}

// event counts one watch event of resource; a nil Metrics counts nothing.
func (m *Metrics) event(resource string) {
	if m != nil {
		m.events.WithLabelValues(resource).Inc()
	}
}

// observePass records a pass handed to the agents at end, begun at start, whose oldest event
// arrived at since (zero: none, the first pass's).
func (m *Metrics) observePass(since, start, end time.Time) {
	if m == nil {
		return
	}
	m.pass.Observe(end.Sub(start).Seconds())
	if !since.IsZero() {
		m.lag.Observe(end.Sub(since).Seconds())
	}
}
