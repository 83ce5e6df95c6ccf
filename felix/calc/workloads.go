package calc

import (
	"fmt"
	"net/netip"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// WorkloadIndex maps each local workload address to the interface its /32 or /128 route uses.
type WorkloadIndex map[netip.Addr]string

// IndexWorkloads indexes ws into into (cleared first) when it is not nil, so a caller indexing
// on every pod change reuses its maps instead of allocating one per pod. It is the one place
// that decides what a workload list means: an invalid workload (no address, an IPv4-mapped one, no interface) is
// skipped, and of two pods claiming one address the lexically smallest interface wins, so the
// choice does not depend on the order the datastore listed them in. Both are reported.
func IndexWorkloads(ws []Workload, into WorkloadIndex) (WorkloadIndex, []string) {
	if into == nil {
		into = make(WorkloadIndex, len(ws))
	} else {
		clear(into)
	}
	var problems []string
	for _, w := range ws {
		if !w.IP.IsValid() || w.IP.Is4In6() || w.Interface == "" {
			problems = append(problems, fmt.Sprintf("workload ip %s interface %q: need an IPv4 or IPv6 address and an interface", w.IP, w.Interface))
			continue
		}
		if old, ok := into[w.IP]; ok {
			problems = append(problems, fmt.Sprintf("workload ip %s on both %s and %s", w.IP, old, w.Interface))
			if old < w.Interface {
				continue
			}
		}
		into[w.IP] = w.Interface
	}
	return into, problems
}

// Change is one route to set (or, with Remove, to delete) at Dst.
type Change struct {
	Dst    netip.Prefix
	Route  Route
	Remove bool
}

// WorkloadChanges returns the routes that differ between Compute with the workloads old and
// with cur, everything else in being equal: what a new or deleted pod changes, without
// recomputing thousands of routes. ok is false when the answer is not just workload routes
// (an address that is also a local host-prefix block or a BGP host prefix: Compute's fallback route, and its
// Unresolved and Ignored lists, depend on it); the caller then runs Compute.
//
// The cost is one lookup per entry of cur, plus a pass over old only when some old address is
// not in cur: adding a pod to a node with thousands never walks old.
func WorkloadChanges(in Input, old, cur WorkloadIndex) (changes []Change, ok bool) {
	var hostBlocks map[netip.Prefix]struct{} // built on the first changed address only
	shadows := func(ip netip.Addr) bool {
		dst := ipfamily.HostPrefix(ip)
		if _, bgp := in.BGPRoutes[dst]; bgp {
			return true
		}
		if hostBlocks == nil {
			hostBlocks = map[netip.Prefix]struct{}{}
			for _, b := range in.LocalBlocks {
				if b.IsValid() && b.IsSingleIP() {
					hostBlocks[b] = struct{}{}
				}
			}
		}
		_, blk := hostBlocks[dst]
		return blk
	}
	found := 0
	for ip, dev := range cur {
		was, had := old[ip]
		if had {
			found++
			if was == dev {
				continue
			}
		} else if shadows(ip) {
			return nil, false
		}
		dst := ipfamily.HostPrefix(ip)
		changes = append(changes, Change{Dst: dst, Route: Route{Dst: dst, Kind: KindWorkload, Dev: dev}})
	}
	if found == len(old) {
		return changes, true
	}
	for ip := range old {
		if _, still := cur[ip]; still {
			continue
		}
		if shadows(ip) {
			return nil, false
		}
		changes = append(changes, Change{Dst: ipfamily.HostPrefix(ip), Remove: true})
	}
	return changes, true
}
