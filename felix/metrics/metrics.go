// Package metrics holds felix's Prometheus metrics and its liveness/readiness handler.
package metrics

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are felix's collectors, registered on one registry.
type Metrics struct {
	Registry           *prometheus.Registry
	RoutesProgrammed   *prometheus.GaugeVec
	RouteFailures      prometheus.Gauge
	ApplyDuration      prometheus.Histogram
	ApplyLag           prometheus.Histogram
	ResyncDuration     prometheus.Histogram
	NetlinkErrors      prometheus.Counter
	UnresolvedNextHops prometheus.Gauge
	LastApply          prometheus.Gauge
	ApplyErrors        prometheus.Counter
	Policies           *prometheus.GaugeVec
	TunnelErrors       prometheus.Counter
	WriteErrors        prometheus.Counter
	SysctlErrors       prometheus.Counter
	VXLANPeers         *prometheus.GaugeVec
	VXLANErrors        prometheus.Counter
	VXLANNoRoutes      prometheus.Gauge
	FlowRecords        prometheus.Counter
	FlowRecordsDropped *prometheus.CounterVec
	FlowConnections    *prometheus.CounterVec
}

// Buckets are felix's latency buckets, in seconds; the datastore's lag has the same, so that the
// two add up to an event's way from the watch to the kernel.
var Buckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// New creates the collectors and registers them on reg (a fresh registry when nil).
func New(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	buckets := Buckets
	m := &Metrics{
		Registry: reg,
		RoutesProgrammed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tabby_felix_routes_programmed",
			Help: "Desired routes present in the kernel, by kind (workload, blackhole, remote, tunnel, vxlan)."}, []string{"kind"}),
		RouteFailures: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_felix_route_failures",
			Help: "Desired routes felix could not program at the last apply."}),
		ApplyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabby_felix_apply_duration_seconds",
			Help: "Time of one dataplane apply.", Buckets: buckets}),
		ApplyLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabby_felix_apply_lag_seconds",
			Help:    "Time from a change of felix's inputs (a message: the datastore's or the BGP speaker's; a resync asked for) to the end of the apply that holds it, per apply, from its oldest change.",
			Buckets: buckets}),
		ResyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tabby_felix_resync_duration_seconds",
			Help: "Time of one full resync against the kernel.", Buckets: buckets}),
		NetlinkErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_netlink_errors_total",
			Help: "Failed netlink calls, retried ones included."}),
		UnresolvedNextHops: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_felix_unresolved_next_hops",
			Help: "BGP routes whose next hop could not be resolved: not programmed, or multipath routes programmed without that next hop."}),
		LastApply: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_felix_last_successful_apply_timestamp_seconds",
			Help: "Unix time of the last apply that completed without error."}),
		ApplyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_apply_errors_total",
			Help: "Dataplane applies that ended with an error (a route, iptables rule, ipset, tunnel or sysctl not programmed); felix retries them."}),
		Policies: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tabby_felix_policies",
			Help: "Policies felix holds, cluster-wide, by kind (NetworkPolicy, AdminNetworkPolicy, BaselineAdminNetworkPolicy, ClusterNetworkPolicy)."}, []string{"kind"}),
		TunnelErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_tunnel_errors_total",
			Help: "Failures to set up tunl0 (e.g. a kernel without ipip)."}),
		WriteErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_iptables_ipsets_errors_total",
			Help: "Failed writes of iptables rules or ipsets (NAT outgoing); each is retried about a second later."}),
		SysctlErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_sysctl_errors_total",
			Help: "Failures to write a sysctl."}),
		VXLANPeers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tabby_felix_vxlan_peers",
			Help: "Other nodes' VTEPs whose neighbour and FDB entries are programmed on this node's VXLAN device, by family."}, []string{"family"}),
		VXLANErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_vxlan_errors_total",
			Help: "Passes in which a VXLAN device or some of its neighbour and FDB entries could not be programmed; each is retried about a second later."}),
		VXLANNoRoutes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_felix_vxlan_unresolved_routes",
			Help: "Blocks and borrowed addresses of VXLAN pools on other nodes without a route (no VTEP on either side, a VTEP conflict, an unknown node)."}),
		FlowRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_flow_records_total",
			Help: "Flow log records closed (one per source, destination, port, protocol, verdict and rule per flush interval)."}),
		FlowRecordsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_felix_flow_records_dropped_total",
			Help: "Flow log records or their counts lost, by reason: cap (the interval's records reached flowLogs.maxRecords), subscriber (a reader too slow to keep up), connections (more live connections than felix follows)."}, []string{"reason"}),
		FlowConnections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tabby_felix_flow_connections_total",
			Help: "Connections the flow log recorded, by policy verdict (allow, deny); a denied connection's retried first packet counts again."}, []string{"verdict"}),
	}
	reg.MustRegister(m.RoutesProgrammed, m.RouteFailures, m.ApplyDuration, m.ApplyLag, m.ResyncDuration, m.NetlinkErrors,
		m.UnresolvedNextHops, m.LastApply, m.ApplyErrors, m.Policies, m.TunnelErrors, m.WriteErrors, m.SysctlErrors, m.VXLANPeers, m.VXLANErrors, m.VXLANNoRoutes,
		m.FlowRecords, m.FlowRecordsDropped, m.FlowConnections)
	return m
}

// Handler serves the registry in the Prometheus format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Health backs /livez and /readyz.
type Health struct {
	ready    atomic.Bool
	lastLoop atomic.Int64 // unix nanos of the loop's last turn
	// Stall is how long the loop may go without a turn before /livez fails.
	Stall time.Duration
}

// SetReady marks felix ready (after its first successful apply).
func (h *Health) SetReady() { h.ready.Store(true) }

// Ready reports readiness.
func (h *Health) Ready() bool { return h.ready.Load() }

// Beat records a turn of the event loop.
func (h *Health) Beat(now time.Time) { h.lastLoop.Store(now.UnixNano()) }

// Handler serves /livez (the loop turns) and /readyz (first apply done).
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		last := h.lastLoop.Load()
		if h.Stall > 0 && last != 0 && time.Since(time.Unix(0, last)) > h.Stall {
			http.Error(w, "felix loop stalled", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !h.Ready() {
			http.Error(w, "felix has not applied the dataplane yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
