package calc

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// Applying BGPRouteChanges to the last result must give what a fresh Compute gives, routes and
// unresolved prefixes, at every step of random BGP churn: routes learned, replaced and withdrawn
// on prefixes that local blocks and workloads hold, outside every pool, behind a tunnel, with the
// node's own next hop and with unusable ones.
func TestBGPRouteChangesEqualsCompute(t *testing.T) {
	prefixes := []netip.Prefix{
		pfx("10.244.1.0/26"), pfx("10.244.2.0/26"), pfx("10.244.3.0/26"),
		pfx("10.244.0.0/26"),   // a local block
		pfx("10.244.0.60/32"),  // a local /32 block
		pfx("10.244.0.5/32"),   // a workload
		pfx("10.244.0.70/32"),  // borrowed from our block by another node
		pfx("10.244.200.0/26"), // cross-subnet pool: a tunnel across subnets
		pfx("172.16.0.0/26"),   // in no pool
	}
	hops := []netip.Addr{addr("198.51.100.12"), addr("198.51.100.13"), addr("203.0.113.7"), addr("198.51.100.11"), addr("2001:db8::1")}
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			in := equivalenceInput()
			in.BGPRoutes = map[netip.Prefix]netip.Addr{}
			in.WorkloadIndex, _ = IndexWorkloads([]Workload{{IP: addr("10.244.0.5"), Interface: "cali0"}}, nil)
			ref := Compute(in)
			routes := maps.Clone(ref.Routes)
			unresolved := map[netip.Prefix]Unresolved{}
			for step := 0; step < 300; step++ {
				var changed []netip.Prefix
				for range 1 + rng.IntN(3) {
					p := prefixes[rng.IntN(len(prefixes))]
					if rng.IntN(3) == 0 {
						delete(in.BGPRoutes, p)
					} else {
						in.BGPRoutes[p] = hops[rng.IntN(len(hops))]
					}
					changed = append(changed, p)
				}
				for _, c := range BGPRouteChanges(in, changed) {
					switch {
					case c.Keep:
					case c.Remove:
						delete(routes, c.Dst)
					default:
						routes[c.Dst] = c.Route
					}
					delete(unresolved, c.Dst)
					if c.Unresolved != nil && !c.Keep {
						unresolved[c.Dst] = *c.Unresolved
					}
				}
				fresh := Compute(in)
				if !maps.Equal(routes, fresh.Routes) {
					t.Fatalf("step %d (changed %v): routes differ from Compute\ngot  %v\nwant %v", step, changed, routes, fresh.Routes)
				}
				got := slices.SortedFunc(maps.Values(unresolved), func(a, b Unresolved) int { return comparePrefix(a.Prefix, b.Prefix) })
				if !slices.Equal(got, fresh.Unresolved) {
					t.Fatalf("step %d (changed %v): unresolved %v, Compute says %v", step, changed, got, fresh.Unresolved)
				}
			}
		})
	}
}
