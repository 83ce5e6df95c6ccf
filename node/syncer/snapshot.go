// Package syncer turns the datastore (Nodes, IPPools, IPAM blocks, BGP objects, Secrets) into
// what this node's agents need, parsed once into apis/model: a stream of typed changes
// (Config.OnUpdate: nodes, pools, blocks, this node's workloads, every pod's addresses, BGP's
// configuration, peers and Secrets) and, until the agents read only that, a whole Snapshot
// (Config.OnSnapshot). Build is pure: the informer side (watch.go) only collects objects and says
// which changed. After its first pass the syncer reads only the objects that changed and keeps
// each block's view (cache.go), so that a pod replaced on another node costs an agent the same in
// a cluster of 100 nodes as in one of 1,000 (BenchmarkStreamPodReplaced,
// BenchmarkSnapshotPodReplaced).
package syncer

import (
	"iter"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

// Workload is a pod on this node: its address and host veth.
type Workload struct {
	IP        netip.Addr
	Interface string
	Pod       PodKey
}

// PodKey names a pod; it is NetworkPolicy's key, so that the snapshot's PodIPs go to felix as
// they are (one map of every pod in the cluster, not two).
type PodKey = policy.Key

// Changes say which inputs of a snapshot may differ from the previous one the syncer handed
// out, so that the agents are given only what changed (a pod's allocation elsewhere in the
// cluster must not make BGP re-evaluate its peers).
type Changes uint8

const (
	ChangedNodes   Changes = 1 << iota // Nodes, Local
	ChangedPools                       // Pools
	ChangedBlocks                      // LocalBlocks, Borrowed, Routable, Workloads
	ChangedBGP                         // BGPConfig, BGPPeers
	ChangedSecrets                     // Secrets
	// ChangedPodIPs: PodIPsChanged holds addresses. Apart from ChangedBlocks because it is what
	// most block updates in a large cluster change, and all they change: a pod replaced on
	// another node moves no route.
	ChangedPodIPs
	ChangedAll = ChangedNodes | ChangedPools | ChangedBlocks | ChangedBGP | ChangedSecrets | ChangedPodIPs
)

// Snapshot is the desired state inputs of one node.
type Snapshot struct {
	// Changed: what differs from the previous snapshot (ChangedAll for the first, and for one
	// built by Build).
	Changed     Changes
	NodeName    string
	Local       *model.Node // nil until this node's Node object is seen
	Nodes       []model.Node
	Pools       []model.Pool // the valid IPPools, sorted by name
	LocalBlocks []netip.Prefix
	Borrowed    []netip.Addr // addresses this node allocated from other nodes' blocks
	// Routable is what IPAM explains inside the pools, cluster-wide: every block's prefix and
	// every address allocated by a node other than its block's (a borrowed /32). It is all an
	// external router may announce inside a pool (bird's import policy).
	Routable  []netip.Prefix
	Workloads []Workload
	// PodIPs are the addresses IPAM allocated to each pod, cluster-wide: what NetworkPolicy
	// peers resolve to, known from the moment the CNI ADD allocated them. From the syncer, only
	// its first snapshot holds them all; later ones carry PodIPsChanged instead (PodIPs nil).
	// Whoever is handed the map owns it (felix).
	PodIPs map[PodKey][]netip.Addr
	// PodIPsChanged: the addresses that went and came since the previous snapshot; nil when
	// PodIPs is whole.
	PodIPsChanged *PodIPsChange
	BGPConfig     *v1.BGPConfiguration
	BGPPeers      []v1.BGPPeer
	Secrets       map[string]map[string][]byte
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
	s := Snapshot{Changed: ChangedAll, NodeName: in.NodeName, Secrets: map[string]map[string][]byte{}, PodIPs: map[PodKey][]netip.Addr{}}
	s.Nodes = make([]model.Node, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		s.Nodes = append(s.Nodes, parseNode(n, log))
	}
	slices.SortFunc(s.Nodes, func(a, b model.Node) int { return strings.Compare(a.Name, b.Name) })
	s.Local = localNode(s.Nodes, in.NodeName)

	for _, p := range in.Pools {
		if pool, ok := parsePool(p, log); ok {
			s.Pools = append(s.Pools, pool)
		}
	}
	slices.SortFunc(s.Pools, func(a, b model.Pool) int { return strings.Compare(a.Name, b.Name) })

	views := make([]blockView, 0, len(in.Blocks))
	for _, b := range in.Blocks {
		if v, ok := viewBlock(b, in.NodeName, log); ok {
			views = append(views, v)
		}
	}
	s.setBlocks(slices.Values(views))
	for _, v := range views {
		for _, a := range v.podIPs {
			s.PodIPs[a.Pod] = append(s.PodIPs[a.Pod], a.IP)
		}
	}
	for _, ips := range s.PodIPs {
		if len(ips) > 1 {
			slices.SortFunc(ips, netip.Addr.Compare)
		}
	}

	for _, p := range in.BGPPeers {
		if validPeer(p, log) {
			s.BGPPeers = append(s.BGPPeers, *p)
		}
	}
	slices.SortFunc(s.BGPPeers, func(a, b v1.BGPPeer) int { return strings.Compare(a.Name, b.Name) })
	s.BGPConfig = validConfig(in.BGPConfig, log)
	for _, sec := range in.Secrets {
		s.Secrets[sec.Name] = sec.Data
	}
	return s
}

// parsePool is the pool parsed, or false (logged) when it is invalid.
func parsePool(p *v1.IPPool, log *slog.Logger) (model.Pool, bool) {
	pool, errs := validation.ParseIPPool(p)
	if len(errs) > 0 {
		log.Warn("ignoring invalid IPPool", "pool", p.Name, "error", errs.ToAggregate())
		return model.Pool{}, false
	}
	return pool, true
}

// validPeer tells whether the peer is valid, and logs why not.
func validPeer(p *v1.BGPPeer, log *slog.Logger) bool {
	if errs := validation.BGPPeer(p); len(errs) > 0 {
		log.Warn("ignoring invalid BGPPeer", "peer", p.Name, "error", errs.ToAggregate())
		return false
	}
	return true
}

// validConfig is c when it is valid, nil (the defaults, logged) when it is not.
func validConfig(c *v1.BGPConfiguration, log *slog.Logger) *v1.BGPConfiguration {
	if c == nil {
		return nil
	}
	if errs := validation.BGPConfiguration(c); len(errs) > 0 {
		log.Warn("ignoring invalid BGPConfiguration: using defaults", "error", errs.ToAggregate())
		return nil
	}
	return c
}

// setBlocks sets what the blocks contribute to the snapshot, from each block's view.
func (s *Snapshot) setBlocks(views iter.Seq[blockView]) {
	s.LocalBlocks, s.Borrowed, s.Routable, s.Workloads = nil, nil, nil, nil
	for v := range views {
		if v.local {
			s.LocalBlocks = append(s.LocalBlocks, v.block.CIDR)
		}
		s.Routable = append(s.Routable, v.block.CIDR)
		for _, b := range v.block.Borrowed {
			s.Routable = append(s.Routable, ipfamily.HostPrefix(b.Addr))
		}
		s.Borrowed = append(s.Borrowed, v.borrowed...)
		s.Workloads = append(s.Workloads, v.workloads...)
	}
	slices.SortFunc(s.LocalBlocks, netip.Prefix.Compare)
	slices.SortFunc(s.Borrowed, netip.Addr.Compare)
	slices.SortFunc(s.Routable, netip.Prefix.Compare)
	slices.SortFunc(s.Workloads, func(a, b Workload) int { return a.IP.Compare(b.IP) })
}

// blockView is what one IPAMBlock contributes to the snapshot of a node and to its change stream.
type blockView struct {
	// block is what routing reads of it: its prefix, its node, the addresses other nodes
	// borrowed in it.
	block     model.Block
	local     bool         // affine to this node
	borrowed  []netip.Addr // this node's addresses in it, when it is another node's block
	workloads []Workload   // this node's pods in it
	podIPs    []PodAddr    // every pod's address in it
}

func viewBlock(b *v1.IPAMBlock, nodeName string, log *slog.Logger) (blockView, bool) {
	cidr, err := ipam.BlockCIDR(b)
	if err != nil {
		log.Warn("ignoring IPAMBlock with a bad cidr", "error", err)
		return blockView{}, false
	}
	v := blockView{block: model.Block{CIDR: cidr}, local: b.Spec.Affinity == v1.AffinityPrefixHost+nodeName}
	if node, ok := strings.CutPrefix(b.Spec.Affinity, v1.AffinityPrefixHost); ok {
		v.block.Node = node
	}
	for ord, a := range b.Spec.Allocations {
		borrowedHere := a.Node != "" && v1.AffinityPrefixHost+a.Node != b.Spec.Affinity
		if a.Node != nodeName && !borrowedHere && a.Pod == "" {
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
			v.podIPs = append(v.podIPs, PodAddr{Pod: pod, IP: ip})
		}
		if borrowedHere {
			v.block.Borrowed = append(v.block.Borrowed, model.Borrowed{Addr: ip, Node: a.Node})
		}
		if a.Node != nodeName {
			continue
		}
		if !v.local {
			v.borrowed = append(v.borrowed, ip)
		}
		if a.Pod != "" {
			v.workloads = append(v.workloads, Workload{IP: ip, Interface: names.HostVethName(a.Namespace, a.Pod, containerID(a.Handle)), Pod: pod})
		}
	}
	// In address order, not the map's: sameRoutes compares them.
	slices.SortFunc(v.block.Borrowed, func(a, b model.Borrowed) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(v.borrowed, netip.Addr.Compare)
	slices.SortFunc(v.workloads, func(a, b Workload) int { return a.IP.Compare(b.IP) })
	return v, true
}

// sameRoutes: the two views put the same routes, and the same workloads, in a snapshot; they
// may differ in the pods' addresses (podIPs), and in which other node the block or a borrowed
// address is routed to (the snapshot leaves other nodes' routes to BGP; the change stream's
// BlockUpdate says it).
func sameRoutes(a, b blockView) bool {
	return a.block.CIDR == b.block.CIDR && a.local == b.local &&
		slices.EqualFunc(a.block.Borrowed, b.block.Borrowed, func(x, y model.Borrowed) bool { return x.Addr == y.Addr }) &&
		slices.Equal(a.borrowed, b.borrowed) && slices.Equal(a.workloads, b.workloads)
}

// localNode is a copy of the node named name among nodes (sorted by name), nil when it is not.
func localNode(nodes []model.Node, name string) *model.Node {
	i, ok := slices.BinarySearchFunc(nodes, name, byName)
	if !ok {
		return nil
	}
	local := nodes[i]
	return &local
}

func byName(n model.Node, name string) int { return strings.Compare(n.Name, name) }

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
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}

// parseNode is the node as tabby reads it, its invalid annotations reported.
func parseNode(n *corev1.Node, log *slog.Logger) model.Node {
	node, errs := validation.ParseNode(n)
	switch {
	case len(errs) == 0:
	case validation.RestartMarkOnly(errs):
		log.Warn("node has an invalid restart mark: ignoring it", "node", n.Name, "annotation", v1.AnnotationBGPRestarting, "error", errs.ToAggregate())
	default:
		log.Warn("node has invalid tabby annotations: ignoring them", "node", n.Name, "error", errs.ToAggregate())
	}
	return node
}

// containerID is the part of a handle (<network>.<containerID>) after the network name.
func containerID(handle string) string {
	if i := strings.LastIndexByte(handle, '.'); i >= 0 {
		return handle[i+1:]
	}
	return handle
}
