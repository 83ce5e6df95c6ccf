package bgproutes

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// Equal-cost paths make one multipath route, in the pools and outside them; an external prefix
// never displaces the host's own route to it, and is routed only while no pool holds it.
func TestMultipathAndExternal(t *testing.T) {
	rec := &recorder{routes: map[netip.Prefix]calc.Route{}}
	m := New(rec, Options{NodeName: "n1", Uplink: ipfamily.PairOf("eth0", "eth0")})
	ctx := context.Background()
	pass := func(msgs ...any) {
		t.Helper()
		for _, msg := range msgs {
			m.OnUpdate(msg)
		}
		if err := m.CompleteDeferredWork(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	route := func(p string) string { return rec.routes[netip.MustParsePrefix(p)].String() }
	pool := model.PoolUpdate{Pool: model.Pool{Name: "p", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever}}
	pass(node("n1", "198.51.100.11/24"), pool)

	blk := netip.MustParsePrefix("10.244.1.0/26")
	pass(model.RouteUpdate{Prefix: blk, NextHop: netip.MustParseAddr("198.51.100.3"), NextHops: addrs("198.51.100.2", "198.51.100.3")})
	if got, want := route("10.244.1.0/26"), "10.244.1.0/26 nexthop via 198.51.100.2 dev eth0 nexthop via 198.51.100.3 dev eth0"; got != want {
		t.Fatalf("pool ECMP: %q, want %q", got, want)
	}
	// A next hop that does not resolve (off the node's subnet, no host route to it): the route
	// goes over the other, and the one left out is reported until it goes.
	pass(model.RouteUpdate{Prefix: blk, NextHop: netip.MustParseAddr("198.51.100.3"), NextHops: addrs("198.51.100.3", "203.0.113.9")})
	if got, want := route("10.244.1.0/26"), "10.244.1.0/26 via 198.51.100.3 dev eth0"; got != want {
		t.Fatalf("one path unresolved: %q, want %q", got, want)
	}
	if u := m.Unresolved()[blk]; !strings.Contains(u, "203.0.113.9") || !strings.Contains(u, "routed over the other next hops") {
		t.Fatalf("the next hop left out is not reported: %q", u)
	}
	pass(model.RouteUpdate{Prefix: blk, NextHop: netip.MustParseAddr("198.51.100.3")})
	if got, want := route("10.244.1.0/26"), "10.244.1.0/26 via 198.51.100.3 dev eth0"; got != want {
		t.Fatalf("one path left: %q, want %q", got, want)
	}
	if u, ok := m.Unresolved()[blk]; ok {
		t.Fatalf("still reported once the path went: %q", u)
	}

	def := netip.MustParsePrefix("0.0.0.0/0")
	ext := model.RouteUpdate{Prefix: def, NextHop: netip.MustParseAddr("198.51.100.1"), NextHops: addrs("198.51.100.1", "198.51.100.2"), External: true}
	pass(ext)
	if got, want := route("0.0.0.0/0"), "0.0.0.0/0 nexthop via 198.51.100.1 dev eth0 nexthop via 198.51.100.2 dev eth0"; got != want {
		t.Fatalf("external ECMP: %q, want %q", got, want)
	}
	// The host's own default route (DHCP's): BGP's is not installed, and reported.
	hostDefault := routetable.HostRoutesUpdate{Routes: []calc.HostRoute{{Dst: def, Gw: netip.MustParseAddr("198.51.100.254"), Dev: "eth0", Priority: 100}}}
	pass(hostDefault)
	if _, ok := rec.routes[def]; ok {
		t.Fatalf("the host's default route displaced: %v", rec.routes[def])
	}
	if u := m.Unresolved()[def]; u == "" {
		t.Fatalf("no report of the held-back default route: %v", m.Unresolved())
	}
	pass(routetable.HostRoutesUpdate{})
	if _, ok := rec.routes[def]; !ok {
		t.Fatal("default route not back once the host's went")
	}

	// Inside this node's subnet: never from BGP.
	sub := netip.MustParsePrefix("198.51.100.0/25")
	pass(model.RouteUpdate{Prefix: sub, NextHop: netip.MustParseAddr("198.51.100.1"), External: true})
	if _, ok := rec.routes[sub]; ok {
		t.Fatalf("a route inside the node's subnet taken: %v", rec.routes[sub])
	}

	// An external prefix a pool comes to hold is not routed as external any more, and a
	// pool's prefix without its pool is not routed as an external one.
	inner := netip.MustParsePrefix("10.245.0.0/24")
	pass(model.RouteUpdate{Prefix: inner, NextHop: netip.MustParseAddr("198.51.100.1"), External: true})
	if _, ok := rec.routes[inner]; !ok {
		t.Fatal("external prefix outside the pools not routed")
	}
	pass(model.PoolUpdate{Pool: model.Pool{Name: "q", CIDR: netip.MustParsePrefix("10.245.0.0/16"), IPIPMode: v1.IPIPModeNever}})
	if _, ok := rec.routes[inner]; ok {
		t.Fatal("external route kept inside a new pool")
	}
	pass(model.PoolRemove{Name: "p"})
	if _, ok := rec.routes[blk]; ok {
		t.Fatal("a pool's route kept without its pool")
	}
}
