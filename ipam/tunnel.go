package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Tunnel is a kind of tunnel device a node has while a pool that selects it encapsulates that
// way: tunl0 for IPIP, vxlan.tabby and vxlan-v6.tabby for VXLAN over IPv4 and over IPv6. IPAM
// gives the device its address from such a pool, under a handle of the node's, and the node's
// Node carries it (and, for VXLAN, the device's MAC) for the other nodes to route to.
type Tunnel struct {
	// Name names the kind in logs and reports.
	Name   string
	Family ipfamily.Family
	// Encapsulates tells whether a pool's traffic between nodes goes through the device.
	Encapsulates func(model.Pool) bool
	// AddrAnnotation on the Node holds the device's address; MACAnnotation its MAC ("": a
	// device without one, tunl0).
	AddrAnnotation, MACAnnotation string

	handle func(node string) string
	addr   func(model.Node) netip.Addr
	mac    func(model.Node) model.MAC
}

// The tunnels IPAM gives addresses to.
var (
	IPIPTunnel = Tunnel{Name: "IPIP", Family: ipfamily.IPv4, Encapsulates: model.Pool.IPIP,
		AddrAnnotation: v1.AnnotationIPIPTunnelAddress, handle: names.TunnelHandle,
		addr: func(n model.Node) netip.Addr { return n.IPIPTunnelAddr }}
	VXLANTunnel = ipfamily.PairOf(
		vxlanTunnel(ipfamily.IPv4, v1.AnnotationVXLANIPv4TunnelAddress, v1.AnnotationVXLANIPv4MAC),
		vxlanTunnel(ipfamily.IPv6, v1.AnnotationVXLANIPv6TunnelAddress, v1.AnnotationVXLANIPv6MAC))
	Tunnels = []Tunnel{IPIPTunnel, VXLANTunnel.Get(ipfamily.IPv4), VXLANTunnel.Get(ipfamily.IPv6)}
)

func vxlanTunnel(fam ipfamily.Family, addrKey, macKey string) Tunnel {
	return Tunnel{Name: "VXLAN " + fam.String(), Family: fam,
		// An IPv4 pool's VXLAN runs on the IPv4 device, an IPv6 pool's on the IPv6 one.
		Encapsulates:   func(p model.Pool) bool { return p.VXLAN() && p.Family() == fam },
		AddrAnnotation: addrKey, MACAnnotation: macKey,
		handle: func(node string) string { return names.VXLANTunnelHandle(node, fam) },
		addr:   func(n model.Node) netip.Addr { return n.VXLANTunnelAddr.Get(fam) },
		mac:    func(n model.Node) model.MAC { return n.VXLANMAC.Get(fam) }}
}

// Handle is the IPAM handle of node's address of this kind.
func (t Tunnel) Handle(node string) string { return t.handle(node) }

// Addr is the address n's Node carries for the device (invalid: none).
func (t Tunnel) Addr(n model.Node) netip.Addr { return t.addr(n) }

// MAC is the MAC n's Node carries for the device (zero: none, or a kind without one).
func (t Tunnel) MAC(n model.Node) model.MAC {
	if t.mac == nil {
		return model.MAC{}
	}
	return t.mac(n)
}

// WantMAC is the MAC node's device has (names.VXLANMAC); zero for a kind without one.
func (t Tunnel) WantMAC(node string) model.MAC {
	if t.MACAnnotation == "" {
		return model.MAC{}
	}
	return model.MAC(names.VXLANMAC(node, t.Family))
}

// selecting are the pools selecting a node with labels whose traffic goes through the device,
// and the names of those of them that give new addresses (the enabled ones).
func (t Tunnel) selecting(pools []model.Pool, labels map[string]string) (encap []model.Pool, usable []string) {
	for _, p := range pools {
		if !t.Encapsulates(p) || !p.For(v1.IPPoolUseTunnel) || !p.Matches(labels) {
			continue
		}
		encap = append(encap, p)
		if !p.Disabled {
			usable = append(usable, p.Name)
		}
	}
	return encap, usable
}

// decide is the one decision of whether a node with labels has a device of this kind, given the
// address it holds (invalid: none): keep, held stays its address (it is in a pool whose traffic
// needs the device: a disabled pool's existing addresses still do); want, the node has the
// device, with held or a new address from an enabled pool.
func (t Tunnel) decide(pools []model.Pool, labels map[string]string, held netip.Addr) (want, keep bool, usable []string) {
	encap, usable := t.selecting(pools, labels)
	keep = held.IsValid() && slices.ContainsFunc(encap, func(p model.Pool) bool { return p.CIDR.Contains(held) })
	return keep || len(usable) > 0, keep, usable
}

// InSync tells whether n's Node carries what EnsureTunnelAddress would leave on it: an address
// of a pool that needs the device and the device's MAC while the node needs one, neither when
// it does not. It spares the agent a call per change of its inputs.
func (t Tunnel) InSync(n model.Node, pools []model.Pool) bool {
	addr, mac := t.Addr(n), t.MAC(n)
	want, keep, _ := t.decide(pools, n.Labels, addr)
	if !want {
		return !addr.IsValid() && mac.IsZero()
	}
	return keep && mac == t.WantMAC(n.Name)
}

// EnsureTunnelAddress gives the node its address of tunnel kind t when a pool that selects it
// encapsulates that way (for VXLAN, a pool of t's family with vxlanMode Always or CrossSubnet;
// for IPIP, ipipMode), records it in the Node annotation t.AddrAnnotation (and the device's MAC
// in t.MACAnnotation), and releases it (and removes the annotations) when no pool needs it any
// more. It returns the address and whether the node needs one.
func (a *Allocator) EnsureTunnelAddress(ctx context.Context, t Tunnel, node string) (netip.Addr, bool, error) {
	fail := func(needed bool, format string, args ...any) (netip.Addr, bool, error) {
		return netip.Addr{}, needed, fmt.Errorf("%s tunnel address of %s: %w", t.Name, node, fmt.Errorf(format, args...))
	}
	pools, _, err := a.pools(ctx, true)
	if err != nil {
		return fail(false, "%w", err)
	}
	n, err := a.store.GetNode(ctx, node)
	if err != nil {
		return fail(false, "get node: %w", err)
	}
	handle := t.Handle(node)
	held, err := a.Lookup(ctx, handle)
	if err != nil {
		return fail(false, "%w", err)
	}
	var heldAddr netip.Addr
	if len(held) > 0 {
		heldAddr = held[0].IP
	}
	want, keep, usable := t.decide(pools, n.Labels, heldAddr)
	if !want {
		if heldAddr.IsValid() {
			if err := a.ReleaseHandle(ctx, handle); err != nil {
				return fail(false, "%w", err)
			}
			a.log.Info("released tunnel address: no pool of the node needs the device", "tunnel", t.Name, "node", node, "ip", heldAddr)
		}
		// The address first: a peer never sees a VTEP without its MAC.
		for _, ann := range []struct {
			key string
			set bool
		}{{t.AddrAnnotation, t.Addr(*n).IsValid()}, {t.MACAnnotation, !t.MAC(*n).IsZero()}} {
			if ann.set {
				if err := a.store.SetNodeAnnotation(ctx, node, ann.key, ""); err != nil {
					return fail(false, "remove node annotation %s: %w", ann.key, err)
				}
			}
		}
		return netip.Addr{}, false, nil
	}
	if mac := t.WantMAC(node); mac != t.MAC(*n) {
		if err := a.store.SetNodeAnnotation(ctx, node, t.MACAnnotation, mac.String()); err != nil {
			return fail(true, "annotate node with %s=%s: %w", t.MACAnnotation, mac, err)
		}
	}
	addr := heldAddr
	if !keep {
		if heldAddr.IsValid() {
			// In a pool that no longer needs the device: swap it for one that does.
			if err := a.ReleaseHandle(ctx, handle); err != nil {
				return fail(true, "%w", err)
			}
		}
		as, err := a.Assign(ctx, Request{Family: t.Family, Handle: handle, Node: node, Pools: usable})
		if err != nil {
			return fail(true, "from pools %s: %w", strings.Join(usable, ", "), err)
		}
		addr = as.IP
		a.log.Info("allocated tunnel address", "tunnel", t.Name, "node", node, "ip", addr, "pool", as.Pool)
	}
	if t.Addr(*n) != addr {
		if err := a.store.SetNodeAnnotation(ctx, node, t.AddrAnnotation, addr.String()); err != nil {
			return addr, true, fmt.Errorf("%s tunnel address of %s: annotate node with %s=%s: %w", t.Name, node, t.AddrAnnotation, addr, err)
		}
	}
	return addr, true, nil
}

// TunnelOf tells whether handle is the handle of a node's tunnel address (Tunnel.Handle), and
// of which kind and node.
func TunnelOf(handle string) (Tunnel, string, bool) {
	for _, t := range Tunnels {
		prefix := strings.TrimSuffix(t.Handle("x"), "x")
		if n, ok := strings.CutPrefix(handle, prefix); ok && n != "" {
			return t, n, true
		}
	}
	return Tunnel{}, "", false
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
