package model

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Node is a tabby node as every part of tabby reads it: the Kubernetes Node's labels and
// InternalIPs and tabby's annotations on it, parsed once (validation.ParseNode). A node whose
// tabby annotations are invalid keeps its name, labels and InternalIPs and has none of what
// the annotations would have given it.
type Node struct {
	Name   string
	Labels map[string]string
	// BGPAddress is the node's BGP address of each family with its subnet length
	// (198.51.100.11/24, 2001:db8:100::11/64), from tabby.dev/bgp-ipv4-address and
	// tabby.dev/bgp-ipv6-address; invalid where the node has none of that family.
	BGPAddress ipfamily.Pair[netip.Prefix]
	// InternalIP is the Node's first InternalIP of each family (status.addresses); invalid
	// where it has none.
	InternalIP ipfamily.Pair[netip.Addr]
	// ASN is tabby.dev/bgp-asn; 0: the BGPConfiguration's.
	ASN uint32
	// RRClusterID is tabby.dev/route-reflector-cluster-id: non-empty for a route reflector.
	RRClusterID string
	// IPIPTunnelAddr is tunl0's address (tabby.dev/ipip-tunnel-address, IPv4 only); invalid:
	// none yet.
	IPIPTunnelAddr netip.Addr
	// VXLANTunnelAddr is the address of the node's VXLAN device of each family, its VTEP
	// (tabby.dev/vxlan-ipv4-tunnel-address, tabby.dev/vxlan-ipv6-tunnel-address); invalid: none.
	VXLANTunnelAddr ipfamily.Pair[netip.Addr]
	// VXLANMAC is the MAC address of the node's VXLAN device of each family
	// (tabby.dev/vxlan-ipv4-mac, tabby.dev/vxlan-ipv6-mac); zero: none.
	VXLANMAC ipfamily.Pair[MAC]
	// NoBGP: the node runs no BGP agent (tabby.dev/no-bgp): no session goes to it.
	NoBGP bool
	// RestartingUntil marks a planned restart (tabby.dev/bgp-restarting); zero when unset.
	RestartingUntil time.Time
	// NotReady: the Node's Ready condition is False or Unknown (its kubelet stopped
	// reporting). A node without conditions (no kubelet, as in the lab) counts as ready, and so
	// does a Node built by hand: the zero value is the common case.
	NotReady bool
}

// Equal tells whether nothing tabby reads of the two nodes differs.
func (n Node) Equal(o Node) bool {
	return n.Name == o.Name && maps.Equal(n.Labels, o.Labels) && n.BGPAddress == o.BGPAddress &&
		n.InternalIP == o.InternalIP && n.ASN == o.ASN && n.RRClusterID == o.RRClusterID &&
		n.IPIPTunnelAddr == o.IPIPTunnelAddr && n.VXLANTunnelAddr == o.VXLANTunnelAddr && n.VXLANMAC == o.VXLANMAC &&
		n.NoBGP == o.NoBGP && n.RestartingUntil.Equal(o.RestartingUntil) && n.NotReady == o.NotReady
}

// Block is an IPAM block as routing reads it: its prefix, the node it is affine to, and the
// addresses in it that other nodes allocated (a node that found no free block borrows an
// address in another's): each is routed to the node that uses it, as a host route.
type Block struct {
	CIDR netip.Prefix
	// Node is the node the block is affine to; "" when none (its node is gone and the garbage
	// collector has not released it yet).
	Node string
	// Borrowed are the block's addresses allocated by a node other than Node, by address.
	Borrowed []Borrowed
}

// Borrowed is an address of a block that another node than the block's allocated.
type Borrowed struct {
	Addr netip.Addr
	Node string
}

// Equal tells whether the two blocks route the same.
func (b Block) Equal(o Block) bool {
	return b.CIDR == o.CIDR && b.Node == o.Node && slices.Equal(b.Borrowed, o.Borrowed)
}

// PodKey names a pod.
type PodKey struct{ Namespace, Name string }

func (k PodKey) String() string { return k.Namespace + "/" + k.Name }

// Workload is a pod on this node as the dataplane reaches it: the host side of its veth and the
// addresses IPAM allocated to it (one per family at most, in address order). It is known from
// the moment the CNI ADD allocated its addresses, before the kubelet reports the pod running.
type Workload struct {
	Pod       PodKey
	Interface string // the host-side veth, cali + 11 hex digits
	IPs       []netip.Addr
}

// Equal tells whether the two workloads are the same endpoint with the same addresses.
func (w Workload) Equal(o Workload) bool {
	return w.Pod == o.Pod && w.Interface == o.Interface && slices.Equal(w.IPs, o.IPs)
}

// MAC is an Ethernet address, comparable (net.HardwareAddr is a slice).
type MAC [6]byte

// ParseMAC parses an Ethernet address such as "66:1f:0a:2b:3c:4d".
func ParseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil {
		return MAC{}, err
	}
	if len(hw) != 6 {
		return MAC{}, fmt.Errorf("MAC %q: not a 6-byte Ethernet address", s)
	}
	return MAC(hw), nil
}

// IsZero tells whether m is unset.
func (m MAC) IsZero() bool { return m == MAC{} }

// HardwareAddr is m as netlink takes it.
func (m MAC) HardwareAddr() net.HardwareAddr { return net.HardwareAddr(m[:]) }

func (m MAC) String() string { return m.HardwareAddr().String() }
