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

// ConnEvent is a connection's end (conntrack's DESTROY event), with its packets and bytes
// in both directions (conntrack accounting on).
type ConnEvent struct {
	Tuple   Tuple
	Packets uint64
	Bytes   uint64
}

// Resolver is what the joiner asks of felix: the rule behind a prefix, the pod holding an
// address, whether that pod runs on this node.
type Resolver interface {
	Rule(prefix string) (Rule, bool)
	Pod(ip netip.Addr) (namespace, name string, ok bool)
	Local(ip netip.Addr) bool
}

// joinGrace is how long an allow verdict waits for the other side's: a packet between two pods
// of the node is logged by the source's egress chain and then the destination's ingress chain.
const joinGrace = 500 * time.Millisecond

type verdict struct {
	rule Rule
	len  uint64
	at   time.Time
}

type conn struct {
	key Key
	// firstLen: the first packet's bytes, counted from its NFLOG message.
	firstLen uint64
}

// Joiner joins NFLOG verdicts with conntrack's DESTROY events into an Aggregator's counts. A
// connection is counted when its first packet is logged: a denied one at once, an allowed one
// once the other side had time to log it too, under the destination's ingress rule when both
// did. An allowed connection's packets and bytes are added when conntrack reports its end; a
// connection no rule logged (no policy on either side) is counted then, whole. Conntrack's NEW
// events are not needed, and not subscribed: each costs the kernel and felix as much as a
// DESTROY. Not safe for concurrent use: one goroutine feeds it.
type Joiner struct {
	agg *Aggregator
	res Resolver
	// maxConns bounds the connections followed from their first packet to their end.
	maxConns int
	counters Counters

	pending map[Tuple]verdict // allow verdicts waiting for the other side's
	live    map[Tuple]conn
}

// NewJoiner feeds agg, following at most maxConns live connections.
func NewJoiner(agg *Aggregator, res Resolver, maxConns int, c Counters) *Joiner {
	return &Joiner{
		agg: agg, res: res, maxConns: maxConns, counters: c,
		pending: map[Tuple]verdict{}, live: map[Tuple]conn{},
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

// OnConn takes one connection's end.
func (j *Joiner) OnConn(now time.Time, e ConnEvent) {
	if v, ok := j.pending[e.Tuple]; ok {
		// Ended before its verdict was counted.
		delete(j.pending, e.Tuple)
		j.start(now, e.Tuple, v)
	}
	c, ok := j.live[e.Tuple]
	if !ok {
		k := j.key(e.Tuple, Rule{Verdict: flow.Allow, Text: NoPolicy})
		if !j.recordsUnpoliced(e.Tuple, k) {
			return
		}
		j.agg.Add(now, k, 1, e.Packets, e.Bytes)
		return
	}
	delete(j.live, e.Tuple)
	if pkts, bytes := sub(e.Packets, 1), sub(e.Bytes, c.firstLen); pkts > 0 || bytes > 0 {
		j.agg.Add(now, c.key, 0, pkts, bytes)
	}
}

// recordsUnpoliced tells whether this node records a connection no rule of its logged: every
// node a connection crosses sees its end, so only one speaks for it — the destination pod's node,
// or the source pod's when the destination is no pod. Neither end a pod is the host's own
// traffic.
func (j *Joiner) recordsUnpoliced(t Tuple, k Key) bool {
	if k.Dst.Pod != "" {
		return j.res.Local(t.Dst)
	}
	return k.Src.Pod != "" && j.res.Local(t.Src)
}

// start counts an allowed connection from its first packet and follows it to its end.
func (j *Joiner) start(now time.Time, t Tuple, v verdict) {
	k := j.key(t, v.rule)
	j.agg.Add(now, k, 1, 1, v.len)
	if len(j.live) >= j.maxConns {
		j.counters.drop(DropConnections, 1)
		return
	}
	j.live[t] = conn{key: k, firstLen: v.len}
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Resolve counts the allowed connections whose verdicts had time to arrive from both sides.
// Call it often (a few times a second) and before the aggregator closes an interval.
func (j *Joiner) Resolve(now time.Time) {
	for t, v := range j.pending {
		if now.Sub(v.at) >= joinGrace {
			delete(j.pending, t)
			j.start(now, t, v)
		}
	}
}

// Reset forgets every connection followed (capture stopped: their ends will not be seen).
func (j *Joiner) Reset() {
	clear(j.pending)
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
