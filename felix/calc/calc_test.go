package calc

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

func baseInput() Input {
	return Input{
		Underlay: Underlay{Addr: ipfamily.PairOf(pfx("198.51.100.11/24"), netip.Prefix{}), Uplink: ipfamily.PairOf("eth0", "eth0")},
		HostRoutes: []HostRoute{
			{Dst: pfx("198.51.100.0/24"), Dev: "eth0"},
			{Dst: pfx("0.0.0.0/0"), Gw: addr("198.51.100.1"), Dev: "eth0"},
			{Dst: pfx("203.0.113.128/25"), Gw: addr("198.51.100.254"), Dev: "eth0"},
			{Dst: pfx("203.0.113.64/26"), Dev: "eth1"},
		},
	}
}

func TestRemoteRouteDecisions(t *testing.T) {
	tests := []struct {
		name   string
		mode   v1.IPIPMode
		nh     string
		hosts  []HostRoute // nil: baseInput's
		want   string      // Route.String(), "" = not programmed
		reason string      // substring of the Unresolved reason
	}{
		{name: "never same subnet", mode: v1.IPIPModeNever, nh: "198.51.100.12", want: "10.244.1.0/26 via 198.51.100.12 dev eth0"},
		{name: "empty mode same subnet", mode: "", nh: "198.51.100.12", want: "10.244.1.0/26 via 198.51.100.12 dev eth0"},
		{name: "crosssubnet same subnet is direct", mode: v1.IPIPModeCrossSubnet, nh: "198.51.100.12", want: "10.244.1.0/26 via 198.51.100.12 dev eth0"},
		{name: "crosssubnet other subnet tunnels", mode: v1.IPIPModeCrossSubnet, nh: "203.0.113.7", want: "10.244.1.0/26 via 203.0.113.7 dev tunl0 onlink"},
		{name: "always same subnet tunnels", mode: v1.IPIPModeAlways, nh: "198.51.100.12", want: "10.244.1.0/26 via 198.51.100.12 dev tunl0 onlink"},
		{name: "always other subnet tunnels", mode: v1.IPIPModeAlways, nh: "203.0.113.7", want: "10.244.1.0/26 via 203.0.113.7 dev tunl0 onlink"},
		{name: "never other subnet recursive via longest match", mode: v1.IPIPModeNever, nh: "203.0.113.200", want: "10.244.1.0/26 via 198.51.100.254 dev eth0"},
		{name: "never other subnet recursive via default", mode: v1.IPIPModeNever, nh: "203.0.113.7", want: "10.244.1.0/26 via 198.51.100.1 dev eth0"},
		{name: "never other subnet connected elsewhere", mode: v1.IPIPModeNever, nh: "203.0.113.70", want: "10.244.1.0/26 via 203.0.113.70 dev eth1"},
		{name: "never other subnet unresolvable", mode: v1.IPIPModeNever, nh: "203.0.113.7",
			hosts: []HostRoute{{Dst: pfx("198.51.100.0/24"), Dev: "eth0"}}, reason: "no host route to next hop 203.0.113.7"},
		{name: "never other subnet ignores routes on cali and tunl0", mode: v1.IPIPModeNever, nh: "203.0.113.7",
			hosts: []HostRoute{{Dst: pfx("203.0.113.0/24"), Dev: "cali123"}, {Dst: pfx("203.0.113.0/25"), Dev: "tunl0"}}, reason: "no host route"},
		{name: "next hop is this node", mode: v1.IPIPModeNever, nh: "198.51.100.11"},
		{name: "ipv6 next hop", mode: v1.IPIPModeNever, nh: "2001:db8::1", reason: "not an IPv4 address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			if tc.hosts != nil {
				in.HostRoutes = tc.hosts
			}
			in.Pools = []model.Pool{{Name: "p", CIDR: pfx("10.244.0.0/16"), IPIPMode: tc.mode}}
			in.BGPRoutes = map[netip.Prefix]netip.Addr{pfx("10.244.1.0/26"): addr(tc.nh)}
			res := Compute(in)
			r, ok := res.Routes[pfx("10.244.1.0/26")]
			got := ""
			if ok {
				got = r.String()
			}
			if got != tc.want {
				t.Fatalf("route = %q, want %q", got, tc.want)
			}
			if tc.reason == "" && len(res.Unresolved) != 0 {
				t.Fatalf("unexpected unresolved %+v", res.Unresolved)
			}
			if tc.reason != "" && (len(res.Unresolved) != 1 || !strings.Contains(res.Unresolved[0].Reason, tc.reason)) {
				t.Fatalf("unresolved = %+v, want reason %q", res.Unresolved, tc.reason)
			}
		})
	}
}

func TestLocalRoutesAndPrecedence(t *testing.T) {
	in := baseInput()
	in.Pools = []model.Pool{
		{Name: "wide", CIDR: pfx("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever, NATOutgoing: true},
		{Name: "narrow", CIDR: pfx("10.244.128.0/20"), IPIPMode: v1.IPIPModeAlways},
		{Name: "bad", CIDR: netip.Prefix{}},
	}
	in.LocalBlocks = []netip.Prefix{pfx("10.244.0.0/26"), pfx("10.244.0.77/26")}
	in.Workloads = []model.Workload{
		{Interface: "calib", IPs: []netip.Addr{addr("10.244.0.5")}},
		{Interface: "calia", IPs: []netip.Addr{addr("10.244.0.5")}}, // duplicate: calia wins, reported
		{Interface: "", IPs: []netip.Addr{addr("10.244.0.6")}},      // bad
		{Interface: "calic", IPs: []netip.Addr{addr("10.244.3.9")}}, // borrowed from another node's block
	}
	in.BGPRoutes = map[netip.Prefix]netip.Addr{
		pfx("10.244.0.0/26"):   addr("198.51.100.12"), // our block echoed back: local wins
		pfx("10.244.3.9/32"):   addr("198.51.100.12"), // our workload: local wins
		pfx("10.244.3.0/26"):   addr("198.51.100.12"),
		pfx("10.244.0.70/32"):  addr("198.51.100.13"), // borrowed /32 out of our block
		pfx("10.244.128.0/26"): addr("198.51.100.13"), // narrow pool: Always
		pfx("172.16.0.0/24"):   addr("198.51.100.13"), // not in a pool
	}
	res := Compute(in)
	want := map[string]string{
		"10.244.0.5/32":   "10.244.0.5/32 dev calia scope link",
		"10.244.3.9/32":   "10.244.3.9/32 dev calic scope link",
		"10.244.0.0/26":   "blackhole 10.244.0.0/26",
		"10.244.0.64/26":  "blackhole 10.244.0.64/26",
		"10.244.3.0/26":   "10.244.3.0/26 via 198.51.100.12 dev eth0",
		"10.244.0.70/32":  "10.244.0.70/32 via 198.51.100.13 dev eth0",
		"10.244.128.0/26": "10.244.128.0/26 via 198.51.100.13 dev tunl0 onlink",
	}
	if len(res.Routes) != len(want) {
		t.Errorf("got %d routes, want %d: %v", len(res.Routes), len(want), res.Routes)
	}
	for dst, w := range want {
		if got := res.Routes[pfx(dst)].String(); got != w {
			t.Errorf("%s: got %q, want %q", dst, got, w)
		}
	}
	if !slices.Equal(res.Ignored, []netip.Prefix{pfx("172.16.0.0/24")}) {
		t.Errorf("ignored = %v", res.Ignored)
	}
	if !res.TunnelNeeded {
		t.Error("tunnel not needed despite an Always pool")
	}
	if len(res.Problems) != 3 {
		t.Errorf("problems = %q, want 3 (bad pool, duplicate, empty interface)", res.Problems)
	}
}

func TestTunnelNeeded(t *testing.T) {
	for _, tc := range []struct {
		modes []v1.IPIPMode
		want  bool
	}{
		{nil, false},
		{[]v1.IPIPMode{v1.IPIPModeNever, ""}, false},
		{[]v1.IPIPMode{v1.IPIPModeNever, v1.IPIPModeCrossSubnet}, true},
		{[]v1.IPIPMode{v1.IPIPModeAlways}, true},
	} {
		in := baseInput()
		for i, m := range tc.modes {
			in.Pools = append(in.Pools, model.Pool{Name: "p", CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16), IPIPMode: m})
		}
		if got := Compute(in).TunnelNeeded; got != tc.want {
			t.Errorf("modes %v: tunnel needed %v, want %v", tc.modes, got, tc.want)
		}
	}
}

func TestNoPoolsNoRemoteRoutes(t *testing.T) {
	in := baseInput()
	in.BGPRoutes = map[netip.Prefix]netip.Addr{pfx("10.244.3.0/26"): addr("198.51.100.12")}
	res := Compute(in)
	if len(res.Routes) != 0 || len(res.Ignored) != 1 {
		t.Fatalf("routes %v ignored %v", res.Routes, res.Ignored)
	}
}

// A BGP prefix a local route holds still reports its unusable next hop: it is BGP's route that
// is not programmed, whatever holds the prefix.
func TestUnresolvedUnderALocalRoute(t *testing.T) {
	in := baseInput()
	in.Pools = []model.Pool{{Name: "p", CIDR: pfx("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever}}
	in.LocalBlocks = []netip.Prefix{pfx("10.244.0.0/26")}
	in.BGPRoutes = map[netip.Prefix]netip.Addr{pfx("10.244.0.0/26"): addr("2001:db8::1")}
	res := Compute(in)
	if r := res.Routes[pfx("10.244.0.0/26")]; !r.Blackhole() {
		t.Fatalf("route %v, want the local block's blackhole", r)
	}
	if len(res.Unresolved) != 1 {
		t.Fatalf("unresolved %v, want the learned route's", res.Unresolved)
	}
}

func TestWorkloadIndex(t *testing.T) {
	ws := []model.Workload{
		{Interface: "calib", IPs: []netip.Addr{addr("10.244.0.5")}},
		{Interface: "calia", IPs: []netip.Addr{addr("10.244.0.5")}}, // duplicate: calia wins whatever the order
		{Interface: "calic", IPs: []netip.Addr{addr("10.244.0.5")}},
		{Interface: "", IPs: []netip.Addr{addr("10.244.0.6")}},                                 // no interface
		{Interface: "calid", IPs: []netip.Addr{addr("10.244.0.7"), addr("fd00:10:244::6")}},    // dual stack: a /32 and a /128
		{Interface: "calie", IPs: []netip.Addr{addr("::ffff:10.244.0.8"), addr("10.244.0.9")}}, // IPv4-mapped IPv6 is neither family
	}
	want := map[netip.Addr]string{addr("10.244.0.5"): "calia", addr("10.244.0.7"): "calid", addr("fd00:10:244::6"): "calid", addr("10.244.0.9"): "calie"}
	idx, problems := indexWorkloads(ws)
	if !maps.Equal(idx, want) {
		t.Fatalf("index %v, want %v", idx, want)
	}
	if len(problems) != 4 {
		t.Fatalf("problems %q, want 4 (two duplicates, two invalid)", problems)
	}
	reversed := slices.Clone(ws)
	slices.Reverse(reversed)
	if again, _ := indexWorkloads(reversed); !maps.Equal(again, want) {
		t.Fatalf("order-dependent index %v", again)
	}
	in := baseInput()
	in.Workloads = ws
	if r := Compute(in).Routes[pfx("fd00:10:244::6/128")]; r.String() != "fd00:10:244::6/128 dev calid scope link" {
		t.Fatalf("IPv6 workload route %v", r)
	}
}

// The narrowest pool decides a prefix's mode, whatever order the pools come in; a pool whose
// CIDR is not a usable prefix is left out and reported.
func TestPoolsNarrowestFirst(t *testing.T) {
	in := []model.Pool{
		{Name: "wide", CIDR: pfx("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever},
		{Name: "bad", CIDR: netip.PrefixFrom(addr("::ffff:10.0.0.0"), 104)},
		{Name: "narrow", CIDR: pfx("10.244.128.0/20"), IPIPMode: v1.IPIPModeAlways},
	}
	for _, order := range [][]model.Pool{in, {in[2], in[1], in[0]}} {
		pools, bad := NewPools(order)
		if len(bad) != 1 || bad[0].Name != "bad" {
			t.Fatalf("bad pools %v", bad)
		}
		if p, ok := pools.For(pfx("10.244.130.0/26")); !ok || p.Name != "narrow" {
			t.Fatalf("pool for a narrow block: %v %v", p.Name, ok)
		}
		if p, ok := pools.For(pfx("10.244.1.0/26")); !ok || p.Name != "wide" {
			t.Fatalf("pool for a wide block: %v %v", p.Name, ok)
		}
		if _, ok := pools.For(pfx("10.0.0.0/8")); ok {
			t.Fatal("a prefix wider than every pool has a pool")
		}
	}
	if !UsesIPIP(in[2]) || UsesIPIP(in[0]) || UsesIPIP(model.Pool{CIDR: pfx("fd00::/48"), IPIPMode: v1.IPIPModeAlways}) {
		t.Fatal("UsesIPIP: want Always and CrossSubnet IPv4 pools only")
	}
}
