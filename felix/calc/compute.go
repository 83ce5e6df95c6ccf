package calc

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Input is everything the routes depend on, at one moment.
type Input struct {
	Underlay    Underlay
	Pools       []model.Pool
	LocalBlocks []netip.Prefix
	Workloads   []model.Workload
	BGPRoutes   map[netip.Prefix]netip.Addr
	HostRoutes  []HostRoute
	// NodeName is this node; Nodes are every node, this one included, and Blocks every block
	// of the cluster: what the VXLAN devices, entries and routes are derived from.
	NodeName string
	Nodes    []model.Node
	Blocks   []model.Block
}

// Result is the desired dataplane.
type Result struct {
	Routes map[netip.Prefix]Route
	// TunnelNeeded: some pool uses IPIP, so tunl0 must exist and be up.
	TunnelNeeded bool
	// Unresolved are the learned prefixes inside a pool whose next hop cannot be used, whether
	// or not a local route holds the prefix: it is BGP's route that is not programmed.
	Unresolved []Unresolved
	// Ignored are BGP prefixes outside every pool: not tabby's to program.
	Ignored []netip.Prefix
	// VXLAN is each family's VXLAN device and peers; VXLANNoRoutes the VXLAN pools' prefixes
	// on other nodes without a route, whether or not a local route holds the prefix.
	VXLAN         ipfamily.Pair[VXLANState]
	VXLANNoRoutes []NoRoute
	// Problems are inputs that were skipped (bad addresses, duplicates), for logs.
	Problems []string
}

// Compute derives the desired routes from a whole input at once. Precedence on an equal
// prefix: local workload, then local block, then VXLAN, then BGP: a node's own addresses never
// route away from it. felix itself decides object by object (the managers); Compute is the reference
// their result is tested against.
func Compute(in Input) Result {
	res := Result{Routes: map[netip.Prefix]Route{}}
	pools, bad := NewPools(in.Pools)
	for _, p := range bad {
		res.Problems = append(res.Problems, fmt.Sprintf("pool %s cidr %s: not an IPv4 or IPv6 prefix", p.Name, p.CIDR))
	}
	res.TunnelNeeded = slices.ContainsFunc(pools, UsesIPIP)

	idx, problems := indexWorkloads(in.Workloads)
	res.Problems = append(res.Problems, problems...)
	for ip, dev := range idx {
		r := WorkloadRoute(ip, dev)
		res.Routes[r.Dst] = r
	}

	for _, b := range in.LocalBlocks {
		if !ValidPrefix(b) {
			res.Problems = append(res.Problems, fmt.Sprintf("local block %s: not an IPv4 or IPv6 prefix", b))
			continue
		}
		r := BlackholeRoute(b)
		if _, ok := res.Routes[r.Dst]; !ok {
			res.Routes[r.Dst] = r
		}
	}

	vx := computeVXLAN(in, pools)
	res.VXLAN, res.VXLANNoRoutes = vx.state, vx.noRoutes
	for p, r := range vx.routes {
		if _, local := res.Routes[p]; !local {
			res.Routes[p] = r
		}
	}

	resolver := NewResolver(in.HostRoutes)
	for prefix, nh := range in.BGPRoutes {
		prefix = prefix.Masked()
		l := LearnedRoute(in.Underlay, pools, resolver, prefix, nh)
		switch {
		case l.Ignored:
			res.Ignored = append(res.Ignored, prefix)
		case l.Unresolved != nil:
			res.Unresolved = append(res.Unresolved, *l.Unresolved)
		}
		if _, taken := res.Routes[prefix]; l.OK && !taken {
			res.Routes[prefix] = l.Route
		}
	}
	slices.SortFunc(res.Unresolved, func(a, b Unresolved) int { return a.Prefix.Compare(b.Prefix) })
	slices.SortFunc(res.Ignored, netip.Prefix.Compare)
	return res
}

// indexWorkloads maps each workload address to the interface its route uses. An invalid
// address or a workload without interface is skipped, and of two pods claiming one address the
// lexically smallest interface wins, so the choice does not depend on the order the datastore
// listed them in. Both are reported.
func indexWorkloads(ws []model.Workload) (map[netip.Addr]string, []string) {
	idx := map[netip.Addr]string{}
	var problems []string
	for _, w := range ws {
		for _, ip := range w.IPs {
			if !ValidWorkloadAddr(ip) || w.Interface == "" {
				problems = append(problems, fmt.Sprintf("workload %s ip %s interface %q: need an IPv4 or IPv6 address and an interface", w.Pod, ip, w.Interface))
				continue
			}
			if old, ok := idx[ip]; ok {
				problems = append(problems, fmt.Sprintf("workload ip %s on both %s and %s", ip, old, w.Interface))
				if old < w.Interface {
					continue
				}
			}
			idx[ip] = w.Interface
		}
	}
	return idx, problems
}
