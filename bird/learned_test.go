package bird

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/tabbynet/tabby/bird/speaker"
)

// The paths that tie with the best one down to the router-ID tie-breakers share its route, up
// to maxPaths, the best path's next hop always among them.
func TestEqualCostHops(t *testing.T) {
	a := netip.MustParseAddr
	tor := speaker.PathAttrs{LocalPref: 50, ASPathLen: 1, NeighborAS: 65001}
	other := func(f func(*speaker.PathAttrs)) speaker.PathAttrs { x := tor; f(&x); return x }
	best := bestPath{peer: a("198.51.100.1"), nextHop: a("198.51.100.1")}
	for _, c := range []struct {
		name  string
		attrs speaker.PathAttrs
		max   int
		want  []netip.Addr
	}{
		{"equal", tor, 16, []netip.Addr{a("198.51.100.1"), a("198.51.100.2")}},
		{"maxPaths 1", tor, 1, nil},
		{"another neighbour AS", other(func(p *speaker.PathAttrs) { p.NeighborAS = 65002 }), 16, []netip.Addr{a("198.51.100.1"), a("198.51.100.2")}},
		{"another neighbour AS, another MED", other(func(p *speaker.PathAttrs) { p.NeighborAS, p.MED = 65002, 10 }), 16, []netip.Addr{a("198.51.100.1"), a("198.51.100.2")}},
		{"same neighbour AS, another MED", other(func(p *speaker.PathAttrs) { p.MED = 10 }), 16, nil},
		{"longer AS path", other(func(p *speaker.PathAttrs) { p.ASPathLen = 2 }), 16, nil},
		{"another LOCAL_PREF", other(func(p *speaker.PathAttrs) { p.LocalPref = 100 }), 16, nil},
		{"another origin", other(func(p *speaker.PathAttrs) { p.Origin = 2 }), 16, nil},
		{"iBGP against eBGP", other(func(p *speaker.PathAttrs) { p.IBGP = true }), 16, nil},
		{"stale (graceful restart)", other(func(p *speaker.PathAttrs) { p.Stale = true }), 16, nil},
	} {
		paths := map[netip.Addr]candidate{
			best.peer:           {nextHop: best.nextHop, attrs: tor},
			a("198.51.100.2"):   {nextHop: a("198.51.100.2"), attrs: c.attrs},
			a("2001:db8::2"):    {nextHop: a("2001:db8::2"), attrs: tor},  // the other family: never
			a("198.51.100.200"): {nextHop: a("198.51.100.1"), attrs: tor}, // the best's next hop again
		}
		if got := equalCostHops(best, paths, c.max); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	// More ties than maxPaths: the best's and the lowest others.
	paths := map[netip.Addr]candidate{best.peer: {nextHop: a("198.51.100.9"), attrs: tor}}
	best.nextHop = a("198.51.100.9")
	for _, nh := range []string{"198.51.100.5", "198.51.100.3", "198.51.100.4"} {
		paths[a(nh)] = candidate{nextHop: a(nh), attrs: tor}
	}
	if got, want := equalCostHops(best, paths, 3), []netip.Addr{a("198.51.100.3"), a("198.51.100.4"), a("198.51.100.9")}; !slices.Equal(got, want) {
		t.Errorf("capped: %v, want %v", got, want)
	}
	// Without the best path's own record (not received yet): the best path alone.
	delete(paths, best.peer)
	if got := equalCostHops(best, paths, 3); got != nil {
		t.Errorf("without the best's record: %v", got)
	}
}
