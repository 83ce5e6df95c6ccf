package syncer

import (
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

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

// PodKey names a pod; it is NetworkPolicy's key, so that the pods' addresses go to felix as the
// stream's PodIPsUpdate carries them (one map of every pod in the cluster, not two).
type PodKey = policy.Key

// Snapshot is what this node's agents need of the whole datastore, computed at once by Build: the
// state the change stream, applied, must reach.
type Snapshot struct {
	Nodes       []model.Node // sorted by name
	Pools       []model.Pool // the valid IPPools for pods and tunnels, sorted by name
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
	// BGPFilters are the valid BGPFilters, parsed, by name.
	BGPFilters []model.BGPFilter
	Secrets    map[string]map[string][]byte
	// FelixConfig is the valid FelixConfiguration named default; nil: the defaults.
	FelixConfig *v1.FelixConfiguration
	// LoadBalancerPools are the valid IPPools for Services' LoadBalancer addresses, by name.
	LoadBalancerPools []model.Pool
	// Services are the Services that may be announced, by key, LocalEndpoint as this node sees
	// their EndpointSlices.
	Services []model.Service
}

// Inputs are the objects Build reads.
type Inputs struct {
	NodeName    string
	Nodes       []*corev1.Node
	Pools       []*v1.IPPool
	Blocks      []*v1.IPAMBlock
	BGPConfig   *v1.BGPConfiguration
	BGPPeers    []*v1.BGPPeer
	BGPFilters  []*v1.BGPFilter
	Secrets     []*corev1.Secret
	FelixConfig *v1.FelixConfiguration
	// Services and their EndpointSlices, every namespace's.
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
}

// Build computes the node's whole state from every object, as the syncer's first pass reads them
// (the same parsers): the reference model of the change stream. Invalid objects are skipped with
// a log line naming the field, so one bad BGPPeer never takes the node's other sessions down.
func Build(in Inputs, log *slog.Logger) Snapshot {
	s := Snapshot{Secrets: map[string]map[string][]byte{}, PodIPs: map[PodKey][]netip.Addr{}}
	s.Nodes = make([]model.Node, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		s.Nodes = append(s.Nodes, parseNode(n, log))
	}
	slices.SortFunc(s.Nodes, func(a, b model.Node) int { return strings.Compare(a.Name, b.Name) })

	for _, p := range in.Pools {
		pool, ok := parsePool(p, log)
		switch {
		case !ok:
		case pool.LoadBalancer():
			s.LoadBalancerPools = append(s.LoadBalancerPools, pool)
		default:
			s.Pools = append(s.Pools, pool)
		}
	}
	slices.SortFunc(s.Pools, func(a, b model.Pool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.LoadBalancerPools, func(a, b model.Pool) int { return strings.Compare(a.Name, b.Name) })

	views := make([]blockView, 0, len(in.Blocks))
	for _, b := range in.Blocks {
		if v, ok := viewBlock(b, in.NodeName, log); ok {
			views = append(views, v)
		}
	}
	s.setBlocks(views)
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
	for _, f := range in.BGPFilters {
		if filter, ok := parseFilter(f, log); ok {
			s.BGPFilters = append(s.BGPFilters, filter)
		}
	}
	slices.SortFunc(s.BGPFilters, func(a, b model.BGPFilter) int { return strings.Compare(a.Name, b.Name) })
	s.BGPConfig = validConfig(in.BGPConfig, log)
	s.FelixConfig = validFelixConfig(in.FelixConfig, log)
	for _, sec := range in.Secrets {
		s.Secrets[sec.Name] = sec.Data
	}
	s.Services = buildServices(in.Services, in.EndpointSlices, in.NodeName, log)
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

// parseFilter is the BGPFilter parsed, or false (logged) when it is invalid: the peers that name
// it then find none.
func parseFilter(f *v1.BGPFilter, log *slog.Logger) (model.BGPFilter, bool) {
	filter, errs := validation.ParseBGPFilter(f)
	if len(errs) > 0 {
		log.Warn("ignoring invalid BGPFilter", "filter", f.Name, "error", errs.ToAggregate())
		return model.BGPFilter{}, false
	}
	return filter, true
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

// validFelixConfig is c when it is valid, nil (the defaults, logged with the field) when it is not.
func validFelixConfig(c *v1.FelixConfiguration, log *slog.Logger) *v1.FelixConfiguration {
	if c == nil {
		return nil
	}
	if errs := validation.FelixConfiguration(c); len(errs) > 0 {
		log.Warn("ignoring invalid FelixConfiguration: using defaults", "error", errs.ToAggregate())
		return nil
	}
	return c
}

// setBlocks sets what the blocks contribute, from each block's view.
func (s *Snapshot) setBlocks(views []blockView) {
	for _, v := range views {
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

// blockView is what one IPAMBlock contributes to a node's change stream (and to Build's state).
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
		n, err := ipam.ParseOrdinal(cidr, ord)
		if err != nil {
			log.Warn("ignoring allocation with a bad ordinal", "block", b.Name, "error", err)
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
	// In address order, not the map's: the stream compares a block's versions.
	slices.SortFunc(v.block.Borrowed, func(a, b model.Borrowed) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(v.borrowed, netip.Addr.Compare)
	slices.SortFunc(v.workloads, func(a, b Workload) int { return a.IP.Compare(b.IP) })
	return v, true
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
