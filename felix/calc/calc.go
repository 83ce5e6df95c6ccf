// Package calc computes the routes felix wants in the kernel from the datastore's and the BGP
// speaker's view of the cluster. It is pure: no netlink, no clock, so every decision is testable
// with a table.
package calc

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// TunnelDevice is the IPIP device felix routes through when a pool asks for encapsulation.
const TunnelDevice = "tunl0"

// Kind says why a route exists; metrics count programmed routes by kind.
type Kind uint8

const (
	KindWorkload  Kind = iota + 1 // <podIP>/32 dev caliX scope link, or <podIP>/128 dev caliX
	KindBlackhole                 // blackhole <local block>
	KindRemote                    // <prefix> via <nh> dev <uplink or host route's dev>
	KindTunnel                    // <prefix> via <nh> dev tunl0 onlink
)

// Kinds lists every kind, for metrics that report zero counts too.
var Kinds = []Kind{KindWorkload, KindBlackhole, KindRemote, KindTunnel}

func (k Kind) String() string {
	switch k {
	case KindWorkload:
		return "workload"
	case KindBlackhole:
		return "blackhole"
	case KindRemote:
		return "remote"
	case KindTunnel:
		return "tunnel"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Route is one desired route of the main table. Blackhole routes have no Dev; link-scope
// routes (workloads) have no Gw.
type Route struct {
	Dst    netip.Prefix
	Kind   Kind
	Dev    string
	Gw     netip.Addr
	OnLink bool
}

// Blackhole tells whether the route is of type blackhole.
func (r Route) Blackhole() bool { return r.Kind == KindBlackhole }

func (r Route) String() string {
	switch {
	case r.Blackhole():
		return "blackhole " + r.Dst.String()
	case !r.Gw.IsValid():
		return r.Dst.String() + " dev " + r.Dev + " scope link"
	}
	s := r.Dst.String() + " via " + r.Gw.String() + " dev " + r.Dev
	if r.OnLink {
		s += " onlink"
	}
	return s
}

// Pool is the part of an IPPool felix needs.
type Pool struct {
	Name        string
	CIDR        netip.Prefix
	IPIPMode    v1.IPIPMode
	NATOutgoing bool
	Disabled    bool
}

// Workload is a pod on this node: its address and its host-side veth.
type Workload struct {
	IP        netip.Addr
	Interface string
}

// BGPRoute is a prefix learned from the BGP speaker with the next hop it carries.
type BGPRoute struct {
	Prefix  netip.Prefix
	NextHop netip.Addr
}

// HostRoute is a usable unicast route of the host's main table that is not tabby's (connected
// subnets, the default route, static routes): next hops of remote routes resolve through them.
type HostRoute struct {
	Dst      netip.Prefix
	Gw       netip.Addr // invalid for a connected route
	Dev      string
	Priority int
}

// Input is everything the routes depend on.
type Input struct {
	UplinkInterface string
	// UplinkInterface6 carries IPv6 next hops of NodeAddr6's subnet; empty: UplinkInterface.
	UplinkInterface6 string
	// NodeAddr is the node's BGP address with its subnet length (198.51.100.11/24): next hops
	// inside that subnet are directly reachable on the uplink.
	NodeAddr netip.Prefix
	// NodeAddr6 is the same for IPv6 (2001:db8:100::11/64); invalid when the node has none.
	NodeAddr6   netip.Prefix
	TunnelAddr  netip.Addr
	Pools       []Pool
	LocalBlocks []netip.Prefix
	Workloads   []Workload
	// WorkloadIndex, when not nil, stands for Workloads (which is then not read): a caller that
	// already indexed the workloads, as felix does to diff them, saves indexing them twice.
	// ComputeInto then reports no workload problems; IndexWorkloads gave them to the caller.
	WorkloadIndex WorkloadIndex
	BGPRoutes     map[netip.Prefix]netip.Addr
	HostRoutes    []HostRoute
}

// Unresolved is a BGP route felix could not program, with the reason.
type Unresolved struct {
	Prefix  netip.Prefix
	NextHop netip.Addr
	Reason  string
}

// Result is the desired dataplane.
type Result struct {
	Routes map[netip.Prefix]Route
	// TunnelNeeded: some pool uses IPIP, so tunl0 must exist and be up.
	TunnelNeeded bool
	// MasqPools are the natOutgoing pools, AllPools every pool (the two NAT ipsets).
	MasqPools, AllPools []netip.Prefix
	Unresolved          []Unresolved
	// Ignored are BGP prefixes outside every pool: not tabby's to program.
	Ignored []netip.Prefix
	// Problems are inputs that were skipped (bad addresses, duplicates), for logs.
	Problems []string
}

// Compute derives the desired routes. Precedence on an equal prefix: local workload, then local
// block, then BGP: a node's own addresses never route away from it.
func Compute(in Input) Result {
	return ComputeInto(in, nil)
}

// ComputeInto is Compute writing the routes into routes (cleared first) when it is not nil: a
// caller recomputing on every pod change reuses two maps instead of allocating one each time.
func ComputeInto(in Input, routes map[netip.Prefix]Route) Result {
	idx := in.WorkloadIndex
	var wlProblems []string
	if idx == nil {
		idx, wlProblems = IndexWorkloads(in.Workloads, nil)
	}
	if routes == nil {
		routes = make(map[netip.Prefix]Route, len(idx)+len(in.LocalBlocks)+len(in.BGPRoutes))
	} else {
		clear(routes)
	}
	res := Result{Routes: routes}
	pools := validPools(in.Pools, &res)
	res.Problems = append(res.Problems, wlProblems...)
	for _, p := range pools {
		res.AllPools = append(res.AllPools, p.CIDR)
		if p.NATOutgoing {
			res.MasqPools = append(res.MasqPools, p.CIDR)
		}
		if p.CIDR.Addr().Is4() && (p.IPIPMode == v1.IPIPModeAlways || p.IPIPMode == v1.IPIPModeCrossSubnet) {
			res.TunnelNeeded = true
		}
	}

	for ip, dev := range idx {
		dst := ipfamily.HostPrefix(ip)
		res.Routes[dst] = Route{Dst: dst, Kind: KindWorkload, Dev: dev}
	}

	for _, b := range in.LocalBlocks {
		if !b.IsValid() || b.Addr().Is4In6() {
			res.Problems = append(res.Problems, fmt.Sprintf("local block %s: not an IPv4 or IPv6 prefix", b))
			continue
		}
		b = b.Masked()
		if _, ok := res.Routes[b]; ok {
			continue
		}
		res.Routes[b] = Route{Dst: b, Kind: KindBlackhole}
	}

	resolver := newResolver(in.HostRoutes, in.UplinkInterface)
	for prefix, nh := range in.BGPRoutes {
		prefix = prefix.Masked()
		if _, ok := res.Routes[prefix]; ok {
			continue
		}
		o := bgpRoute(in, pools, prefix, nh, resolver)
		switch {
		case o.ignored:
			res.Ignored = append(res.Ignored, prefix)
		case o.unresolved != nil:
			res.Unresolved = append(res.Unresolved, *o.unresolved)
		case o.ok:
			res.Routes[prefix] = o.route
		}
	}
	slices.SortFunc(res.Unresolved, func(a, b Unresolved) int { return comparePrefix(a.Prefix, b.Prefix) })
	slices.SortFunc(res.Ignored, comparePrefix)
	return res
}

const reasonOwnNextHop = "next hop is this node"

// bgpOutcome is what a learned BGP prefix makes where no local route holds it: a route (ok), or
// none because no pool holds it (ignored), its next hop is unusable (unresolved), or the next
// hop is this node (none of them).
type bgpOutcome struct {
	route      Route
	ok         bool
	ignored    bool
	unresolved *Unresolved
}

func bgpRoute(in Input, pools []Pool, prefix netip.Prefix, nh netip.Addr, res *resolver) bgpOutcome {
	pool, ok := poolFor(pools, prefix)
	if !ok {
		return bgpOutcome{ignored: true}
	}
	r, reason := remoteRoute(in, pool, prefix, nh, res)
	switch reason {
	case "":
		return bgpOutcome{route: r, ok: true}
	case reasonOwnNextHop:
		return bgpOutcome{}
	}
	return bgpOutcome{unresolved: &Unresolved{Prefix: prefix, NextHop: nh, Reason: reason}}
}

func remoteRoute(in Input, pool Pool, prefix netip.Prefix, nh netip.Addr, res *resolver) (Route, string) {
	fam := ipfamily.OfPrefix(prefix)
	if !nh.IsValid() || ipfamily.OfAddr(nh) != fam {
		return Route{}, fmt.Sprintf("next hop %s is not an %s address", nh, fam)
	}
	nh = nh.Unmap()
	nodeAddr, uplink := in.NodeAddr, in.UplinkInterface
	if fam == ipfamily.IPv6 {
		nodeAddr = in.NodeAddr6
		if in.UplinkInterface6 != "" {
			uplink = in.UplinkInterface6
		}
	}
	if nodeAddr.IsValid() && nh == nodeAddr.Addr() {
		// Our own block reflected back to us.
		return Route{}, reasonOwnNextHop
	}
	sameSubnet := nodeAddr.IsValid() && nodeAddr.Masked().Contains(nh)
	// IPIP carries IPv4 only: an IPv6 pool never tunnels (its ipipMode is refused by validation).
	tunnel := fam == ipfamily.IPv4 && (pool.IPIPMode == v1.IPIPModeAlways || pool.IPIPMode == v1.IPIPModeCrossSubnet && !sameSubnet)
	switch {
	case tunnel:
		return Route{Dst: prefix, Kind: KindTunnel, Dev: TunnelDevice, Gw: nh, OnLink: true}, ""
	case sameSubnet:
		if uplink == "" {
			return Route{}, "no uplink interface configured"
		}
		return Route{Dst: prefix, Kind: KindRemote, Dev: uplink, Gw: nh}, ""
	}
	// Never (or an unknown mode) across subnets: like BIRD's "gateway recursive", route via the
	// host's own route to the next hop.
	gw, dev, ok := res.resolve(nh)
	if !ok {
		return Route{}, fmt.Sprintf("no host route to next hop %s", nh)
	}
	return Route{Dst: prefix, Kind: KindRemote, Dev: dev, Gw: gw}, ""
}

func validPools(pools []Pool, res *Result) []Pool {
	out := make([]Pool, 0, len(pools))
	for _, p := range pools {
		if !p.CIDR.IsValid() || p.CIDR.Addr().Is4In6() {
			res.Problems = append(res.Problems, fmt.Sprintf("pool %s cidr %s: not an IPv4 or IPv6 prefix", p.Name, p.CIDR))
			continue
		}
		p.CIDR = p.CIDR.Masked()
		out = append(out, p)
	}
	// Most specific first, so a prefix takes the mode of the narrowest pool holding it.
	slices.SortStableFunc(out, func(a, b Pool) int { return cmp.Compare(b.CIDR.Bits(), a.CIDR.Bits()) })
	return out
}

func poolFor(pools []Pool, prefix netip.Prefix) (Pool, bool) {
	for _, p := range pools {
		if p.CIDR.Bits() <= prefix.Bits() && p.CIDR.Contains(prefix.Addr()) {
			return p, true
		}
	}
	return Pool{}, false
}

// resolver does a longest-prefix match over the host's routes, memoised per next hop.
type resolver struct {
	routes []HostRoute
	memo   map[netip.Addr]HostRoute
}

func newResolver(routes []HostRoute, uplink string) *resolver {
	usable := make([]HostRoute, 0, len(routes))
	for _, r := range routes {
		// Tabby's own devices never carry an underlay next hop: resolving through them would
		// loop pod traffic back into the pod network.
		if !r.Dst.IsValid() || r.Dev == "" || r.Dev == TunnelDevice || strings.HasPrefix(r.Dev, "cali") {
			continue
		}
		usable = append(usable, r)
	}
	slices.SortStableFunc(usable, func(a, b HostRoute) int {
		if c := cmp.Compare(b.Dst.Bits(), a.Dst.Bits()); c != 0 {
			return c
		}
		return cmp.Compare(a.Priority, b.Priority)
	})
	return &resolver{routes: usable, memo: map[netip.Addr]HostRoute{}}
}

func (r *resolver) resolve(nh netip.Addr) (gw netip.Addr, dev string, ok bool) {
	hr, ok := r.memo[nh]
	if !ok {
		for _, cand := range r.routes {
			if cand.Dst.Contains(nh) {
				hr, ok = cand, true
				break
			}
		}
		if !ok {
			return netip.Addr{}, "", false
		}
		r.memo[nh] = hr
	}
	if !hr.Gw.IsValid() {
		// Connected on some interface: the next hop itself is the gateway.
		return nh, hr.Dev, true
	}
	return hr.Gw, hr.Dev, true
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}
