package calc

import (
	"maps"
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// One computation serves both families: the same kinds of route, each family's next hops
// judged against that family's node address, and nothing crossing families.
func TestDualStackRoutes(t *testing.T) {
	in := baseInput()
	in.Underlay.Addr.Set(ipfamily.IPv6, pfx("2001:db8:100::11/64"))
	in.Underlay.Uplink.Set(ipfamily.IPv6, "eth6")
	in.HostRoutes = append(in.HostRoutes,
		HostRoute{Dst: pfx("2001:db8:100::/64"), Dev: "eth6"},
		HostRoute{Dst: pfx("::/0"), Gw: addr("2001:db8:100::1"), Dev: "eth6"},
		HostRoute{Dst: pfx("fe80::/64"), Dev: "cali0123456789a"}, // a veth's link-local: never a way out
	)
	in.Pools = []model.Pool{
		{Name: "v4", CIDR: pfx("10.244.0.0/16"), IPIPMode: v1.IPIPModeCrossSubnet, NATOutgoing: true},
		{Name: "v6", CIDR: pfx("fd00:10:244::/48"), NATOutgoing: true},
	}
	in.LocalBlocks = []netip.Prefix{pfx("10.244.0.0/26"), pfx("fd00:10:244::/122")}
	in.Workloads = []model.Workload{{Interface: "calia", IPs: []netip.Addr{addr("10.244.0.5"), addr("fd00:10:244::5")}}}
	in.BGPRoutes = map[netip.Prefix]netip.Addr{
		pfx("10.244.1.0/26"):        addr("198.51.100.12"),    // same subnet
		pfx("fd00:10:244::40/122"):  addr("2001:db8:100::12"), // same IPv6 subnet
		pfx("fd00:10:244::80/122"):  addr("2001:db8:200::13"), // across the router
		pfx("fd00:10:244::c0/122"):  addr("198.51.100.14"),    // an IPv4 next hop for an IPv6 block
		pfx("10.244.2.0/26"):        addr("2001:db8:100::15"), // and the other way round
		pfx("fd00:10:244::100/122"): addr("2001:db8:100::11"), // our own, reflected back
	}
	res := Compute(in)
	got := map[string]bool{}
	for _, r := range res.Routes {
		got[r.String()] = true
	}
	want := map[string]bool{
		"10.244.0.5/32 dev calia scope link":                true,
		"fd00:10:244::5/128 dev calia scope link":           true,
		"blackhole 10.244.0.0/26":                           true,
		"blackhole fd00:10:244::/122":                       true,
		"10.244.1.0/26 via 198.51.100.12 dev eth0":          true,
		"fd00:10:244::40/122 via 2001:db8:100::12 dev eth6": true,
		"fd00:10:244::80/122 via 2001:db8:100::1 dev eth6":  true,
	}
	if !maps.Equal(got, want) {
		t.Errorf("routes:\n got %v\nwant %v", got, want)
	}
	if len(res.Unresolved) != 2 {
		t.Fatalf("unresolved %+v, want the two next hops of the wrong family", res.Unresolved)
	}
	for _, u := range res.Unresolved {
		if !strings.Contains(u.Reason, "is not an IPv") {
			t.Errorf("unresolved %s: reason %q does not name the family", u.Prefix, u.Reason)
		}
	}
	if len(res.Problems) != 0 {
		t.Errorf("problems %v", res.Problems)
	}
	if !res.TunnelNeeded {
		t.Error("the IPv4 pool's CrossSubnet mode needs tunl0")
	}
}

// An IPv6 pool never tunnels, whatever its ipipMode says (the API refuses it; a stale object
// must not send IPv6 into tunl0).
func TestIPv6PoolNeverTunnels(t *testing.T) {
	in := baseInput()
	in.Underlay.Addr.Set(ipfamily.IPv6, pfx("2001:db8:100::11/64"))
	in.HostRoutes = append(in.HostRoutes, HostRoute{Dst: pfx("::/0"), Gw: addr("2001:db8:100::1"), Dev: "eth0"})
	in.Pools = []model.Pool{{Name: "v6", CIDR: pfx("fd00:10:244::/48"), IPIPMode: v1.IPIPModeAlways}}
	in.BGPRoutes = map[netip.Prefix]netip.Addr{pfx("fd00:10:244::40/122"): addr("2001:db8:200::12")}
	res := Compute(in)
	if res.TunnelNeeded {
		t.Error("an IPv6 pool asked for tunl0")
	}
	r, ok := res.Routes[pfx("fd00:10:244::40/122")]
	if !ok || r.Kind != KindRemote || r.Dev != "eth0" || r.Gw != addr("2001:db8:100::1") {
		t.Errorf("route %v (ok=%v), want via the host's IPv6 default route", r, ok)
	}
}
