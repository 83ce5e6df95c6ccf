package model

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/apis/selector"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Pool is a valid IPPool, defaults applied: parsed once where the object comes from the API
// (apis/validation.ParseIPPool, called by the node's syncer, the IPAM allocator and tabbyctl).
// Nothing past that edge parses spec.cidr again, and the family is the prefix's, never a
// separate field that could disagree with it.
type Pool struct {
	Name string
	// CIDR is canonical (no host bits set); its family is the pool's.
	CIDR netip.Prefix
	// BlockSize is the prefix length of the pool's blocks, the family's default when unset.
	BlockSize int
	// IPIPMode is never empty (Never when unset); always Never for an IPv6 pool.
	IPIPMode v1.IPIPMode
	// VXLANMode is never empty (Never when unset); Never when IPIPMode is not.
	VXLANMode   v1.VXLANMode
	NATOutgoing bool
	Disabled    bool
	// Uses are the pool's allowedUses, defaults applied ([Workload Tunnel] when unset), sorted.
	Uses []v1.IPPoolUse
	// AssignmentMode of a LoadBalancer pool, never empty (Automatic when unset).
	AssignmentMode v1.AssignmentMode
	// NodeSelector is the expression as written ("" selects every node); Selector is it parsed.
	NodeSelector string
	Selector     selector.Selector
}

// Equal tells whether the two pools are the same in everything tabby reads of them. Selector is
// NodeSelector parsed, so comparing the expressions compares the selectors.
func (p Pool) Equal(o Pool) bool {
	return p.Name == o.Name && p.CIDR == o.CIDR && p.BlockSize == o.BlockSize && p.IPIPMode == o.IPIPMode && p.VXLANMode == o.VXLANMode &&
		p.NATOutgoing == o.NATOutgoing && p.Disabled == o.Disabled && p.NodeSelector == o.NodeSelector &&
		slices.Equal(p.Uses, o.Uses) && p.AssignmentMode == o.AssignmentMode
}

// For tells whether the pool's addresses may serve use. A pool read without its uses (a
// literal in a test) serves workloads and tunnels, as an IPPool without allowedUses does.
func (p Pool) For(use v1.IPPoolUse) bool {
	if len(p.Uses) == 0 {
		return use == v1.IPPoolUseWorkload || use == v1.IPPoolUseTunnel
	}
	return slices.Contains(p.Uses, use)
}

// LoadBalancer tells whether the pool holds Services' LoadBalancer addresses (and so no pod's,
// no tunnel's, no block).
func (p Pool) LoadBalancer() bool { return p.For(v1.IPPoolUseLoadBalancer) }

// Family is the pool's address family.
func (p Pool) Family() ipfamily.Family { return ipfamily.OfPrefix(p.CIDR) }

// Matches tells whether the pool's nodeSelector selects a node with these labels.
func (p Pool) Matches(labels map[string]string) bool {
	return p.Selector == nil || p.Selector.Matches(labels)
}

// VXLAN tells whether traffic to the pool's addresses on another node may be encapsulated in
// VXLAN.
func (p Pool) VXLAN() bool {
	return p.VXLANMode == v1.VXLANModeAlways || p.VXLANMode == v1.VXLANModeCrossSubnet
}

// IPIP tells whether traffic to the pool's addresses on another node may be encapsulated.
func (p Pool) IPIP() bool {
	return p.IPIPMode == v1.IPIPModeAlways || p.IPIPMode == v1.IPIPModeCrossSubnet
}

// BlockSizes are a family's default, smallest and largest block prefix length.
func BlockSizes(f ipfamily.Family) (def, lo, hi int) {
	if f == ipfamily.IPv6 {
		return v1.DefaultBlockSizeIPv6, v1.MinBlockSizeIPv6, v1.MaxBlockSizeIPv6
	}
	return v1.DefaultBlockSizeIPv4, v1.MinBlockSizeIPv4, v1.MaxBlockSizeIPv4
}
