package bird

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/bird/speaker"
)

// metrics reads the agent's state at scrape time: no counters to keep in step.
type metrics struct {
	b          *Bird
	sessions   *prometheus.Desc
	advertised *prometheus.Desc
	received   *prometheus.Desc
	accepted   *prometheus.Desc
	sent       *prometheus.Desc
	learned    *prometheus.Desc
	multipath  *prometheus.Desc
	sinceLast  *prometheus.Desc
	reconciles *prometheus.Desc
	bfdUp      *prometheus.Desc
	bfdDowns   *prometheus.Desc
	services   *prometheus.Desc
}

func newMetrics(b *Bird) *metrics {
	return &metrics{
		b:          b,
		sessions:   prometheus.NewDesc("tabby_bgp_sessions", "BGP sessions by state and type.", []string{"state", "type"}, nil),
		advertised: prometheus.NewDesc("tabby_bgp_routes_advertised", "Prefixes this node advertises (its blocks and borrowed addresses).", nil, nil),
		received:   prometheus.NewDesc("tabby_bgp_routes_received", "Prefixes each peer sent, before the import policy.", []string{"peer"}, nil),
		accepted:   prometheus.NewDesc("tabby_bgp_routes_accepted", "Prefixes of each peer the import policy accepted.", []string{"peer"}, nil),
		sent:       prometheus.NewDesc("tabby_bgp_routes_sent", "Prefixes sent to each peer and not withdrawn since.", []string{"peer"}, nil),
		learned:    prometheus.NewDesc("tabby_bgp_routes_learned", "Best paths learned from peers and handed to the dataplane.", nil, nil),
		multipath:  prometheus.NewDesc("tabby_bgp_routes_multipath", "Learned routes handed to the dataplane over several equal-cost paths (ECMP).", nil, nil),
		sinceLast:  prometheus.NewDesc("tabby_bgp_seconds_since_last_update", "Seconds since the last best-path change (-1: none yet).", nil, nil),
		bfdUp:      prometheus.NewDesc("tabby_bgp_bfd_up", "1 when the BFD session with the peer is up, 0 otherwise; only sessions with BFD.", []string{"peer"}, nil),
		bfdDowns:   prometheus.NewDesc("tabby_bgp_bfd_down_total", "Times BFD declared the peer down (its session and routes went with it).", []string{"peer"}, nil),
		services:   prometheus.NewDesc("tabby_bgp_service_routes", "Host routes (/32, /128) this node announces for Services' addresses (LoadBalancer, and Local Services' cluster and external IPs).", nil, nil),
		reconciles: prometheus.NewDesc("tabby_bgp_reconciles_total", "Passes that brought the BGP speaker in line with the datastore (each runs only the reconcilers of what changed).", nil, nil),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.sessions
	ch <- m.advertised
	ch <- m.received
	ch <- m.accepted
	ch <- m.sent
	ch <- m.learned
	ch <- m.multipath
	ch <- m.sinceLast
	ch <- m.reconciles
	ch <- m.bfdUp
	ch <- m.bfdDowns
	ch <- m.services
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(m.reconciles, prometheus.CounterValue, float64(m.b.reconciles.Load()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := m.b.Status(ctx)
	if err != nil {
		m.b.log.Warn("BGP metrics", "error", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(m.services, prometheus.GaugeValue, float64(r.ServiceRoutes))
	type key struct{ state, typ string }
	counts := map[key]int{}
	for _, p := range r.Peers {
		counts[key{p.State, p.Type}]++
		ch <- prometheus.MustNewConstMetric(m.received, prometheus.GaugeValue, float64(p.RoutesReceived), p.Address)
		ch <- prometheus.MustNewConstMetric(m.accepted, prometheus.GaugeValue, float64(p.RoutesAccepted), p.Address)
		ch <- prometheus.MustNewConstMetric(m.sent, prometheus.GaugeValue, float64(p.RoutesSent), p.Address)
		if p.BFD != "" {
			up := 0.0
			if p.BFD == speaker.BFDUp {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(m.bfdUp, prometheus.GaugeValue, up, p.Address)
			ch <- prometheus.MustNewConstMetric(m.bfdDowns, prometheus.CounterValue, float64(p.BFDDowns), p.Address)
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(m.sessions, prometheus.GaugeValue, float64(n), k.state, k.typ)
	}
	ch <- prometheus.MustNewConstMetric(m.advertised, prometheus.GaugeValue, float64(r.RoutesAdvertised))
	ch <- prometheus.MustNewConstMetric(m.learned, prometheus.GaugeValue, float64(r.RoutesLearned))
	ch <- prometheus.MustNewConstMetric(m.multipath, prometheus.GaugeValue, float64(r.RoutesMultipath))
	m.b.mu.Lock()
	last := m.b.lastUpdate
	m.b.mu.Unlock()
	since := -1.0
	if !last.IsZero() {
		since = time.Since(last).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(m.sinceLast, prometheus.GaugeValue, since)
}
