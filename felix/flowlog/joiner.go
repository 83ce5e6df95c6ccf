package flowlog

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/tabbynet/tabby/apis/flow"
)

// Tuple is a connection as the policy chains see its first packet: after kube-proxy's DNAT
// (the backend's address) and before any masquerade (the sender's own address).
type Tuple struct {
	Proto            uint8 // IP protocol number
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// Rule is what a log prefix stands for: the verdict, the side whose policy gave it, and the
// rule's name (felix/policy's FlowRule).
type Rule struct {
	Verdict   flow.Verdict
	Direction string
	Text      string
}

// NoPolicy names a connection no logged rule decided.
const NoPolicy = "no policy"

// Packet is one NFLOG message: the first packet of a new connection and the prefix of the rule
// that logged it.
type Packet struct {
	Tuple  Tuple
	Prefix string
	Len    uint64
}

// ConnEvent is a conntrack event. Packets and Bytes (both directions) are set on Destroy,
// when accounting is on.
type ConnEvent struct {
	Destroy bool
	Tuple   Tuple
	Packets uint64
	Bytes   uint64
}

// Resolver is what the joiner asks of felix: the rule behind a prefix, the pod holding an
// address.
type Resolver interface {
	Rule(prefix string) (Rule, bool)
	Pod(ip netip.Addr) (namespace, name string, ok bool)
}

// joinGrace is how long a verdict waits for its connection's conntrack event and a
// connection for its verdict: the two arrive on different sockets, in either order.
const joinGrace = time.Second

type verdict struct {
	rule Rule
	len  uint64
	at   time.Time
}

type conn struct {
	key  Key
	at   time.Time
	seen bool // its first packet is counted
	// first: the packet and bytes already counted from its NFLOG message.
	firstLen uint64
}

// Joiner joins NFLOG verdicts with conntrack events into an Aggregator's counts. Denied
// connections have no conntrack entry: they are counted from their NFLOG message alone. An
// allowed one is counted when conntrack reports it (the kernel confirmed it), under the rule
// that logged its first packet (the destination's ingress rule when both sides logged one), or
// "no policy". Its packets and bytes are added when it ends. Not safe for concurrent use: one
// goroutine feeds it.
type Joiner struct {
	agg *Aggregator
	res Resolver
	// maxConns bounds the connections followed from their start to their end.
	maxConns int
	counters Counters

	pending map[Tuple]verdict // allow verdicts waiting for their connection
	fresh   map[Tuple]time.Time
	live    map[Tuple]*conn
}

// NewJoiner feeds agg, following at most maxConns live connections.
func NewJoiner(agg *Aggregator, res Resolver, maxConns int, c Counters) *Joiner {
	return &Joiner{
		agg: agg, res: res, maxConns: maxConns, counters: c,
		pending: map[Tuple]verdict{}, fresh: map[Tuple]time.Time{}, live: map[Tuple]*conn{},
	}
}

// OnPacket takes one NFLOG message.
func (j *Joiner) OnPacket(now time.Time, p Packet) {
	r, ok := j.res.Rule(p.Prefix)
	if !ok {
		return
	}
	if r.Verdict == flow.Deny {
		j.agg.Add(now, j.key(p.Tuple, r), 1, 1, p.Len)
		return
	}
	if old, ok := j.pending[p.Tuple]; ok && old.rule.Direction == "ingress" {
		return
	}
	if len(j.pending) >= j.maxConns {
		j.counters.drop(DropConnections, 1)
		return
	}
	j.pending[p.Tuple] = verdict{rule: r, len: p.Len, at: now}
}

// OnConn takes one conntrack event.
func (j *Joiner) OnConn(now time.Time, e ConnEvent) {
	if !e.Destroy {
		if len(j.fresh) >= j.maxConns {
			j.counters.drop(DropConnections, 1)
			return
		}
		j.fresh[e.Tuple] = now
		return
	}
	delete(j.fresh, e.Tuple)
	c := j.live[e.Tuple]
	if c == nil {
		return
	}
	delete(j.live, e.Tuple)
	pkts, bytes := e.Packets, e.Bytes
	if c.seen {
		pkts, bytes = sub(pkts, 1), sub(bytes, c.firstLen)
	}
	if pkts > 0 || bytes > 0 {
		j.agg.Add(now, c.key, 0, pkts, bytes)
	}
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Resolve counts the new connections whose verdict had time to arrive, and forgets the
// verdicts whose connection never came (dropped further on). Call it often (each second) and
// before the aggregator closes an interval.
func (j *Joiner) Resolve(now time.Time) {
	for t, at := range j.fresh {
		if now.Sub(at) < joinGrace {
			continue
		}
		delete(j.fresh, t)
		v, logged := j.pending[t]
		delete(j.pending, t)
		r := Rule{Verdict: flow.Allow, Text: NoPolicy}
		if logged {
			r = v.rule
		}
		k := j.key(t, r)
		if !logged && k.Src.Pod == "" && k.Dst.Pod == "" {
			// Neither end is a pod and no policy spoke: the host's own traffic.
			continue
		}
		c := &conn{key: k, at: at}
		var pkts uint64
		if logged {
			c.seen, c.firstLen, pkts = true, v.len, 1
		}
		j.agg.Add(now, k, 1, pkts, c.firstLen)
		if len(j.live) >= j.maxConns {
			j.counters.drop(DropConnections, 1)
			continue
		}
		j.live[t] = c
	}
	for t, v := range j.pending {
		if now.Sub(v.at) >= 2*joinGrace {
			delete(j.pending, t)
		}
	}
}

// Reset forgets every connection followed (capture stopped: their ends will not be seen).
func (j *Joiner) Reset() {
	clear(j.pending)
	clear(j.fresh)
	clear(j.live)
}

func (j *Joiner) key(t Tuple, r Rule) Key {
	return Key{
		Src: j.endpoint(t.Src), Dst: j.endpoint(t.Dst),
		Protocol: ProtocolName(t.Proto), DstPort: port(t),
		Verdict: r.Verdict, Direction: r.Direction, Rule: r.Text,
	}
}

func (j *Joiner) endpoint(ip netip.Addr) flow.Endpoint {
	e := flow.Endpoint{IP: ip}
	if ns, name, ok := j.res.Pod(ip); ok {
		e.Namespace, e.Pod = ns, name
	}
	return e
}

// port is the destination port for the protocols that have one.
func port(t Tuple) uint16 {
	switch t.Proto {
	case 6, 17, 132:
		return t.DstPort
	}
	return 0
}

// ProtocolName is the record's name of IP protocol p.
func ProtocolName(p uint8) string {
	switch p {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 132:
		return "SCTP"
	case 1:
		return "ICMP"
	case 58:
		return "ICMPv6"
	}
	return "IP/" + strconv.Itoa(int(p))
}

// sortRecords orders an interval's records for the reader: by source, destination, port.
func sortRecords(rs []flow.Record) {
	slices.SortFunc(rs, func(a, b flow.Record) int {
		return cmp.Or(
			a.Src.IP.Compare(b.Src.IP), a.Dst.IP.Compare(b.Dst.IP),
			cmp.Compare(a.DstPort, b.DstPort), cmp.Compare(a.Protocol, b.Protocol),
			cmp.Compare(a.Verdict, b.Verdict), cmp.Compare(a.Rule, b.Rule),
		)
	})
}
