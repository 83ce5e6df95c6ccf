package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// EnsureTunnelAddress gives the node its tunl0 address when one of its pools encapsulates
// (ipipMode Always or CrossSubnet), records it in the Node annotation
// tabby.dev/ipip-tunnel-address, and releases it (and removes the annotation) when no pool needs
// IPIP any more. It returns the address and whether the node needs one.
func (a *Allocator) EnsureTunnelAddress(ctx context.Context, node string) (netip.Addr, bool, error) {
	pools, _, err := a.pools(ctx, true)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("tunnel address of %s: %w", node, err)
	}
	n, err := a.store.GetNode(ctx, node)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("tunnel address of %s: get node: %w", node, err)
	}
	// Pools whose routes to this node's workloads are encapsulated: a disabled pool's existing
	// addresses still need the tunnel, but only enabled pools give a new address.
	var ipip, usable []string
	for _, p := range pools {
		if !p.IPIP() || !p.Matches(n.Labels) {
			continue
		}
		ipip = append(ipip, p.Name)
		if !p.Disabled {
			usable = append(usable, p.Name)
		}
	}
	handle := names.TunnelHandle(node)
	held, err := a.Lookup(ctx, handle)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("tunnel address of %s: %w", node, err)
	}
	if len(ipip) == 0 {
		if len(held) > 0 {
			if err := a.ReleaseHandle(ctx, handle); err != nil {
				return netip.Addr{}, false, fmt.Errorf("tunnel address of %s: %w", node, err)
			}
			a.log.Info("released tunnel address: no pool of the node uses IPIP", "node", node, "ip", held[0].IP)
		}
		if n.IPIPTunnelAddr.IsValid() {
			if err := a.store.SetNodeAnnotation(ctx, node, v1.AnnotationIPIPTunnelAddress, ""); err != nil {
				return netip.Addr{}, false, fmt.Errorf("tunnel address of %s: remove node annotation %s: %w", node, v1.AnnotationIPIPTunnelAddress, err)
			}
		}
		return netip.Addr{}, false, nil
	}
	var addr netip.Addr
	if len(held) > 0 && slices.Contains(ipip, held[0].Pool) {
		addr = held[0].IP
	} else {
		if len(held) > 0 {
			// In a pool that no longer encapsulates: swap it for one that does.
			if err := a.ReleaseHandle(ctx, handle); err != nil {
				return netip.Addr{}, true, fmt.Errorf("tunnel address of %s: %w", node, err)
			}
		}
		if len(usable) == 0 {
			return netip.Addr{}, true, fmt.Errorf("tunnel address of %s: every IPIP pool of the node is disabled (%s)", node, strings.Join(ipip, ", "))
		}
		as, err := a.Assign(ctx, Request{Handle: handle, Node: node, Pools: usable})
		if err != nil {
			return netip.Addr{}, true, fmt.Errorf("tunnel address of %s: %w", node, err)
		}
		addr = as.IP
		a.log.Info("allocated tunnel address", "node", node, "ip", addr, "pool", as.Pool)
	}
	if n.IPIPTunnelAddr != addr {
		if err := a.store.SetNodeAnnotation(ctx, node, v1.AnnotationIPIPTunnelAddress, addr.String()); err != nil {
			return addr, true, fmt.Errorf("tunnel address of %s: annotate node with %s=%s: %w", node, v1.AnnotationIPIPTunnelAddress, addr, err)
		}
	}
	return addr, true, nil
}

// Ready returns nil when an address could be allocated for a pod on node: the datastore answers
// and at least one enabled pool selects the node.
func (a *Allocator) Ready(ctx context.Context, node string) error {
	pools, bad, err := a.pools(ctx, true)
	if err != nil {
		return err
	}
	n, err := a.store.GetNode(ctx, node)
	if err != nil {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	_, err = selectPools(pools, bad, ipfamily.IPv4, node, n.Labels, nil, "")
	return err
}
