package node

import (
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/internal/ipfamily"
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
		a.felix.SetLocalBlocks(s.LocalBlocks)
		a.felix.SetWorkloads(workloads)
	}
	if ch&(syncer.ChangedBlocks|syncer.ChangedPodIPs) != 0 {
		for _, msg := range a.policyUpdates(s) {
			a.felix.OnUpdate(msg)
		}
	}
	if ch&syncer.ChangedBlocks != 0 {
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

// policyUpdates is what felix's policy manager needs from a snapshot whose blocks or pods'
// addresses changed: the pod addresses that came and went (all of them the first time) and this
// node's endpoints when they changed. A block of another node claimed or released with no pod in
// it needs nothing: every message wakes felix's loop, on every node of the cluster.
func (a *Agent) policyUpdates(s syncer.Snapshot) []any {
	podIPs, endpoints := syncer.PolicyView(s)
	var msgs []any
	switch {
	case s.PodIPsChanged == nil:
		msgs = append(msgs, felix.PodIPsUpdate{IPs: podIPs})
	case len(s.PodIPsChanged.Removed) > 0 || len(s.PodIPsChanged.Added) > 0:
		msgs = append(msgs, felix.PodIPsDelta{Removed: s.PodIPsChanged.Removed, Added: s.PodIPsChanged.Added})
	}
	if a.endpoints == nil || !slices.Equal(*a.endpoints, endpoints) {
		msgs = append(msgs, felix.EndpointsUpdate{Endpoints: endpoints})
		a.endpoints = &endpoints
	}
	return msgs
}

// birdNodes are the nodes as the model has them: bird reaches a node that has not annotated its
// BGP address yet at its InternalIP itself.
func birdNodes(nodes []syncer.NodeInfo) []model.Node {
	out := make([]model.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, model.Node{Name: n.Name, Labels: n.Labels,
			BGPAddress: ipfamily.PairOf(n.BGPAddress, n.BGPAddress6), InternalIP: ipfamily.PairOf(n.InternalIP, n.InternalIP6),
			ASN: n.ASN, RRClusterID: n.RRClusterID, IPIPTunnelAddr: n.TunnelAddr, RestartingUntil: n.RestartingUntil})
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
