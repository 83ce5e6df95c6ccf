package calc

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// VXLANState is one family's VXLAN on this node.
type VXLANState struct {
	// Device: a VXLAN pool of the family exists and this node has its VTEP of it (Local).
	Device bool
	Local  VTEP
	// Peers are the other nodes' VTEPs programmed on the device (neighbour and FDB entries),
	// by node; none without the device.
	Peers map[string]VTEP
}

// vxlanResult is computeVXLAN's answer.
type vxlanResult struct {
	routes   map[netip.Prefix]Route
	state    ipfamily.Pair[VXLANState]
	noRoutes []NoRoute
}

// computeVXLAN makes the VXLAN decisions over a whole input, as felix/vxlan makes them change by
// change.
func computeVXLAN(in Input, pools Pools) vxlanResult {
	res := vxlanResult{routes: map[netip.Prefix]Route{}}
	var this model.Node
	nodes := map[string]model.Node{}
	for _, n := range in.Nodes {
		if n.Name == in.NodeName {
			this = n
		} else {
			nodes[n.Name] = n
		}
	}
	type peerState struct {
		vtep     VTEP
		ok       bool
		conflict string
	}
	var peers ipfamily.Pair[map[string]peerState]
	for _, fam := range ipfamily.All {
		local, localOK := NodeVTEP(this, fam)
		vteps := map[string]VTEP{}
		byAddr, byMAC := map[netip.Addr][]string{}, map[model.MAC][]string{}
		for name, n := range nodes {
			if v, ok := NodeVTEP(n, fam); ok {
				vteps[name] = v
				byAddr[v.Addr] = append(byAddr[v.Addr], name)
				byMAC[v.MAC] = append(byMAC[v.MAC], name)
			}
		}
		for _, h := range byAddr {
			slices.Sort(h)
		}
		for _, h := range byMAC {
			slices.Sort(h)
		}
		ps := map[string]peerState{}
		st := VXLANState{
			Device: localOK && slices.ContainsFunc(pools, func(p model.Pool) bool { return p.VXLAN() && p.Family() == fam }),
			Local:  local,
		}
		if st.Device {
			st.Peers = map[string]VTEP{}
		}
		for name, v := range vteps {
			why := PeerConflict(v, PeerHolders{Addr: byAddr[v.Addr], MAC: byMAC[v.MAC]}, local, localOK)
			ps[name] = peerState{vtep: v, ok: why == "", conflict: why}
			if why == "" && st.Device {
				st.Peers[name] = v
			}
		}
		peers.Set(fam, ps)
		res.state.Set(fam, st)
	}

	claims := map[netip.Prefix][]Claim{}
	for _, b := range in.Blocks {
		for _, c := range BlockClaims(b, in.NodeName) {
			claims[c.Prefix] = append(claims[c.Prefix], c)
		}
	}
	for p, cl := range claims {
		pool, ok := pools.For(p)
		if !ok || !pool.VXLAN() {
			continue
		}
		best := slices.MinFunc(cl, CompareClaims)
		fam := ipfamily.OfPrefix(p)
		n, known := nodes[best.Node]
		ps := peers.Get(fam)[best.Node]
		t := VXLANTarget{
			Node: best.Node, Known: known, Underlay: n.BGPAddress.Get(fam).Addr(),
			Peer: ps.vtep, PeerOK: ps.ok, Conflict: ps.conflict, LocalVTEP: res.state.Get(fam).Local.Addr.IsValid(),
		}
		if !ps.ok {
			t.Peer = VTEP{}
		}
		r, reason := VXLANRoute(in.Underlay, pool, p, t)
		if reason != "" {
			res.noRoutes = append(res.noRoutes, NoRoute{Prefix: p, Node: best.Node, Reason: reason})
			continue
		}
		res.routes[p] = r
	}
	slices.SortFunc(res.noRoutes, func(a, b NoRoute) int { return a.Prefix.Compare(b.Prefix) })
	return res
}
