// Package calc decides the routes felix wants in the kernel from the cluster's model and the BGP
// speaker's routes. It is pure: no netlink, no clock, so every decision is testable with a
// table. The managers call its per-object decisions (LearnedRoute, WorkloadRoute,
// BlackholeRoute) as changes arrive; Compute is the same decisions over a whole input, the
// reference the managers are tested against.
package calc

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/apis/model"
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
	KindVXLAN                     // <prefix> via <remote VTEP> dev vxlan.tabby onlink
)

// Kinds lists every kind, for metrics that report zero counts too.
var Kinds = []Kind{KindWorkload, KindBlackhole, KindRemote, KindTunnel, KindVXLAN}

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
	case KindVXLAN:
		return "vxlan"
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
	// Multipath, when set, are the next hops of an equal-cost multipath route (two or more,
	// sorted: see NewMultipath); Dev, Gw and OnLink are then its first.
	Multipath []NextHop
}

// NextHop is one path of a multipath route.
type NextHop struct {
	Gw     netip.Addr
	Dev    string
	OnLink bool
}

func compareNextHops(a, b NextHop) int {
	return cmp.Or(a.Gw.Compare(b.Gw), strings.Compare(a.Dev, b.Dev), cmp.Compare(boolInt(a.OnLink), boolInt(b.OnLink)))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// NewMultipath is the route to dst over hops (duplicates dropped, order irrelevant): a plain
// route over the one next hop left, or a multipath route whose first hop is the lowest.
func NewMultipath(dst netip.Prefix, kind Kind, hops []NextHop) Route {
	hs := slices.Clone(hops)
	slices.SortFunc(hs, compareNextHops)
	hs = slices.Compact(hs)
	r := Route{Dst: dst, Kind: kind}
	if len(hs) == 0 {
		return r
	}
	r.Gw, r.Dev, r.OnLink = hs[0].Gw, hs[0].Dev, hs[0].OnLink
	if len(hs) > 1 {
		r.Multipath = hs
	}
	return r
}

// Equal compares two routes, next hops included.
func (r Route) Equal(o Route) bool {
	return r.Dst == o.Dst && r.Kind == o.Kind && r.Dev == o.Dev && r.Gw == o.Gw && r.OnLink == o.OnLink && slices.Equal(r.Multipath, o.Multipath)
}

// Devs are the interfaces the route goes out of.
func (r Route) Devs() []string {
	if len(r.Multipath) == 0 {
		if r.Dev == "" {
			return nil
		}
		return []string{r.Dev}
	}
	out := make([]string, 0, len(r.Multipath))
	for _, h := range r.Multipath {
		if !slices.Contains(out, h.Dev) {
			out = append(out, h.Dev)
		}
	}
	return out
}

// Blackhole tells whether the route is of type blackhole.
func (r Route) Blackhole() bool { return r.Kind == KindBlackhole }

func (r Route) String() string {
	switch {
	case r.Blackhole():
		return "blackhole " + r.Dst.String()
	case !r.Gw.IsValid():
		return r.Dst.String() + " dev " + r.Dev + " scope link"
	case len(r.Multipath) > 0:
		s := r.Dst.String()
		for _, h := range r.Multipath {
			s += " nexthop via " + h.Gw.String() + " dev " + h.Dev
			if h.OnLink {
				s += " onlink"
			}
		}
		return s
	}
	s := r.Dst.String() + " via " + r.Gw.String() + " dev " + r.Dev
	if r.OnLink {
		s += " onlink"
	}
	return s
}

// WorkloadRoute is a local pod's host route on its veth.
func WorkloadRoute(ip netip.Addr, dev string) Route {
	return Route{Dst: ipfamily.HostPrefix(ip), Kind: KindWorkload, Dev: dev}
}

// BlackholeRoute is a local block's: the addresses of the block no pod has are dropped here
// rather than sent back out along the default route.
func BlackholeRoute(block netip.Prefix) Route {
	return Route{Dst: block.Masked(), Kind: KindBlackhole}
}

// ValidWorkloadAddr tells whether a workload's address can have a route: an IPv4 or IPv6
// address, not IPv4-mapped IPv6 (neither family).
func ValidWorkloadAddr(ip netip.Addr) bool { return ip.IsValid() && !ip.Is4In6() }

// ValidPrefix tells whether p is an IPv4 or IPv6 prefix tabby can route (not IPv4-mapped IPv6).
func ValidPrefix(p netip.Prefix) bool { return p.IsValid() && !p.Addr().Is4In6() }

// UsesIPIP tells whether a pool sends its traffic between nodes through tunl0, at least across
// subnets: IPIP carries IPv4 only, so an IPv6 pool never does, whatever a stale object says.
func UsesIPIP(p model.Pool) bool { return p.Family() == ipfamily.IPv4 && p.IPIP() }

// encapsulate tells whether traffic to p's block on another node goes through tunl0, the next
// hop being in this node's subnet (sameSubnet) or not.
func encapsulate(p model.Pool, sameSubnet bool) bool {
	return UsesIPIP(p) && (p.IPIPMode == v1.IPIPModeAlways || !sameSubnet)
}

// HostRoute is a usable unicast route of the host's main table that is not tabby's (connected
// subnets, the default route, static routes): next hops of remote routes resolve through them.
type HostRoute struct {
	Dst      netip.Prefix
	Gw       netip.Addr // invalid for a connected route
	Dev      string
	Priority int
}

// Underlay is this node on the network between the nodes: what its routes to the others
// depend on of it.
type Underlay struct {
	// Addr is the node's BGP address of each family with its subnet length (198.51.100.11/24):
	// next hops inside that subnet are directly reachable on the uplink. Invalid where the node
	// has none of that family.
	Addr ipfamily.Pair[netip.Prefix]
	// Uplink is the interface holding Addr, per family.
	Uplink ipfamily.Pair[string]
}

// Unresolved is a BGP route felix could not program, with the reason; or, Partial, a next hop
// a multipath route is programmed without (the route goes over its other next hops).
type Unresolved struct {
	Prefix  netip.Prefix
	NextHop netip.Addr
	Reason  string
	Partial bool
}

func (u Unresolved) String() string {
	if u.Partial {
		return fmt.Sprintf("next hop %s: %s (routed over the other next hops)", u.NextHop, u.Reason)
	}
	return fmt.Sprintf("next hop %s: %s", u.NextHop, u.Reason)
}

// Learned is what a prefix learned from BGP makes: a route (OK), or none because no pool holds
// it (Ignored), its next hop is unusable (Unresolved), or the next hop is this node (none of
// them). In a VXLAN pool (VXLAN), whose routes come from the datastore, it is at most the
// fallback vxlanFallback describes, and never unresolved. A local route
// of the same prefix takes precedence over it in the route table.
type Learned struct {
	Route      Route
	OK         bool
	Ignored    bool
	VXLAN      bool
	Unresolved *Unresolved
}

const reasonOwnNextHop = "next hop is this node"

// LearnedRoute decides the route to prefix, learned from BGP with next hop nh.
func LearnedRoute(u Underlay, pools Pools, res *Resolver, prefix netip.Prefix, nh netip.Addr) Learned {
	prefix = prefix.Masked()
	pool, ok := pools.For(prefix)
	if !ok {
		return Learned{Ignored: true}
	}
	if pool.VXLAN() {
		return vxlanFallback(u, prefix, nh)
	}
	r, reason := remoteRoute(u, pool, prefix, nh, res)
	switch reason {
	case "":
		return Learned{Route: r, OK: true}
	case reasonOwnNextHop:
		return Learned{}
	}
	return Learned{Unresolved: &Unresolved{Prefix: prefix, NextHop: nh, Reason: reason}}
}

// LearnedPaths decides the route to prefix over the next hops of its equal-cost BGP paths (the
// best path's first): LearnedRoute's for one, a multipath route over those that resolve for
// several. An external router's prefix (outside every pool) is ExternalRoute's.
func LearnedPaths(u Underlay, pools Pools, res *Resolver, prefix netip.Prefix, hops []netip.Addr, external bool) Learned {
	prefix = prefix.Masked()
	if len(hops) == 0 {
		return Learned{}
	}
	pool, ok := pools.For(prefix)
	switch {
	case ok == external:
		// A pool's prefix when there is none any more, or an external one a pool now holds.
		return Learned{Ignored: true}
	case external:
		return ExternalRoute(u, res, prefix, hops)
	case pool.VXLAN():
		return vxlanFallback(u, prefix, hops[0])
	case len(hops) == 1:
		return LearnedRoute(u, pools, res, prefix, hops[0])
	}
	return multipath(prefix, hops, func(nh netip.Addr) (Route, string) { return remoteRoute(u, pool, prefix, nh, res) })
}

// multipath is the route over the hops that resolve (one: a plain route), with the first that
// does not as a Partial report, or the best path's reason when none does.
func multipath(prefix netip.Prefix, hops []netip.Addr, resolve func(netip.Addr) (Route, string)) Learned {
	var out []NextHop
	kind := KindRemote
	var first *Unresolved
	for _, nh := range hops {
		r, reason := resolve(nh)
		switch reason {
		case "":
			if len(out) == 0 {
				kind = r.Kind
			}
			out = append(out, NextHop{Gw: r.Gw, Dev: r.Dev, OnLink: r.OnLink})
		case reasonOwnNextHop:
		default:
			if first == nil {
				first = &Unresolved{Prefix: prefix, NextHop: nh, Reason: reason}
			}
		}
	}
	if len(out) > 0 {
		l := Learned{Route: NewMultipath(prefix, kind, out), OK: true}
		if first != nil {
			first.Partial = true
			l.Unresolved = first
		}
		return l
	}
	if first != nil {
		return Learned{Unresolved: first}
	}
	return Learned{}
}

// ExternalRoute decides the route to a prefix outside every pool that an external router
// announced (a ToR's default route): over each next hop on this node's subnet directly, or
// through the host's route to it. The host's own route to the same prefix (a default route from
// DHCP, a static route) is never displaced: the prefix is then reported, not routed. Nor is a
// route inside this node's own subnet taken from BGP.
func ExternalRoute(u Underlay, res *Resolver, prefix netip.Prefix, hops []netip.Addr) Learned {
	prefix = prefix.Masked()
	fam := ipfamily.OfPrefix(prefix)
	if own := u.Addr.Get(fam); own.IsValid() && own.Bits() <= prefix.Bits() && own.Masked().Contains(prefix.Addr()) {
		return Learned{Unresolved: &Unresolved{Prefix: prefix, NextHop: hops[0], Reason: "inside this node's own subnet " + own.Masked().String()}}
	}
	if hr, ok := res.Holds(prefix); ok {
		return Learned{Unresolved: &Unresolved{Prefix: prefix, NextHop: hops[0], Reason: "the host has its own route to this prefix (dev " + hr.Dev + "): not displaced"}}
	}
	return multipath(prefix, hops, func(nh netip.Addr) (Route, string) {
		if !nh.IsValid() || ipfamily.OfAddr(nh) != fam {
			return Route{}, fmt.Sprintf("next hop %s is not an %s address", nh, fam)
		}
		nh = nh.Unmap()
		own, uplink := u.Addr.Get(fam), u.Uplink.Get(fam)
		switch {
		case own.IsValid() && nh == own.Addr():
			return Route{}, reasonOwnNextHop
		case own.IsValid() && own.Masked().Contains(nh) && uplink != "":
			return Route{Dst: prefix, Kind: KindRemote, Dev: uplink, Gw: nh}, ""
		}
		gw, dev, ok := res.Resolve(nh)
		if !ok {
			return Route{}, fmt.Sprintf("no host route to next hop %s", nh)
		}
		return Route{Dst: prefix, Kind: KindRemote, Dev: dev, Gw: gw}, ""
	})
}

// vxlanFallback is what BGP's route to prefix, in a VXLAN pool, gives the route table: a VXLAN
// pool's prefixes are routed from the datastore (felix/vxlan), ahead of BGP, so this route is
// only used while that one is missing, such as in the passes after the pool switched from IPIP
// to VXLAN and before IPAM has given the nodes their VTEPs, when the prefix would otherwise have
// no route at all. It is native, and only to a next hop in this node's subnet, which the uplink
// reaches without encapsulation whatever the pool's mode. Across subnets there is none, as in
// Calico: the pool allows no IPIP any more (and a tunl0 route kept from the mode it had would
// contradict the pool and be lost by a restart), and a native route through the host's gateway
// would go where the default route already sends the packets. It is never reported unresolved:
// the VXLAN manager reports the prefixes it has no route for.
func vxlanFallback(u Underlay, prefix netip.Prefix, nh netip.Addr) Learned {
	fam := ipfamily.OfPrefix(prefix)
	own, uplink := u.Addr.Get(fam), u.Uplink.Get(fam)
	if !nh.IsValid() || ipfamily.OfAddr(nh) != fam || !own.IsValid() || uplink == "" {
		return Learned{VXLAN: true}
	}
	nh = nh.Unmap()
	if nh == own.Addr() || !own.Masked().Contains(nh) {
		return Learned{VXLAN: true}
	}
	return Learned{VXLAN: true, OK: true, Route: Route{Dst: prefix, Kind: KindRemote, Dev: uplink, Gw: nh}}
}

func remoteRoute(u Underlay, pool model.Pool, prefix netip.Prefix, nh netip.Addr, res *Resolver) (Route, string) {
	fam := ipfamily.OfPrefix(prefix)
	if !nh.IsValid() || ipfamily.OfAddr(nh) != fam {
		return Route{}, fmt.Sprintf("next hop %s is not an %s address", nh, fam)
	}
	nh = nh.Unmap()
	nodeAddr, uplink := u.Addr.Get(fam), u.Uplink.Get(fam)
	if nodeAddr.IsValid() && nh == nodeAddr.Addr() {
		// Our own block reflected back to us.
		return Route{}, reasonOwnNextHop
	}
	sameSubnet := nodeAddr.IsValid() && nodeAddr.Masked().Contains(nh)
	switch {
	case encapsulate(pool, sameSubnet):
		return Route{Dst: prefix, Kind: KindTunnel, Dev: TunnelDevice, Gw: nh, OnLink: true}, ""
	case sameSubnet:
		if uplink == "" {
			return Route{}, "no uplink interface configured"
		}
		return Route{Dst: prefix, Kind: KindRemote, Dev: uplink, Gw: nh}, ""
	}
	// Never (or an unknown mode) across subnets: like BIRD's "gateway recursive", route via the
	// host's own route to the next hop.
	gw, dev, ok := res.Resolve(nh)
	if !ok {
		return Route{}, fmt.Sprintf("no host route to next hop %s", nh)
	}
	return Route{Dst: prefix, Kind: KindRemote, Dev: dev, Gw: gw}, ""
}

// Pools are the pools a learned prefix is looked up in, most specific first: a prefix takes
// the mode of the narrowest pool holding it.
type Pools []model.Pool

// NewPools orders pools for For, leaving out those whose CIDR is not an IPv4 or IPv6 prefix
// (returned, for the caller to report).
func NewPools(pools []model.Pool) (Pools, []model.Pool) {
	out := make(Pools, 0, len(pools))
	var bad []model.Pool
	for _, p := range pools {
		if !ValidPrefix(p.CIDR) {
			bad = append(bad, p)
			continue
		}
		p.CIDR = p.CIDR.Masked()
		out = append(out, p)
	}
	// By name within a length, so the choice between two equal pools does not depend on the
	// order they came in.
	slices.SortFunc(out, func(a, b model.Pool) int {
		return cmp.Or(cmp.Compare(b.CIDR.Bits(), a.CIDR.Bits()), strings.Compare(a.Name, b.Name), a.CIDR.Compare(b.CIDR))
	})
	return out, bad
}

// For returns the narrowest pool holding prefix.
func (ps Pools) For(prefix netip.Prefix) (model.Pool, bool) {
	for _, p := range ps {
		if p.CIDR.Bits() <= prefix.Bits() && p.CIDR.Contains(prefix.Addr()) {
			return p, true
		}
	}
	return model.Pool{}, false
}

// Resolver does a longest-prefix match over the host's routes, memoised per next hop.
type Resolver struct {
	routes []HostRoute
	memo   map[netip.Addr]HostRoute
}

// NewResolver resolves through routes.
func NewResolver(routes []HostRoute) *Resolver {
	usable := make([]HostRoute, 0, len(routes))
	for _, r := range routes {
		// Tabby's own devices never carry an underlay next hop: resolving through them would
		// loop pod traffic back into the pod network.
		if !r.Dst.IsValid() || r.Dev == "" || r.Dev == TunnelDevice || IsVXLANDevice(r.Dev) || strings.HasPrefix(r.Dev, "cali") {
			continue
		}
		usable = append(usable, r)
	}
	slices.SortStableFunc(usable, func(a, b HostRoute) int {
		return cmp.Or(cmp.Compare(b.Dst.Bits(), a.Dst.Bits()), cmp.Compare(a.Priority, b.Priority))
	})
	return &Resolver{routes: usable, memo: map[netip.Addr]HostRoute{}}
}

// Holds returns the host's own route to exactly prefix, if it has one.
func (r *Resolver) Holds(prefix netip.Prefix) (HostRoute, bool) {
	for _, hr := range r.routes {
		if hr.Dst.Masked() == prefix {
			return hr, true
		}
	}
	return HostRoute{}, false
}

// Resolve returns the gateway and device the host reaches nh through.
func (r *Resolver) Resolve(nh netip.Addr) (gw netip.Addr, dev string, ok bool) {
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
