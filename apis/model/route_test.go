package model

import (
	"net/netip"
	"slices"
	"testing"
)

// A learned route compares equal whatever order its next hops came in once sorted, a single
// next hop listed or not; the best path's comes first where one is asked for.
func TestRouteUpdateNextHops(t *testing.T) {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix("203.0.113.0/24")
	one := RouteUpdate{Prefix: p, NextHop: a("198.51.100.2")}
	if !one.Equal(RouteUpdate{Prefix: p, NextHop: a("198.51.100.2"), NextHops: []netip.Addr{a("198.51.100.2")}}) {
		t.Error("a single next hop listed differs from none listed")
	}
	x := RouteUpdate{Prefix: p, NextHop: a("198.51.100.2"), NextHops: SortNextHops([]netip.Addr{a("198.51.100.2"), a("198.51.100.1"), a("198.51.100.2")})}
	y := RouteUpdate{Prefix: p, NextHop: a("198.51.100.2"), NextHops: SortNextHops([]netip.Addr{a("198.51.100.1"), a("198.51.100.2")})}
	if !x.Equal(y) || x.Equal(one) || x.Equal(RouteUpdate{Prefix: p, NextHop: a("198.51.100.1"), NextHops: y.NextHops}) {
		t.Errorf("Equal: %v %v", x, y)
	}
	ext := y
	ext.External = true
	if ext.Equal(y) {
		t.Error("an external route equals a pool's")
	}
	if got, want := x.BestFirst(), []netip.Addr{a("198.51.100.2"), a("198.51.100.1")}; !slices.Equal(got, want) {
		t.Errorf("BestFirst %v, want %v", got, want)
	}
}
