// Package syncer turns the datastore (Nodes, IPPools, IPAM blocks, BGP objects, Secrets) into one
// Snapshot of what this node's agents need: felix's workloads, blocks and pools, bird's nodes,
// peers and prefixes. Build is pure: the informer side (watch.go) only collects objects and says
// when something changed.
package syncer

import (
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/apis/ippool"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/ipam"
)

// NodeInfo is tabby's view of a Kubernetes Node.
type NodeInfo struct {
	Name        string
	Labels      map[string]string
	BGPAddress  netip.Prefix // from tabby.dev/bgp-ipv4-address; invalid when unset
	BGPAddress6 netip.Prefix // from tabby.dev/bgp-ipv6-address; invalid when unset (no IPv6)
	InternalIP  netip.Addr
	InternalIP6 netip.Addr // the Node's first IPv6 InternalIP, invalid when it has none
	ASN         uint32     // 0: BGPConfiguration's
	RRClusterID string
	TunnelAddr  netip.Addr
	// RestartingUntil: tabby.dev/bgp-restarting, zero when unset.
	RestartingUntil time.Time
}

// Workload is a pod on this node: its address and host veth.
type Workload struct {
	IP        netip.Addr
	Interface string
	Pod       PodKey
}

// PodKey names a pod.
type PodKey struct{ Namespace, Name string }

// Snapshot is the desired state inputs of one node.
type Snapshot struct {
	NodeName    string
	Local       *NodeInfo // nil until this node's Node object is seen
	Nodes       []NodeInfo
	Pools       []ippool.Pool // the valid IPPools, sorted by name
	LocalBlocks []netip.Prefix
	Borrowed    []netip.Addr // addresses this node allocated from other nodes' blocks
	// Routable is what IPAM explains inside the pools, cluster-wide: every block's prefix and
	// every address allocated by a node other than its block's (a borrowed /32). It is all an
	// external router may announce inside a pool (bird's import policy).
	Routable  []netip.Prefix
	Workloads []Workload
	// PodIPs are the addresses IPAM allocated to each pod, cluster-wide: what NetworkPolicy
	// peers resolve to, known from the moment the CNI ADD allocated them.
	PodIPs    map[PodKey][]netip.Addr
	BGPConfig *v1.BGPConfiguration
	BGPPeers  []v1.BGPPeer
	Secrets   map[string]map[string][]byte
}

// Inputs are the objects the snapshot is built from.
type Inputs struct {
	NodeName  string
	Nodes     []*corev1.Node
	Pools     []*v1.IPPool
	Blocks    []*v1.IPAMBlock
	BGPConfig *v1.BGPConfiguration
	BGPPeers  []*v1.BGPPeer
	Secrets   []*corev1.Secret
}

// Build computes the snapshot. Invalid objects are skipped with a log line naming the field, so
// one bad BGPPeer never takes the node's other sessions down.
func Build(in Inputs, log *slog.Logger) Snapshot {
	s := Snapshot{NodeName: in.NodeName, BGPConfig: in.BGPConfig, Secrets: map[string]map[string][]byte{}, PodIPs: map[PodKey][]netip.Addr{}}
	for _, n := range in.Nodes {
		info := nodeInfo(n, log)
		s.Nodes = append(s.Nodes, info)
		if n.Name == in.NodeName {
			local := info
			s.Local = &local
		}
	}
	slices.SortFunc(s.Nodes, func(a, b NodeInfo) int { return strings.Compare(a.Name, b.Name) })

	for _, p := range in.Pools {
		pool, errs := validation.ParseIPPool(p)
		if len(errs) > 0 {
			log.Warn("ignoring invalid IPPool", "pool", p.Name, "error", errs.ToAggregate())
			continue
		}
		s.Pools = append(s.Pools, pool)
	}
	slices.SortFunc(s.Pools, func(a, b ippool.Pool) int { return strings.Compare(a.Name, b.Name) })

	mine := v1.AffinityPrefixHost + in.NodeName
	for _, b := range in.Blocks {
		cidr, err := ipam.BlockCIDR(b)
		if err != nil {
			log.Warn("ignoring IPAMBlock with a bad cidr", "error", err)
			continue
		}
		local := b.Spec.Affinity == mine
		if local {
			s.LocalBlocks = append(s.LocalBlocks, cidr)
		}
		s.Routable = append(s.Routable, cidr)
		for ord, a := range b.Spec.Allocations {
			borrowedHere := a.Node != "" && v1.AffinityPrefixHost+a.Node != b.Spec.Affinity
			if a.Node != in.NodeName && !borrowedHere && a.Pod == "" {
				continue
			}
			n, err := strconv.Atoi(ord)
			if err != nil || n < 0 || n >= ipam.BlockLen(cidr) {
				log.Warn("ignoring allocation with a bad ordinal", "block", b.Name, "ordinal", ord)
				continue
			}
			ip := ipam.AddrAt(cidr, n)
			pod := PodKey{Namespace: a.Namespace, Name: a.Pod}
			if a.Pod != "" {
				s.PodIPs[pod] = append(s.PodIPs[pod], ip)
			}
			if a.Node != in.NodeName && !borrowedHere {
				continue
			}
			if borrowedHere {
				s.Routable = append(s.Routable, netip.PrefixFrom(ip, 32))
			}
			if a.Node != in.NodeName {
				continue
			}
			if !local {
				s.Borrowed = append(s.Borrowed, ip)
			}
			if a.Pod != "" {
				s.Workloads = append(s.Workloads, Workload{IP: ip, Interface: names.HostVethName(a.Namespace, a.Pod, containerID(a.Handle)), Pod: pod})
			}
		}
	}
	slices.SortFunc(s.LocalBlocks, netip.Prefix.Compare)
	slices.SortFunc(s.Borrowed, netip.Addr.Compare)
	slices.SortFunc(s.Routable, netip.Prefix.Compare)
	slices.SortFunc(s.Workloads, func(a, b Workload) int { return a.IP.Compare(b.IP) })
	for _, ips := range s.PodIPs {
		slices.SortFunc(ips, netip.Addr.Compare)
	}

	for _, p := range in.BGPPeers {
		if errs := validation.BGPPeer(p); len(errs) > 0 {
			log.Warn("ignoring invalid BGPPeer", "peer", p.Name, "error", errs.ToAggregate())
			continue
		}
		s.BGPPeers = append(s.BGPPeers, *p)
	}
	slices.SortFunc(s.BGPPeers, func(a, b v1.BGPPeer) int { return strings.Compare(a.Name, b.Name) })
	if s.BGPConfig != nil {
		if errs := validation.BGPConfiguration(s.BGPConfig); len(errs) > 0 {
			log.Warn("ignoring invalid BGPConfiguration: using defaults", "error", errs.ToAggregate())
			s.BGPConfig = nil
		}
	}
	for _, sec := range in.Secrets {
		s.Secrets[sec.Name] = sec.Data
	}
	return s
}

// PoolPrefixes lists the pools' CIDRs.
func (s Snapshot) PoolPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.Pools {
		out = append(out, p.CIDR)
	}
	return out
}

// AdvertisedPrefixes are this node's blocks and its borrowed /32s.
func (s Snapshot) AdvertisedPrefixes() []netip.Prefix {
	out := slices.Clone(s.LocalBlocks)
	for _, a := range s.Borrowed {
		out = append(out, netip.PrefixFrom(a, 32))
	}
	return out
}

func nodeInfo(n *corev1.Node, log *slog.Logger) NodeInfo {
	info := NodeInfo{Name: n.Name, Labels: n.Labels}
	ann := n.Annotations
	if v, ok := ann[v1.AnnotationBGPRestarting]; ok {
		// On its own: a typo in a maintenance mark must not take the node's BGP address away.
		if t, err := validation.RestartingUntil(v); err != nil {
			log.Warn("node has an invalid restart mark: ignoring it", "node", n.Name, "annotation", v1.AnnotationBGPRestarting, "value", v, "error", err)
		} else {
			info.RestartingUntil = t
		}
		ann = maps.Clone(ann)
		delete(ann, v1.AnnotationBGPRestarting)
	}
	if errs := validation.NodeAnnotations(ann); len(errs) > 0 {
		log.Warn("node has invalid tabby annotations: ignoring them", "node", n.Name, "error", errs.ToAggregate())
	} else {
		if v := n.Annotations[v1.AnnotationBGPIPv4Address]; v != "" {
			info.BGPAddress = netip.MustParsePrefix(v)
		}
		if v := n.Annotations[v1.AnnotationBGPIPv6Address]; v != "" {
			info.BGPAddress6 = netip.MustParsePrefix(v)
		}
		if v := n.Annotations[v1.AnnotationBGPASN]; v != "" {
			asn, _ := strconv.ParseUint(v, 10, 32)
			info.ASN = uint32(asn)
		}
		info.RRClusterID = n.Annotations[v1.AnnotationRRClusterID]
		if v := n.Annotations[v1.AnnotationIPIPTunnelAddress]; v != "" {
			info.TunnelAddr = netip.MustParseAddr(v)
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		switch {
		case err != nil:
		case ip.Is4() && !info.InternalIP.IsValid():
			info.InternalIP = ip
		case ip.Is6() && !ip.Is4In6() && !info.InternalIP6.IsValid():
			info.InternalIP6 = ip
		}
	}
	return info
}

// containerID is the part of a handle (<network>.<containerID>) after the network name.
func containerID(handle string) string {
	if i := strings.LastIndexByte(handle, '.'); i >= 0 {
		return handle[i+1:]
	}
	return handle
}
