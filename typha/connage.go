package typha

import (
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connAges closes each agent connection at a random age between age and twice that. An agent
// then dials a replica at random again and resumes its watches there at its resourceVersion,
// without a list: after a rolling update, which leaves every agent on the replica that was
// replaced last, the agents spread over the replicas again within two ages.
type connAges struct {
	age    time.Duration
	open   prometheus.Gauge
	aged   prometheus.Counter
	mu     sync.Mutex
	timers map[net.Conn]*time.Timer
}

func newConnAges(age time.Duration, reg prometheus.Registerer) *connAges {
	a := &connAges{age: age, timers: map[net.Conn]*time.Timer{},
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_typha_connections",
			Help: "Open connections of agents."}),
		aged: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_typha_connections_aged_total",
			Help: "Agent connections closed at their age (--max-connection-age), for the agents to spread over the replicas."}),
	}
	reg.MustRegister(a.open, a.aged)
	return a
}

// state is the server's ConnState hook.
func (a *connAges) state(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		a.open.Inc()
		if a.age <= 0 {
			return
		}
		t := time.AfterFunc(a.age+rand.N(a.age), func() {
			a.aged.Inc()
			_ = c.Close()
		})
		a.mu.Lock()
		a.timers[c] = t
		a.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		a.open.Dec()
		a.mu.Lock()
		if t, ok := a.timers[c]; ok {
			t.Stop()
			delete(a.timers, c)
		}
		a.mu.Unlock()
	}
}
