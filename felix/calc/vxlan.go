package calc

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// VXLAN in felix: every node of a family with a VXLAN pool has a device (VXLANDevice) with its
// VTEP address and MAC; every other node's VTEP is a permanent neighbour entry (VTEP address →
// MAC) and a permanent FDB entry (MAC → the node's underlay address) on it; and every block of
// a VXLAN pool on another node, and every address another node borrowed in a block, is routed
// via that node's VTEP address on the device, onlink, as flannel does. Nothing is learned: the
// datastore says it all. The decisions below are per object, for the manager (felix/vxlan) to
// take as changes arrive and for Compute to take over a whole input.

// VXLANDevice is the name of tabby's VXLAN device of family f.
func VXLANDevice(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "vxlan-v6.tabby"
	}
	return "vxlan.tabby"
}

// IsVXLANDevice tells whether name is one of tabby's VXLAN devices.
func IsVXLANDevice(name string) bool {
	return name == VXLANDevice(ipfamily.IPv4) || name == VXLANDevice(ipfamily.IPv6)
}

// VTEP is a node's VXLAN endpoint of one family: the address and MAC of its VXLAN device, and
// its underlay address, where the encapsulated packets go.
type VTEP struct {
	Node     string
	Addr     netip.Addr
	MAC      model.MAC
	Underlay netip.Addr
}

func (v VTEP) String() string {
	return fmt.Sprintf("%s (VTEP %s, MAC %s, underlay %s)", v.Node, v.Addr, v.MAC, v.Underlay)
}

// NodeVTEP is n's VTEP of family f, when the node has all of it: a VTEP address and the
// underlay address of f, and a unicast MAC.
func NodeVTEP(n model.Node, f ipfamily.Family) (VTEP, bool) {
	v := VTEP{Node: n.Name, Addr: n.VXLANTunnelAddr.Get(f), MAC: n.VXLANMAC.Get(f), Underlay: n.BGPAddress.Get(f).Addr()}
	ok := v.Addr.IsValid() && ipfamily.OfAddr(v.Addr) == f && !v.Addr.Is4In6() &&
		v.Underlay.IsValid() && ipfamily.OfAddr(v.Underlay) == f && !v.Underlay.Is4In6() &&
		!v.MAC.IsZero() && v.MAC[0]&1 == 0
	if !ok {
		return VTEP{}, false
	}
	return v, true
}

// PeerHolders are, for a VTEP, the nodes whose VTEP of the same family has its address
// (Addr) and its MAC (MAC), the VTEP's own node among them, each sorted by name.
type PeerHolders struct {
	Addr, MAC []string
}

// PeerConflict says why v, a remote node's VTEP, is not programmed ("" when it is): no two
// peers may share an address (one neighbour entry per address) or a MAC (one FDB entry per
// MAC), so of those sharing one the first node by name is programmed, whatever the order they
// came in, and none sharing this node's own (local, when ok).
func PeerConflict(v VTEP, h PeerHolders, local VTEP, ok bool) string {
	switch {
	case ok && v.Addr == local.Addr:
		return fmt.Sprintf("its VTEP address %s is this node's", v.Addr)
	case ok && v.MAC == local.MAC:
		return fmt.Sprintf("its VTEP MAC %s is this node's", v.MAC)
	case len(h.Addr) > 0 && h.Addr[0] != v.Node:
		return fmt.Sprintf("its VTEP address %s is node %s's too", v.Addr, h.Addr[0])
	case len(h.MAC) > 0 && h.MAC[0] != v.Node:
		return fmt.Sprintf("its VTEP MAC %s is node %s's too", v.MAC, h.MAC[0])
	}
	return ""
}

// Claim is a prefix a block asks to be routed to another node: the block itself to the node it
// is affine to, or an address borrowed in it to the node that borrowed it.
type Claim struct {
	Prefix netip.Prefix
	Node   string
	// Block is the block the claim comes from (Prefix, for the block's own claim).
	Block netip.Prefix
}

// BlockClaims are what block b routes to nodes other than this one. A borrowed address of the
// block's own node is covered by the block's claim; one of this node's is a local workload's.
func BlockClaims(b model.Block, this string) []Claim {
	if !ValidPrefix(b.CIDR) {
		return nil
	}
	cidr := b.CIDR.Masked()
	var out []Claim
	if b.Node != "" && b.Node != this {
		out = append(out, Claim{Prefix: cidr, Node: b.Node, Block: cidr})
	}
	for _, a := range b.Borrowed {
		if a.Node == "" || a.Node == this || a.Node == b.Node || !ValidWorkloadAddr(a.Addr) {
			continue
		}
		out = append(out, Claim{Prefix: ipfamily.HostPrefix(a.Addr), Node: a.Node, Block: cidr})
	}
	return out
}

// CompareClaims orders claims to one prefix, the one routed first: a block's own claim before
// an address borrowed in another block, then by block and by node, so that the choice does not
// depend on the order the blocks came in.
func CompareClaims(a, b Claim) int {
	aOwn, bOwn := a.Block == a.Prefix, b.Block == b.Prefix
	switch {
	case aOwn && !bOwn:
		return -1
	case bOwn && !aOwn:
		return 1
	}
	return cmp.Or(ipfamily.ComparePrefixes(a.Block, b.Block), strings.Compare(a.Node, b.Node))
}

// VXLANTarget is what a VXLAN route to a node depends on of that node and of this one.
type VXLANTarget struct {
	// Node is the node the prefix is routed to; Known is whether a NodeUpdate told of it.
	Node  string
	Known bool
	// Underlay is the node's underlay address of the prefix's family (invalid: none).
	Underlay netip.Addr
	// Peer is the node's VTEP when it is programmed on this node; otherwise Conflict says
	// why, or is "" when the node has no complete VTEP.
	Peer     VTEP
	PeerOK   bool
	Conflict string
	// LocalVTEP: this node has its VTEP of the prefix's family, so its VXLAN device exists.
	LocalVTEP bool
}

// VXLANRoute decides the route to prefix, in VXLAN pool pool, towards target: natively via the
// node's underlay address on the uplink when the pool is CrossSubnet and the node is in this
// node's subnet, else via its VTEP on the VXLAN device. Without a route, the reason.
func VXLANRoute(u Underlay, pool model.Pool, prefix netip.Prefix, t VXLANTarget) (Route, string) {
	fam := ipfamily.OfPrefix(prefix)
	if !t.Known {
		return Route{}, fmt.Sprintf("node %s is unknown", t.Node)
	}
	own := u.Addr.Get(fam)
	if pool.VXLANMode == v1.VXLANModeCrossSubnet && own.IsValid() && t.Underlay.IsValid() && own.Masked().Contains(t.Underlay) {
		switch {
		case t.Underlay == own.Addr():
			return Route{}, fmt.Sprintf("node %s has this node's underlay address %s", t.Node, t.Underlay)
		case u.Uplink.Get(fam) == "":
			return Route{}, "no uplink interface configured"
		}
		return Route{Dst: prefix, Kind: KindRemote, Dev: u.Uplink.Get(fam), Gw: t.Underlay}, ""
	}
	switch {
	case !t.LocalVTEP:
		return Route{}, fmt.Sprintf("this node has no %s VTEP (address, MAC and underlay address), so no %s", fam, VXLANDevice(fam))
	case t.Conflict != "":
		return Route{}, fmt.Sprintf("node %s's VTEP is not programmed: %s", t.Node, t.Conflict)
	case !t.PeerOK:
		return Route{}, fmt.Sprintf("node %s has no %s VTEP (address, MAC and underlay address)", t.Node, fam)
	}
	return Route{Dst: prefix, Kind: KindVXLAN, Dev: VXLANDevice(fam), Gw: t.Peer.Addr, OnLink: true}, ""
}

// NoRoute is a prefix of a VXLAN pool felix has no route for, with the reason.
type NoRoute struct {
	Prefix netip.Prefix
	Node   string
	Reason string
}

func (n NoRoute) String() string { return fmt.Sprintf("to node %s: %s", n.Node, n.Reason) }
