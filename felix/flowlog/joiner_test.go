package flowlog

import (
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tabbynet/tabby/apis/flow"
)

type fakeResolver struct {
	rules map[string]Rule
	pods  map[netip.Addr][2]string
	local map[netip.Addr]bool
}

func (f fakeResolver) Local(ip netip.Addr) bool { return f.local[ip] }

func (f fakeResolver) Rule(p string) (Rule, bool) { r, ok := f.rules[p]; return r, ok }
func (f fakeResolver) Pod(ip netip.Addr) (string, string, bool) {
	p, ok := f.pods[ip]
	return p[0], p[1], ok
}

var (
	client = netip.MustParseAddr("10.244.1.5")
	server = netip.MustParseAddr("10.244.2.7")
	db     = netip.MustParseAddr("10.244.2.9")
	remote = netip.MustParseAddr("203.0.113.9")
	res    = fakeResolver{
		rules: map[string]Rule{
			"tabby-deny":   {Verdict: flow.Deny, Direction: "ingress", Text: "NetworkPolicy demo/deny-db ingress (no rule matched)"},
			"tabby-egress": {Verdict: flow.Allow, Direction: "egress", Text: "NetworkPolicy demo/out egress rule 0 (Allow)"},
			"tabby-web":    {Verdict: flow.Allow, Direction: "ingress", Text: "NetworkPolicy demo/web ingress rule 0 (Allow)"},
		},
		pods: map[netip.Addr][2]string{client: {"demo", "client"}, server: {"demo", "server"}, db: {"demo", "db"}},
		// The joiner runs on client's node; server and db run on another.
		local: map[netip.Addr]bool{client: true},
	}
)

func tcp(src, dst netip.Addr, sport, dport uint16) Tuple {
	return Tuple{Proto: 6, Src: src, Dst: dst, SrcPort: sport, DstPort: dport}
}

func TestJoinerVerdictsAndConnections(t *testing.T) {
	c := counters()
	a := NewAggregator("node-1", 100, c)
	j := NewJoiner(a, res, 100, c)
	t0 := time.Unix(1000, 0)

	// A denied connection: two SYNs, no conntrack entry.
	deny := tcp(client, db, 40000, 5432)
	j.OnPacket(t0, Packet{Tuple: deny, Prefix: "tabby-deny", Len: 60})
	j.OnPacket(t0, Packet{Tuple: deny, Prefix: "tabby-deny", Len: 60})
	// An allowed one logged on both sides: the destination's ingress rule names it.
	web := tcp(client, server, 40001, 80)
	j.OnPacket(t0, Packet{Tuple: web, Prefix: "tabby-egress", Len: 60})
	j.OnPacket(t0, Packet{Tuple: web, Prefix: "tabby-web", Len: 60})
	// One that ends before its verdict was counted.
	short := tcp(client, server, 40003, 80)
	j.OnPacket(t0, Packet{Tuple: short, Prefix: "tabby-web", Len: 60})
	j.OnConn(t0, ConnEvent{Tuple: short, Packets: 4, Bytes: 240})
	// An unknown prefix (another program's NFLOG group member) is ignored.
	j.OnPacket(t0, Packet{Tuple: web, Prefix: "other", Len: 60})

	j.Resolve(t0.Add(joinGrace / 2)) // too early
	if len(j.live) != 0 {
		t.Fatalf("counted before the other side could log: %d", len(j.live))
	}
	j.Resolve(t0.Add(joinGrace))
	j.OnConn(t0.Add(2*time.Second), ConnEvent{Tuple: web, Packets: 10, Bytes: 1060})
	// No rule logged these: no policy, counted at their end; host traffic (no pod) is not.
	j.OnConn(t0.Add(2*time.Second), ConnEvent{Tuple: tcp(client, remote, 40002, 443), Packets: 6, Bytes: 600})
	j.OnConn(t0.Add(2*time.Second), ConnEvent{Tuple: tcp(netip.MustParseAddr("198.51.100.1"), remote, 1, 6443), Packets: 5, Bytes: 5})
	// A pod on another node is the destination's node's to record; one of ours is this node's.
	j.OnConn(t0.Add(2*time.Second), ConnEvent{Tuple: tcp(client, server, 40004, 8080), Packets: 3, Bytes: 180})
	j.OnConn(t0.Add(2*time.Second), ConnEvent{Tuple: tcp(server, client, 40005, 22), Packets: 7, Bytes: 700})
	a.Close(t0.Add(3 * time.Second))

	got := map[string]flow.Record{}
	for _, r := range collect(t, a, flow.Filter{}) {
		got[r.Src.String()+">"+r.Dst.String()] = r
	}
	if len(got) != 4 {
		t.Fatalf("records: %+v", got)
	}
	if d, a := testutil.ToFloat64(c.Connections.WithLabelValues("deny")), testutil.ToFloat64(c.Connections.WithLabelValues("allow")); d != 2 || a != 4 {
		t.Errorf("connections counted: %v denied, %v allowed; want 2 and 4", d, a)
	}
	if r, ok := got["demo/server>demo/client"]; !ok || r.Rule != NoPolicy || r.Connections != 1 || r.Packets != 7 {
		t.Errorf("no policy into a local pod: %+v", r)
	}
	if r := got["demo/client>demo/db"]; r.Verdict != flow.Deny || r.Connections != 2 || r.Packets != 2 || r.Bytes != 120 ||
		r.Rule != "NetworkPolicy demo/deny-db ingress (no rule matched)" || r.Direction != "ingress" || r.DstPort != 5432 || r.Protocol != "TCP" {
		t.Errorf("deny: %+v", r)
	}
	if r := got["demo/client>demo/server"]; r.Verdict != flow.Allow || r.Connections != 2 || r.Packets != 14 || r.Bytes != 1300 ||
		r.Rule != "NetworkPolicy demo/web ingress rule 0 (Allow)" {
		t.Errorf("allow: %+v", r)
	}
	if r := got["demo/client>203.0.113.9"]; r.Verdict != flow.Allow || r.Rule != NoPolicy || r.Connections != 1 || r.Packets != 6 || r.Bytes != 600 {
		t.Errorf("no policy: %+v", r)
	}
	if len(j.live) != 0 || len(j.pending) != 0 {
		t.Errorf("left: %d live, %d pending", len(j.live), len(j.pending))
	}
}

func TestJoinerBounded(t *testing.T) {
	c := counters()
	a := NewAggregator("n", 100, c)
	j := NewJoiner(a, res, 2, c)
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		j.OnPacket(t0, Packet{Tuple: tcp(client, server, uint16(1000+i), 80), Prefix: "tabby-web", Len: 60})
	}
	if len(j.pending) != 2 {
		t.Fatalf("%d verdicts pending, cap 2", len(j.pending))
	}
	if n := testutil.ToFloat64(c.Dropped.WithLabelValues(DropConnections)); n != 3 {
		t.Fatalf("dropped %v", n)
	}
	j.Resolve(t0.Add(joinGrace))
	if len(j.live) != 2 || len(j.pending) != 0 {
		t.Fatalf("%d live, %d pending", len(j.live), len(j.pending))
	}
	j.OnPacket(t0, Packet{Tuple: tcp(client, server, 2000, 80), Prefix: "tabby-web", Len: 60})
	j.Resolve(t0.Add(2 * joinGrace))
	if n := testutil.ToFloat64(c.Dropped.WithLabelValues(DropConnections)); n != 4 || len(j.live) != 2 {
		t.Fatalf("beyond the live cap: dropped %v, %d live", n, len(j.live))
	}
}

func TestParseIP(t *testing.T) {
	v4 := []byte{0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0, 10, 244, 1, 5, 10, 244, 2, 7, 0x9c, 0x40, 0, 80}
	tu, l, ok := ParseIP(v4)
	if !ok || tu != tcp(client, server, 40000, 80) || l != 60 {
		t.Fatalf("v4: %+v %d %v", tu, l, ok)
	}
	v6 := make([]byte, 44)
	v6[0] = 0x60
	v6[5] = 20
	v6[6] = 17
	src, dst := netip.MustParseAddr("fd00:10:244::5").As16(), netip.MustParseAddr("fd00:10:244::7").As16()
	copy(v6[8:], src[:])
	copy(v6[24:], dst[:])
	v6[42], v6[43] = 0, 53
	tu, l, ok = ParseIP(v6)
	if !ok || tu.Proto != 17 || tu.DstPort != 53 || tu.Dst != netip.AddrFrom16(dst) || l != 60 {
		t.Fatalf("v6: %+v %d %v", tu, l, ok)
	}
	if _, _, ok := ParseIP([]byte{0x45, 0}); ok {
		t.Fatal("truncated packet parsed")
	}
}
