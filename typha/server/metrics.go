package server

import "github.com/prometheus/client_golang/prometheus"

// Metrics count what tabby-typha serves, by resource. A nil *Metrics counts nothing.
type Metrics struct {
	watches     *prometheus.GaugeVec
	lists       *prometheus.CounterVec
	events      *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	expiredEnds *prometheus.CounterVec
}

// NewMetrics registers the collectors on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		watches: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tabby_typha_watches",
			Help: "Open watches (one per agent and resource)."}, []string{"resource"}),
		lists: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_typha_lists_total",
			Help: "Lists served."}, []string{"resource"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_typha_events_sent_total",
			Help: "Watch events written to agents, initial events included."}, []string{"resource"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_typha_sent_bytes_total",
			Help: "Bytes of watch events written to agents."}, []string{"resource"}),
		expiredEnds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_typha_watches_expired_total",
			Help: "Watches ended with 410: the agent fell behind the log, or tabby-typha listed the API server again."}, []string{"resource"}),
	}
	reg.MustRegister(m.watches, m.lists, m.events, m.bytes, m.expiredEnds)
	return m
}

func (m *Metrics) list(res string) {
	if m != nil {
		m.lists.WithLabelValues(res).Inc()
	}
}

func (m *Metrics) watchStarted(res string) (done func()) {
	if m == nil {
		return func() {}
	}
	g := m.watches.WithLabelValues(res)
	g.Inc()
	return g.Dec
}

func (m *Metrics) sent(res string, events, bytes int) {
	if m != nil {
		m.events.WithLabelValues(res).Add(float64(events))
		m.bytes.WithLabelValues(res).Add(float64(bytes))
	}
}

func (m *Metrics) expired(res string) {
	if m != nil {
		m.expiredEnds.WithLabelValues(res).Inc()
	}
}
