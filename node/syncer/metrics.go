package syncer

import "github.com/prometheus/client_golang/prometheus"

// Metrics say what the datastore costs this node: the watch events it receives, by resource,
// and the time a snapshot takes from the caches to the agents.
type Metrics struct {
	events   *prometheus.CounterVec
	snapshot prometheus.Histogram
}

// NewMetrics registers the syncer's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_datastore_events_total",
			Help: "Watch events received from the API server, by resource."}, []string{"resource"}),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabby_datastore_snapshot_seconds",
			Help:    "Time to build a snapshot of the datastore and hand it to felix and BGP.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
	}
	reg.MustRegister(m.events, m.snapshot)
	return m
}

// event counts one watch event of resource; a nil Metrics counts nothing.
func (m *Metrics) event(resource string) {
	if m != nil {
		m.events.WithLabelValues(resource).Inc()
	}
}

func (m *Metrics) observeSnapshot(seconds float64) {
	if m != nil {
		m.snapshot.Observe(seconds)
	}
}
