package node

import (
	"net/netip"

	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/node/syncer"
)

// onSnapshot hands the new desired state to felix and bird. Advertised prefixes go to bird before
// its peers (End-of-RIB is sent as soon as a session is up).
func (a *Agent) onSnapshot(s syncer.Snapshot) {
	a.mu.Lock()
	a.last = s
	a.mu.Unlock()

	// Only what changed: a pod's allocation elsewhere in the cluster (most events, in a large
	// cluster) must not make BGP evaluate its peers again, nor felix its pools.
	ch := s.Changed
	if ch&syncer.ChangedNodes != 0 && s.Local != nil {
		a.felix.SetLocalNode(s.Local.BGPAddress, s.Local.TunnelAddr)
		a.felix.SetLocalNode6(s.Local.BGPAddress6)
	}
	if ch&syncer.ChangedPools != 0 {
		var pools []felix.Pool
		for _, p := range s.Pools {
			pools = append(pools, felix.Pool{Name: p.Name, CIDR: p.CIDR, IPIPMode: p.IPIPMode, NATOutgoing: p.NATOutgoing, Disabled: p.Disabled})
		}
		a.felix.SetPools(pools)
		// Both families: the speaker keeps a prefix set per family, and advertises an IPv6
		// prefix only from a node with an IPv6 BGP address (its next hop).
		a.bgp.SetPools(s.PoolPrefixes())
	}
	if ch&syncer.ChangedBlocks != 0 {
		var workloads []felix.Workload
		for _, w := range s.Workloads {
			workloads = append(workloads, felix.Workload{IP: w.IP, Interface: w.Interface})
		}
		podIPs, endpoints := syncer.PolicyView(s)
		a.felix.SetLocalBlocks(s.LocalBlocks)
		a.felix.SetWorkloads(workloads)
		if s.PodIPsChanged != nil {
			a.felix.OnUpdate(felix.PodIPsDelta{Removed: s.PodIPsChanged.Removed, Added: s.PodIPsChanged.Added})
		} else {
			a.felix.OnUpdate(felix.PodIPsUpdate{IPs: podIPs})
		}
		a.felix.OnUpdate(felix.EndpointsUpdate{Endpoints: endpoints})
		a.bgp.SetRoutable(s.Routable)
		a.bgp.SetLocalPrefixes(s.AdvertisedPrefixes())
	}
	// Passwords before the peers that use them.
	if ch&syncer.ChangedBGP != 0 {
		a.bgp.SetBGPConfiguration(s.BGPConfig)
	}
	if ch&syncer.ChangedSecrets != 0 {
		a.bgp.SetSecrets(s.Secrets)
	}
	if ch&syncer.ChangedBGP != 0 {
		a.bgp.SetBGPPeers(s.BGPPeers)
	}
	if ch&syncer.ChangedNodes != 0 {
		a.bgp.SetNodes(birdNodes(s.Nodes))
	}

	select {
	case a.tunnelKick <- struct{}{}:
	default:
	}
	a.firstOnce.Do(func() { close(a.firstSnap) })
}

func birdNodes(nodes []syncer.NodeInfo) []bird.Node {
	out := make([]bird.Node, 0, len(nodes))
	for _, n := range nodes {
		addr := n.BGPAddress
		if !addr.IsValid() && n.InternalIP.IsValid() {
			addr = netip.PrefixFrom(n.InternalIP, 32)
		}
		out = append(out, bird.Node{Name: n.Name, Labels: n.Labels, Address: addr, Address6: n.BGPAddress6, ASN: n.ASN, RRClusterID: n.RRClusterID, RestartingUntil: n.RestartingUntil})
	}
	return out
}

// onBGPRoute passes a learned best path to felix, which picks the device.
func (a *Agent) onBGPRoute(u bird.RouteUpdate) {
	if u.Withdrawn {
		a.felix.DeleteBGPRoute(u.Prefix)
		return
	}
	a.felix.UpsertBGPRoute(felix.BGPRoute{Prefix: u.Prefix, NextHop: u.NextHop})
}
