// Package localroutes is felix's manager of the routes to what lives on this node: each local
// pod's /32 or /128 on its host veth, and a blackhole for each IPAM block affine to the node,
// so an address of the block that no pod has is dropped here rather than sent back out. A pod
// coming, going or moving changes its own routes only, whatever the number of pods.
package localroutes

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/internal/dirtyset"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Manager takes the model's WorkloadUpdate/WorkloadRemove and BlockUpdate/BlockRemove and
// states the routes in the route table, as ClassWorkload and ClassBlackhole.
type Manager struct {
	rt       routetable.Writer
	nodeName string
	log      *slog.Logger

	// addrs holds each workload's usable addresses, by host veth.
	addrs map[string][]netip.Addr
	// claims holds the veths claiming each address, sorted: of two pods claiming one address
	// the lexically smallest veth's route is programmed (as calc.Compute decides), so the
	// choice does not depend on the order the updates came in.
	claims map[netip.Addr][]string
	blocks map[netip.Prefix]struct{}

	dirtyAddrs  dirtyset.Set[netip.Addr]
	dirtyBlocks dirtyset.Set[netip.Prefix]
}

// New returns a manager for the node nodeName writing into rt.
func New(rt routetable.Writer, nodeName string, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{
		rt: rt, nodeName: nodeName, log: log,
		addrs: map[string][]netip.Addr{}, claims: map[netip.Addr][]string{}, blocks: map[netip.Prefix]struct{}{},
	}
}

// OnUpdate records the workloads and local blocks; other messages are ignored.
func (m *Manager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case model.WorkloadUpdate:
		m.setWorkload(u.Workload)
	case model.WorkloadRemove:
		m.setAddrs(u.Interface, nil)
	case model.BlockUpdate:
		m.setBlock(u.Block.CIDR, u.Block.Node == m.nodeName)
	case model.BlockRemove:
		m.setBlock(u.CIDR, false)
	}
}

func (m *Manager) setWorkload(w model.Workload) {
	if w.Interface == "" {
		m.log.Warn("workload skipped: no host interface", "pod", w.Pod, "ips", w.IPs)
		return
	}
	ips := w.IPs
	if slices.ContainsFunc(ips, func(ip netip.Addr) bool { return !calc.ValidWorkloadAddr(ip) }) {
		m.log.Warn("workload addresses skipped: need IPv4 or IPv6 addresses", "pod", w.Pod, "interface", w.Interface, "ips", ips)
		ips = slices.DeleteFunc(slices.Clone(ips), func(ip netip.Addr) bool { return !calc.ValidWorkloadAddr(ip) })
	}
	m.setAddrs(w.Interface, ips)
}

// setAddrs makes ips (nil: none) the addresses of the workload on iface.
func (m *Manager) setAddrs(iface string, ips []netip.Addr) {
	old := m.addrs[iface]
	if slices.Equal(old, ips) {
		return
	}
	in := contains(ips)
	for _, ip := range old {
		if !in(ip) {
			m.unclaim(ip, iface)
		}
	}
	had := contains(old)
	for _, ip := range ips {
		if !had(ip) {
			m.claim(ip, iface)
		}
	}
	if len(ips) == 0 {
		delete(m.addrs, iface)
	} else {
		m.addrs[iface] = ips
	}
}

// contains is a membership test of ips: a pod has one address per family, but nothing stops a
// sender from giving a veth hundreds.
func contains(ips []netip.Addr) func(netip.Addr) bool {
	if len(ips) <= 8 {
		return func(ip netip.Addr) bool { return slices.Contains(ips, ip) }
	}
	set := make(map[netip.Addr]struct{}, len(ips))
	for _, ip := range ips {
		set[ip] = struct{}{}
	}
	return func(ip netip.Addr) bool { _, ok := set[ip]; return ok }
}

func (m *Manager) claim(ip netip.Addr, iface string) {
	cl := m.claims[ip]
	i, found := slices.BinarySearch(cl, iface)
	if found {
		return
	}
	cl = slices.Insert(cl, i, iface)
	m.claims[ip] = cl
	if len(cl) > 1 {
		m.log.Warn("workload address claimed by several interfaces: the first by name is routed", "ip", ip, "interfaces", cl)
	}
	if i == 0 {
		m.dirtyAddrs.Add(ip)
	}
}

func (m *Manager) unclaim(ip netip.Addr, iface string) {
	cl := m.claims[ip]
	i, found := slices.BinarySearch(cl, iface)
	if !found {
		return
	}
	if len(cl) == 1 {
		delete(m.claims, ip)
	} else {
		m.claims[ip] = slices.Delete(cl, i, i+1)
	}
	if i == 0 {
		m.dirtyAddrs.Add(ip)
	}
}

func (m *Manager) setBlock(cidr netip.Prefix, local bool) {
	if !calc.ValidPrefix(cidr) {
		if local {
			m.log.Warn("local block skipped: not an IPv4 or IPv6 prefix", "block", cidr)
		}
		return
	}
	cidr = cidr.Masked()
	if _, had := m.blocks[cidr]; had == local {
		return
	}
	if local {
		m.blocks[cidr] = struct{}{}
	} else {
		delete(m.blocks, cidr)
	}
	m.dirtyBlocks.Add(cidr)
}

// CompleteDeferredWork states the routes that changed. The route table keeps them across its
// resyncs, so a resync needs nothing of this manager.
func (m *Manager) CompleteDeferredWork(context.Context, bool) error {
	for _, ip := range m.dirtyAddrs.Keys() {
		if cl := m.claims[ip]; len(cl) > 0 {
			m.rt.SetRoute(routetable.ClassWorkload, calc.WorkloadRoute(ip, cl[0]))
		} else {
			m.rt.RemoveRoute(routetable.ClassWorkload, ipfamily.HostPrefix(ip))
		}
	}
	m.dirtyAddrs.Clear()
	for _, b := range m.dirtyBlocks.Keys() {
		if _, ok := m.blocks[b]; ok {
			m.rt.SetRoute(routetable.ClassBlackhole, calc.BlackholeRoute(b))
		} else {
			m.rt.RemoveRoute(routetable.ClassBlackhole, b)
		}
	}
	m.dirtyBlocks.Clear()
	return nil
}
