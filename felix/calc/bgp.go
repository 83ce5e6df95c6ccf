package calc

import "net/netip"

// BGPRouteChange is what Compute makes of one BGP prefix.
type BGPRouteChange struct {
	// Change is the route at Dst: Route, or Remove when BGP puts none there (withdrawn, outside
	// every pool, unresolved, or the node's own).
	Change
	// Keep: a workload or a local block holds Dst, and its route stays as it is.
	Keep bool
	// Unresolved is set when the prefix is learned but its next hop cannot be used.
	Unresolved *Unresolved
}

// BGPRouteChanges returns what Compute now makes of each prefix in changed (routes learned,
// replaced or withdrawn since the last Compute), every input but in.BGPRoutes being as it was
// then: a BGP update costs its own prefixes, not a recompute of every route of the cluster.
// in.WorkloadIndex must be set. Unlike WorkloadChanges it never needs Compute: a BGP prefix
// decides only its own route, and only where no workload or local block is.
func BGPRouteChanges(in Input, changed []netip.Prefix) []BGPRouteChange {
	var ignore Result
	pools := validPools(in.Pools, &ignore)
	res := newResolver(in.HostRoutes, in.UplinkInterface)
	out := make([]BGPRouteChange, 0, len(changed))
	for _, p := range changed {
		p = p.Masked()
		c := BGPRouteChange{Change: Change{Dst: p}}
		nh, learned := in.BGPRoutes[p]
		switch {
		case localHolds(in, p):
			c.Keep = true
		case !learned:
			c.Remove = true
		default:
			o := bgpRoute(in, pools, p, nh, res)
			c.Route, c.Remove, c.Unresolved = o.route, !o.ok, o.unresolved
		}
		out = append(out, c)
	}
	return out
}

// localHolds tells whether Compute puts a workload's or a local block's route at p, which a BGP
// route of the same prefix never replaces.
func localHolds(in Input, p netip.Prefix) bool {
	if p.IsSingleIP() {
		if _, ok := in.WorkloadIndex[p.Addr()]; ok {
			return true
		}
	}
	for _, b := range in.LocalBlocks {
		if b.IsValid() && !b.Addr().Is4In6() && b.Masked() == p {
			return true
		}
	}
	return false
}
