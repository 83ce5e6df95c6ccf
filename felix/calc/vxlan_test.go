package calc

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func mac(last byte) model.MAC { return model.MAC{0x66, 0x1f, 0, 0, 0, last} }

// vxNode is a node with both families' VTEPs (an IPv6 part only when bgp6 is set).
func vxNode(name, bgp4, vtep4 string, m byte, bgp6, vtep6 string) model.Node {
	n := model.Node{Name: name}
	if bgp4 != "" {
		n.BGPAddress.Set(ipfamily.IPv4, pfx(bgp4))
	}
	if vtep4 != "" {
		n.VXLANTunnelAddr.Set(ipfamily.IPv4, addr(vtep4))
		n.VXLANMAC.Set(ipfamily.IPv4, mac(m))
	}
	if bgp6 != "" {
		n.BGPAddress.Set(ipfamily.IPv6, pfx(bgp6))
	}
	if vtep6 != "" {
		n.VXLANTunnelAddr.Set(ipfamily.IPv6, addr(vtep6))
		n.VXLANMAC.Set(ipfamily.IPv6, mac(m+0x80))
	}
	return n
}

func TestNodeVTEP(t *testing.T) {
	n := vxNode("n2", "198.51.100.12/24", "10.244.1.0", 2, "2001:db8:100::12/64", "")
	if v, ok := NodeVTEP(n, ipfamily.IPv4); !ok || v.Underlay != addr("198.51.100.12") || v.Addr != addr("10.244.1.0") || v.MAC != mac(2) {
		t.Fatalf("IPv4 VTEP %v %v", v, ok)
	}
	if _, ok := NodeVTEP(n, ipfamily.IPv6); ok {
		t.Fatal("an IPv6 VTEP without address")
	}
	multicast := n
	multicast.VXLANMAC.Set(ipfamily.IPv4, model.MAC{0x01, 0, 0x5e, 0, 0, 1})
	noUnderlay := n
	noUnderlay.BGPAddress = ipfamily.Pair[netip.Prefix]{}
	wrongFamily := n
	wrongFamily.VXLANTunnelAddr.Set(ipfamily.IPv4, addr("fd00:10:244::1"))
	for name, bad := range map[string]model.Node{"multicast MAC": multicast, "no underlay": noUnderlay, "IPv6 VTEP as IPv4's": wrongFamily} {
		if _, ok := NodeVTEP(bad, ipfamily.IPv4); ok {
			t.Errorf("%s: a VTEP", name)
		}
	}
}

func TestPeerConflict(t *testing.T) {
	local := VTEP{Node: "n1", Addr: addr("10.244.0.0"), MAC: mac(1)}
	v := VTEP{Node: "n3", Addr: addr("10.244.3.0"), MAC: mac(3)}
	for _, tc := range []struct {
		name    string
		v       VTEP
		holders PeerHolders
		want    string
	}{
		{"alone", v, PeerHolders{Addr: []string{"n3"}, MAC: []string{"n3"}}, ""},
		{"first of two on an address", v, PeerHolders{Addr: []string{"n3", "n4"}, MAC: []string{"n3"}}, ""},
		{"second of two on an address", v, PeerHolders{Addr: []string{"n2", "n3"}, MAC: []string{"n3"}}, "address 10.244.3.0 is node n2's"},
		{"second of two on a MAC", v, PeerHolders{Addr: []string{"n3"}, MAC: []string{"n2", "n3"}}, "MAC 66:1f:00:00:00:03 is node n2's"},
		{"this node's address", VTEP{Node: "n3", Addr: local.Addr, MAC: mac(3)}, PeerHolders{Addr: []string{"n3"}, MAC: []string{"n3"}}, "this node's"},
		{"this node's MAC", VTEP{Node: "n3", Addr: v.Addr, MAC: local.MAC}, PeerHolders{Addr: []string{"n3"}, MAC: []string{"n3"}}, "this node's"},
	} {
		got := PeerConflict(tc.v, tc.holders, local, true)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBlockClaims(t *testing.T) {
	b := model.Block{CIDR: pfx("10.244.2.0/26"), Node: "n2", Borrowed: []model.Borrowed{
		{Addr: addr("10.244.2.5"), Node: "n3"},
		{Addr: addr("10.244.2.6"), Node: "n1"}, // this node's own pod: a workload route
		{Addr: addr("10.244.2.7"), Node: "n2"}, // the block's node: its block route covers it
		{Addr: addr("10.244.2.8"), Node: ""},
	}}
	got := BlockClaims(b, "n1")
	want := []Claim{
		{Prefix: pfx("10.244.2.0/26"), Node: "n2", Block: pfx("10.244.2.0/26")},
		{Prefix: pfx("10.244.2.5/32"), Node: "n3", Block: pfx("10.244.2.0/26")},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("claims %v, want %v", got, want)
	}
	// This node's block: only what others borrowed in it.
	b.Node = "n1"
	if got := BlockClaims(b, "n1"); len(got) != 2 || got[0].Node != "n3" || got[1].Node != "n2" {
		t.Fatalf("this node's block claims %v", got)
	}
	// A /32 block and an address borrowed elsewhere at the same place: the block's claim first.
	own := Claim{Prefix: pfx("10.244.9.9/32"), Node: "n4", Block: pfx("10.244.9.9/32")}
	borrowed := Claim{Prefix: pfx("10.244.9.9/32"), Node: "n3", Block: pfx("10.244.9.0/26")}
	if CompareClaims(own, borrowed) >= 0 || CompareClaims(borrowed, own) <= 0 {
		t.Fatal("a block's own claim does not come first")
	}
}

func TestVXLANRoute(t *testing.T) {
	u := Underlay{Addr: ipfamily.PairOf(pfx("198.51.100.11/24"), pfx("2001:db8:100::11/64")), Uplink: ipfamily.PairOf("eth0", "eth0")}
	peer := VTEP{Node: "n2", Addr: addr("10.244.1.0"), MAC: mac(2), Underlay: addr("198.51.100.12")}
	same := VXLANTarget{Node: "n2", Known: true, Underlay: addr("198.51.100.12"), Peer: peer, PeerOK: true, LocalVTEP: true}
	other := same
	other.Underlay, other.Peer.Underlay = addr("203.0.113.7"), addr("203.0.113.7")
	peer6 := VTEP{Node: "n2", Addr: addr("fd00:10:244:1::"), MAC: mac(0x82), Underlay: addr("2001:db8:300::13")}
	v6 := VXLANTarget{Node: "n2", Known: true, Underlay: peer6.Underlay, Peer: peer6, PeerOK: true, LocalVTEP: true}
	with := func(t VXLANTarget, f func(*VXLANTarget)) VXLANTarget { f(&t); return t }
	for _, tc := range []struct {
		name   string
		mode   v1.VXLANMode
		prefix string
		t      VXLANTarget
		uplink string
		want   string
		reason string
	}{
		{name: "always, same subnet", mode: v1.VXLANModeAlways, prefix: "10.244.1.0/26", t: same, want: "10.244.1.0/26 via 10.244.1.0 dev vxlan.tabby onlink"},
		{name: "always, other subnet", mode: v1.VXLANModeAlways, prefix: "10.244.1.0/26", t: other, want: "10.244.1.0/26 via 10.244.1.0 dev vxlan.tabby onlink"},
		{name: "crosssubnet, same subnet is native", mode: v1.VXLANModeCrossSubnet, prefix: "10.244.1.0/26", t: same, want: "10.244.1.0/26 via 198.51.100.12 dev eth0"},
		{name: "crosssubnet, same subnet, no VTEPs needed", mode: v1.VXLANModeCrossSubnet, prefix: "10.244.1.0/26",
			t: with(same, func(t *VXLANTarget) { t.PeerOK, t.LocalVTEP = false, false }), want: "10.244.1.0/26 via 198.51.100.12 dev eth0"},
		{name: "crosssubnet, other subnet", mode: v1.VXLANModeCrossSubnet, prefix: "10.244.1.0/26", t: other, want: "10.244.1.0/26 via 10.244.1.0 dev vxlan.tabby onlink"},
		{name: "crosssubnet, no uplink", mode: v1.VXLANModeCrossSubnet, prefix: "10.244.1.0/26", t: same, uplink: "-", reason: "no uplink"},
		{name: "crosssubnet, node has this node's address", mode: v1.VXLANModeCrossSubnet, prefix: "10.244.1.0/26",
			t: with(same, func(t *VXLANTarget) { t.Underlay = addr("198.51.100.11") }), reason: "this node's underlay address"},
		{name: "borrowed address", mode: v1.VXLANModeAlways, prefix: "10.244.0.5/32", t: same, want: "10.244.0.5/32 via 10.244.1.0 dev vxlan.tabby onlink"},
		{name: "ipv6", mode: v1.VXLANModeAlways, prefix: "fd00:10:244:1::/122", t: v6, want: "fd00:10:244:1::/122 via fd00:10:244:1:: dev vxlan-v6.tabby onlink"},
		{name: "ipv6 crosssubnet other subnet", mode: v1.VXLANModeCrossSubnet, prefix: "fd00:10:244:1::/122", t: v6, want: "fd00:10:244:1::/122 via fd00:10:244:1:: dev vxlan-v6.tabby onlink"},
		{name: "unknown node", mode: v1.VXLANModeAlways, prefix: "10.244.1.0/26", t: VXLANTarget{Node: "n9"}, reason: "node n9 is unknown"},
		{name: "no local VTEP", mode: v1.VXLANModeAlways, prefix: "10.244.1.0/26", t: with(same, func(t *VXLANTarget) { t.LocalVTEP = false }), reason: "this node has no IPv4 VTEP"},
		{name: "no remote VTEP", mode: v1.VXLANModeAlways, prefix: "10.244.1.0/26", t: with(same, func(t *VXLANTarget) { t.PeerOK = false }), reason: "node n2 has no IPv4 VTEP"},
		{name: "conflict", mode: v1.VXLANModeAlways, prefix: "10.244.1.0/26", t: with(same, func(t *VXLANTarget) { t.PeerOK, t.Conflict = false, "its VTEP MAC is n0's" }), reason: "not programmed: its VTEP MAC is n0's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uu := u
			if tc.uplink == "-" {
				uu.Uplink = ipfamily.Pair[string]{}
			}
			pool := model.Pool{Name: "p", CIDR: pfx("10.244.0.0/16"), VXLANMode: tc.mode}
			r, reason := VXLANRoute(uu, pool, pfx(tc.prefix), tc.t)
			got := ""
			if reason == "" {
				got = r.String()
			}
			if got != tc.want || !strings.Contains(reason, tc.reason) || (tc.reason == "") != (reason == "") {
				t.Fatalf("route %q reason %q, want %q reason %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// Compute puts VXLAN between a node's own routes and BGP: a local block's blackhole and a local
// pod's route win over it, it wins over a learned route, and BGP's routes inside a VXLAN pool
// are never unresolved and programmed only where VXLAN has no route, natively in this node's
// subnet.
func TestComputeVXLANPrecedence(t *testing.T) {
	in := baseInput()
	in.NodeName = "n1"
	in.Pools = []model.Pool{
		{Name: "vx", CIDR: pfx("10.244.0.0/16"), VXLANMode: v1.VXLANModeAlways},
		{Name: "native", CIDR: pfx("10.250.0.0/16"), IPIPMode: v1.IPIPModeNever},
		{Name: "vx6", CIDR: pfx("fd00:10:244::/48"), VXLANMode: v1.VXLANModeAlways},
	}
	in.Nodes = []model.Node{
		vxNode("n1", "198.51.100.11/24", "10.244.0.0", 1, "", ""),
		vxNode("n2", "198.51.100.12/24", "10.244.1.0", 2, "2001:db8:100::12/64", "fd00:10:244:1::"),
		vxNode("n3", "203.0.113.7/24", "", 0, "", ""),
	}
	in.LocalBlocks = []netip.Prefix{pfx("10.244.0.0/26")}
	in.Workloads = []model.Workload{{Interface: "cali1", IPs: []netip.Addr{addr("10.244.1.9")}}}
	in.Blocks = []model.Block{
		{CIDR: pfx("10.244.0.0/26"), Node: "n1", Borrowed: []model.Borrowed{{Addr: addr("10.244.0.7"), Node: "n2"}}},
		{CIDR: pfx("10.244.1.0/26"), Node: "n2", Borrowed: []model.Borrowed{{Addr: addr("10.244.1.9"), Node: "n1"}}},
		{CIDR: pfx("10.244.3.0/26"), Node: "n3"},
		{CIDR: pfx("10.250.1.0/26"), Node: "n2"},
		{CIDR: pfx("fd00:10:244:1::/122"), Node: "n2"},
	}
	in.BGPRoutes = map[netip.Prefix]netip.Addr{
		pfx("10.244.1.0/26"): addr("198.51.100.12"), // VXLAN pool: not BGP's
		pfx("10.244.5.0/26"): addr("203.0.113.99"),  // VXLAN pool, across subnets: no route, not reported
		pfx("10.244.6.0/26"): addr("198.51.100.16"), // VXLAN pool, no VTEP known: natively in the subnet
		pfx("10.244.3.0/26"): addr("203.0.113.7"),   // n3 has no VTEP: across subnets, no route
		pfx("10.250.1.0/26"): addr("198.51.100.12"),
	}
	res := Compute(in)
	want := map[string]string{
		"10.244.0.0/26":       "blackhole 10.244.0.0/26",
		"10.244.0.7/32":       "10.244.0.7/32 via 10.244.1.0 dev vxlan.tabby onlink",
		"10.244.1.0/26":       "10.244.1.0/26 via 10.244.1.0 dev vxlan.tabby onlink",
		"10.244.1.9/32":       "10.244.1.9/32 dev cali1 scope link",
		"10.250.1.0/26":       "10.250.1.0/26 via 198.51.100.12 dev eth0",
		"10.244.3.0/26":       "",
		"10.244.5.0/26":       "",
		"10.244.6.0/26":       "10.244.6.0/26 via 198.51.100.16 dev eth0",
		"fd00:10:244:1::/122": "", // this node has no IPv6 VTEP
	}
	for p, w := range want {
		r, ok := res.Routes[pfx(p)]
		got := ""
		if ok {
			got = r.String()
		}
		if got != w {
			t.Errorf("%s: %q, want %q", p, got, w)
		}
	}
	if len(res.Unresolved) != 0 || len(res.Ignored) != 0 {
		t.Errorf("BGP in a VXLAN pool reported: unresolved %v ignored %v", res.Unresolved, res.Ignored)
	}
	if len(res.VXLANNoRoutes) != 2 || res.VXLANNoRoutes[0].Node != "n3" || !strings.Contains(res.VXLANNoRoutes[1].Reason, "this node has no IPv6 VTEP") {
		t.Errorf("no routes %v", res.VXLANNoRoutes)
	}
	v4, v6 := res.VXLAN.Get(ipfamily.IPv4), res.VXLAN.Get(ipfamily.IPv6)
	if !v4.Device || len(v4.Peers) != 1 || v4.Peers["n2"].Underlay != addr("198.51.100.12") || v6.Device || v6.Peers != nil {
		t.Errorf("VXLAN state %+v %+v", v4, v6)
	}
}
