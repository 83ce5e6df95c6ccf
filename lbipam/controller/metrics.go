package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/lbipam"
)

// Metrics are LoadBalancer IPAM's figures in tabby-node's registry. The pool gauges are the
// leader's view: on the other nodes they are absent.
type Metrics struct {
	inUse, free *prometheus.GaugeVec
	orphans     prometheus.Gauge
	failures    prometheus.Counter
	assigned    prometheus.Counter
	leader      prometheus.Gauge
}

// NewMetrics registers LoadBalancer IPAM's metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		inUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tabby_lbipam_addresses_in_use",
			Help: "LoadBalancer addresses held by Services, per LoadBalancer pool (leader only)."}, []string{"pool"}),
		free: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tabby_lbipam_addresses_free",
			Help: "LoadBalancer addresses no Service holds, per LoadBalancer pool (leader only; counted for disabled pools too)."}, []string{"pool"}),
		orphans: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_lbipam_addresses_without_pool",
			Help: "LoadBalancer addresses Services hold whose pool was deleted: kept by their Services, never handed to another (leader only)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_lbipam_allocation_failures_total",
			Help: "Services refused an address (no free address, a requested address not available, a bad request); each refusal is a Warning event on the Service."}),
		assigned: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_lbipam_assignments_total",
			Help: "Status writes that gave a Service its LoadBalancer addresses."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_lbipam_leader",
			Help: "1 while this node holds the LoadBalancer IPAM Lease and assigns addresses."}),
	}
	reg.MustRegister(m.inUse, m.free, m.orphans, m.failures, m.assigned, m.leader)
	return m
}

// SetLeader records whether this node leads.
func (m *Metrics) SetLeader(on bool) {
	if m == nil {
		return
	}
	if on {
		m.leader.Set(1)
		return
	}
	m.leader.Set(0)
	m.inUse.Reset()
	m.free.Reset()
	m.orphans.Set(0)
}

func (m *Metrics) usage(a *lbipam.Allocator, orphans int) {
	if m == nil {
		return
	}
	m.inUse.Reset()
	m.free.Reset()
	for _, u := range a.Usage() {
		m.inUse.WithLabelValues(u.Pool).Set(float64(u.InUse))
		m.free.WithLabelValues(u.Pool).Set(u.Free)
	}
	m.orphans.Set(float64(orphans))
}

func (m *Metrics) failed() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *Metrics) wrote() {
	if m != nil {
		m.assigned.Inc()
	}
}
