// Package flowlog is felix's flow log: the policy verdicts the kernel reports through NFLOG
// (the rules felix/policy renders when flow logs are on) joined with conntrack's connection
// events, aggregated per flush interval into apis/flow records, and served as a flow.Source.
//
// The calculation (Joiner, Aggregator) knows nothing of netlink; the readers (nflog.go,
// conntrack.go) feed it, and Capture runs them while flow logs are on.
package flowlog

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/apis/flow"
)

// Defaults of the FelixConfiguration's flowLogs.
const (
	DefaultFlushInterval = 5 * time.Second
	DefaultMaxRecords    = 10000
	// subscriberBuffer is the records a follower may lag behind before it loses some.
	subscriberBuffer = 1024
)

// Drop reasons, the label of the dropped-records counter.
const (
	DropCap         = "cap"
	DropSubscriber  = "subscriber"
	DropConnections = "connections"
)

// Counters are the aggregator's metrics; nil fields count nothing.
type Counters struct {
	Records prometheus.Counter
	Dropped *prometheus.CounterVec
	// Connections counts the connections recorded, by verdict; cap or not, they happened.
	Connections *prometheus.CounterVec
}

func (c Counters) drop(reason string, n int) {
	if c.Dropped != nil && n > 0 {
		c.Dropped.WithLabelValues(reason).Add(float64(n))
	}
}

// Key is what a record aggregates over.
type Key struct {
	Src, Dst  flow.Endpoint
	Protocol  string
	DstPort   uint16
	Verdict   flow.Verdict
	Direction string
	Rule      string
}

// Aggregator sums flows per Key over an interval, keeps the closed records in a ring, and hands
// each closed record to its followers. It is a flow.Source and safe for concurrent use. Its
// memory is bounded by maxRecords: that many open records, that many closed ones, and a fixed
// buffer per follower.
type Aggregator struct {
	node     string
	counters Counters

	mu    sync.Mutex
	max   int
	start time.Time
	open  map[Key]*flow.Record
	// ring holds the closed records, oldest at head.
	ring []flow.Record
	head int
	full bool
	subs map[*subscriber]struct{}
}

type subscriber struct {
	f  flow.Filter
	ch chan flow.Record
}

// NewAggregator is an aggregator of node's flows keeping at most maxRecords records (0: the
// default) open and as many closed.
func NewAggregator(node string, maxRecords int, c Counters) *Aggregator {
	if maxRecords <= 0 {
		maxRecords = DefaultMaxRecords
	}
	return &Aggregator{
		node: node, counters: c, max: maxRecords,
		open: map[Key]*flow.Record{}, ring: make([]flow.Record, maxRecords),
		subs: map[*subscriber]struct{}{},
	}
}

// SetMaxRecords changes the cap; the closed records kept are the newest that fit.
func (a *Aggregator) SetMaxRecords(n int) {
	if n <= 0 {
		n = DefaultMaxRecords
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n == a.max {
		return
	}
	kept := a.closedLocked()
	if len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	a.max, a.ring, a.head = n, make([]flow.Record, n), 0
	copy(a.ring, kept)
	a.full = len(kept) == n
	if !a.full {
		a.head = len(kept)
	}
}

// Add counts connections, packets and bytes for k in the open interval (at now). A new key
// beyond the cap is dropped and counted.
func (a *Aggregator) Add(now time.Time, k Key, conns, packets, bytes uint64) {
	if c := a.counters.Connections; c != nil && conns > 0 {
		c.WithLabelValues(string(k.Verdict)).Add(float64(conns))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.start.IsZero() {
		a.start = now
	}
	r := a.open[k]
	if r == nil {
		if len(a.open) >= a.max {
			a.counters.drop(DropCap, 1)
			return
		}
		r = &flow.Record{
			Node: a.node, Src: k.Src, Dst: k.Dst, Protocol: k.Protocol, DstPort: k.DstPort,
			Verdict: k.Verdict, Direction: k.Direction, Rule: k.Rule,
		}
		a.open[k] = r
	}
	r.Connections += conns
	r.Packets += packets
	r.Bytes += bytes
}

// Close ends the open interval at now: its records move to the ring, and to every follower
// whose filter they pass (a follower whose buffer is full loses the record, counted).
func (a *Aggregator) Close(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	start := a.start
	a.start = now
	if len(a.open) == 0 {
		return
	}
	recs := make([]flow.Record, 0, len(a.open))
	for _, r := range a.open {
		r.Start, r.End = start, now
		recs = append(recs, *r)
	}
	clear(a.open)
	sortRecords(recs)
	if a.counters.Records != nil {
		a.counters.Records.Add(float64(len(recs)))
	}
	for _, r := range recs {
		a.ring[a.head] = r
		a.head++
		if a.head == len(a.ring) {
			a.head, a.full = 0, true
		}
		for s := range a.subs {
			if !s.f.Match(r) {
				continue
			}
			select {
			case s.ch <- r:
			default:
				a.counters.drop(DropSubscriber, 1)
			}
		}
	}
}

// closedLocked is the ring's records, oldest first.
func (a *Aggregator) closedLocked() []flow.Record {
	if !a.full {
		return append([]flow.Record(nil), a.ring[:a.head]...)
	}
	return append(append([]flow.Record(nil), a.ring[a.head:]...), a.ring[:a.head]...)
}

// Flows implements flow.Source.
func (a *Aggregator) Flows(ctx context.Context, f flow.Filter, follow bool, send func(flow.Record) error) error {
	a.mu.Lock()
	var kept []flow.Record
	for _, r := range a.closedLocked() {
		if f.Match(r) {
			kept = append(kept, r)
		}
	}
	var s *subscriber
	if follow {
		// Registered with the snapshot taken, so no record is missed or sent twice.
		s = &subscriber{f: f, ch: make(chan flow.Record, subscriberBuffer)}
		a.subs[s] = struct{}{}
	}
	a.mu.Unlock()
	var live <-chan flow.Record
	if s != nil {
		live = s.ch
		defer func() {
			a.mu.Lock()
			delete(a.subs, s)
			a.mu.Unlock()
		}()
	}
	return flow.Stream(ctx, f, kept, follow, live, send)
}

var _ flow.Source = (*Aggregator)(nil)
