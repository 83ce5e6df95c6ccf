package bird

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/speaker"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The routes bird hands the dataplane: GoBGP's best path to each prefix and, with ECMP
// (BGPConfiguration maxPaths), the next hops of the paths that tie with it. GoBGP decides the
// best path; the paths each peer contributes after the import policy (speaker.AcceptedPath)
// say which others are of equal cost. GoBGP's own multipath is not used: its switch is one
// global for every server in a process, and its equality compares MEDs across neighbour ASes.

// bestPath is GoBGP's best path to a prefix learned from a peer.
type bestPath struct {
	peer    netip.Addr
	nextHop netip.Addr
}

// candidate is one peer's path to a prefix, as the import policy let it in.
type candidate struct {
	nextHop netip.Addr
	attrs   speaker.PathAttrs
}

// equalCost tells whether two paths tie in the BGP decision down to, and excluding, the
// router-ID and peer-address tie-breakers, as BIRD's `merge paths` and FRR's maximum-paths
// decide: LOCAL_PREF, AS-path length, origin, MED between paths from one neighbour AS, eBGP
// versus iBGP. IGP cost ties always: tabby resolves no next hop through an IGP.
func equalCost(a, b speaker.PathAttrs) bool {
	return a.LocalPref == b.LocalPref && a.ASPathLen == b.ASPathLen && a.Origin == b.Origin &&
		a.IBGP == b.IBGP && (a.NeighborAS != b.NeighborAS || a.MED == b.MED)
}

// equalCostHops are the next hops of the best path and of the paths of equal cost (at most
// maxPaths in all, the best's always), in model.SortNextHops order; nil when the best path's is
// the only one. Of more ties than maxPaths, the lowest next hops are kept, so that every node
// picks the same. A path kept only for its peer's graceful restart joins no other: the peer may
// be gone with its forwarding (a ToR whose BFD session failed), and the paths still fresh carry
// the traffic.
func equalCostHops(best bestPath, paths map[netip.Addr]candidate, maxPaths int) []netip.Addr {
	b, ok := paths[best.peer]
	if !ok || maxPaths <= 1 || b.nextHop != best.nextHop {
		return nil
	}
	var others []netip.Addr
	for peer, c := range paths {
		if peer == best.peer || c.attrs.Stale || !usableNextHop(c.nextHop, best.nextHop.Is4()) || c.nextHop == best.nextHop || !equalCost(c.attrs, b.attrs) {
			continue
		}
		others = append(others, c.nextHop)
	}
	others = model.SortNextHops(others)
	if len(others) == 0 {
		return nil
	}
	return model.SortNextHops(append(others[:min(len(others), maxPaths-1)], best.nextHop))
}

// usableNextHop: a next hop of the other family (an IPv4 route over an IPv6 next hop, RFC 8950)
// is not something the dataplane can install.
func usableNextHop(nh netip.Addr, v4 bool) bool { return nh.IsValid() && nh.Is4() == v4 }

// maxPaths is the BGPConfiguration's maxPaths, or its default.
func (in *inputs) maxPaths() int { return maxPaths(in.bgpConf) }

func maxPaths(c *v1.BGPConfiguration) int {
	if c != nil && c.Spec.MaxPaths != nil {
		return int(*c.Spec.MaxPaths)
	}
	return v1.DefaultMaxPaths
}

// externalAllowedLocked tells whether a prefix outside the pools, learned from a router that is
// not a tabby node, may reach the dataplane: never a service CIDR or anything inside one, nor
// anything inside this node's own subnet (its address, its neighbours). A wider prefix (a
// default route) is fine: the kernel prefers the narrower routes it covers.
func (b *Bird) externalAllowedLocked(prefix netip.Prefix, peer netip.Addr) bool {
	if p, ok := b.desired[peer]; !ok || p.Node != "" {
		return false
	}
	inside := func(outer netip.Prefix) bool {
		return outer.IsValid() && outer.Bits() <= prefix.Bits() && outer.Masked().Contains(prefix.Addr())
	}
	if slices.ContainsFunc(b.in.services, inside) {
		return false
	}
	for _, f := range ipfamily.All {
		if inside(b.speakerCfg.Address.Get(f)) {
			return false
		}
	}
	return true
}

// routeLocked brings what Config.Routes was told of prefix in line with the best path and the
// paths of equal cost, and returns the message that does (nil: nothing changed).
func (b *Bird) routeLocked(prefix netip.Prefix) any {
	prev, told := b.told[prefix]
	best, ok := b.best[prefix]
	var want model.RouteUpdate
	learned := false
	if ok && usableNextHop(best.nextHop, prefix.Addr().Is4()) {
		switch {
		case b.in.inPools(prefix):
			learned = true
		case b.externalAllowedLocked(prefix, best.peer):
			learned, want.External = true, true
		}
	}
	if learned {
		want.Prefix, want.NextHop = prefix, best.nextHop
		want.NextHops = equalCostHops(best, b.received[prefix], b.in.maxPaths())
	}
	if learned && (len(want.NextHops) > 1 || want.External) {
		b.shown[prefix] = struct{}{}
	} else {
		delete(b.shown, prefix)
	}
	switch {
	case learned && (!told || !prev.Equal(want)):
		b.told[prefix] = want
		return want
	case !learned && told:
		delete(b.told, prefix)
		return model.RouteRemove{Prefix: prefix}
	}
	return nil
}

// onBest records GoBGP's best path to a prefix and hands the route it makes to Config.Routes. A
// prefix whose best path becomes one of ours (or leaves the pools) is removed from the
// dataplane.
func (b *Bird) onBest(e speaker.Event) {
	b.tellMu.Lock()
	defer b.tellMu.Unlock()
	b.mu.Lock()
	b.lastUpdate = e.Time
	if !e.Withdrawn && e.Peer.IsValid() {
		b.best[e.Prefix] = bestPath{peer: e.Peer, nextHop: e.NextHop}
	} else {
		delete(b.best, e.Prefix)
	}
	msg := b.routeLocked(e.Prefix)
	b.mu.Unlock()
	b.tell(msg)
}

// onAccepted records a peer's path to a prefix (or its end); a path that ties with the best one,
// or did, changes the route.
func (b *Bird) onAccepted(e speaker.Event) {
	b.tellMu.Lock()
	defer b.tellMu.Unlock()
	b.mu.Lock()
	ps := b.received[e.Prefix]
	if e.Withdrawn {
		delete(ps, e.Peer)
		if len(ps) == 0 {
			delete(b.received, e.Prefix)
		}
	} else {
		if ps == nil {
			ps = map[netip.Addr]candidate{}
			b.received[e.Prefix] = ps
		}
		ps[e.Peer] = candidate{nextHop: e.NextHop, attrs: e.Attrs}
	}
	var msg any
	if _, ok := b.best[e.Prefix]; ok {
		msg = b.routeLocked(e.Prefix)
	}
	b.mu.Unlock()
	b.tell(msg)
}

// retell brings every route in line again (maxPaths or the pools changed).
func (b *Bird) retell() {
	b.tellMu.Lock()
	defer b.tellMu.Unlock()
	b.mu.Lock()
	prefixes := slices.Collect(maps.Keys(b.best))
	for p := range b.told {
		if _, ok := b.best[p]; !ok {
			prefixes = append(prefixes, p)
		}
	}
	slices.SortFunc(prefixes, netip.Prefix.Compare)
	var msgs []any
	for _, p := range prefixes {
		if m := b.routeLocked(p); m != nil {
			msgs = append(msgs, m)
		}
	}
	b.mu.Unlock()
	for _, m := range msgs {
		b.tell(m)
	}
}

func (b *Bird) tell(msg any) {
	if msg != nil && b.cfg.Routes != nil {
		b.cfg.Routes(msg)
	}
}

// learnedStatusLocked fills the reply's multipath and external routes.
func (b *Bird) learnedStatusLocked(reply *status.PeersReply) {
	for p := range b.shown {
		if len(b.told[p].NextHops) > 1 {
			reply.RoutesMultipath++
		}
	}
	shown := slices.SortedFunc(maps.Keys(b.shown), netip.Prefix.Compare)
	if len(shown) > status.MaxLearnedShown {
		reply.LearnedMore = len(shown) - status.MaxLearnedShown
		shown = shown[:status.MaxLearnedShown]
	}
	for _, p := range shown {
		u := b.told[p]
		r := status.LearnedRoute{Prefix: p.String(), External: u.External}
		for _, h := range u.BestFirst() {
			r.NextHops = append(r.NextHops, h.String())
		}
		reply.Learned = append(reply.Learned, r)
	}
}
