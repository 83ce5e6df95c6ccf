// Package syncer turns the datastore (Nodes, IPPools, IPAM blocks, BGP objects, Secrets) into one
// Snapshot of what this node's agents need: felix's workloads, blocks and pools, bird's nodes,
// peers and prefixes. Build is pure: the informer side (watch.go) only collects objects and says
// what changed. After its first snapshot the syncer reads only the IPAMBlocks and Nodes that
// changed and keeps each block's contribution, so that a pod replaced on another node costs an
// agent the same in a cluster of 100 nodes as in one of 1,000 (BenchmarkSnapshotPodReplaced).
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
func Build(in Inputs, log *slog.Logger) Snapshot { return build(in, log, nil) }

// build is Build with a cache of what each Node and IPAMBlock contributes, by resourceVersion:
// the syncer's, so that a snapshot after one block changed parses one block, not a thousand.
func build(in Inputs, log *slog.Logger, c *viewCache) Snapshot {
	s := Snapshot{Changed: ChangedAll, NodeName: in.NodeName, BGPConfig: in.BGPConfig, Secrets: map[string]map[string][]byte{}, PodIPs: map[PodKey][]netip.Addr{}}
	s.Nodes = make([]model.Node, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		s.Nodes = append(s.Nodes, c.node(n, log))
	}
	slices.SortFunc(s.Nodes, func(a, b model.Node) int { return strings.Compare(a.Name, b.Name) })
	s.Local = localNode(s.Nodes, in.NodeName)

	for _, p := range in.Pools {
		pool, errs := validation.ParseIPPool(p)
		if len(errs) > 0 {
			log.Warn("ignoring invalid IPPool", "pool", p.Name, "error", errs.ToAggregate())
			continue
		}
		s.Pools = append(s.Pools, pool)
	}
	slices.SortFunc(s.Pools, func(a, b model.Pool) int { return strings.Compare(a.Name, b.Name) })

	views := make([]blockView, 0, len(in.Blocks))
	for _, b := range in.Blocks {
		if v, ok := c.block(b, in.NodeName, log); ok {
			views = append(views, v)
		}
	}
	c.prune()
	s.setBlocks(slices.Values(views))
	if c == nil {
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

// setBlocks sets what the blocks contribute to the snapshot, from each block's view.
func (s *Snapshot) setBlocks(views iter.Seq[blockView]) {
	s.LocalBlocks, s.Borrowed, s.Routable, s.Workloads = nil, nil, nil, nil
	for v := range views {
		if v.local {
			s.LocalBlocks = append(s.LocalBlocks, v.cidr)
		}
		s.Routable = append(s.Routable, v.cidr)
		s.Routable = append(s.Routable, v.routable...)
		s.Borrowed = append(s.Borrowed, v.borrowed...)
		s.Workloads = append(s.Workloads, v.workloads...)
	}
	slices.SortFunc(s.LocalBlocks, netip.Prefix.Compare)
	slices.SortFunc(s.Borrowed, netip.Addr.Compare)
	slices.SortFunc(s.Routable, netip.Prefix.Compare)
	slices.SortFunc(s.Workloads, func(a, b Workload) int { return a.IP.Compare(b.IP) })
}

// blockView is what one IPAMBlock contributes to the snapshot of a node.
type blockView struct {
	cidr      netip.Prefix
	local     bool           // affine to this node
	routable  []netip.Prefix // the /32s other nodes borrowed in it
	borrowed  []netip.Addr   // this node's addresses in it, when it is another node's block
	workloads []Workload     // this node's pods in it
	podIPs    []PodAddr      // every pod's address in it
}

func viewBlock(b *v1.IPAMBlock, nodeName string, log *slog.Logger) (blockView, bool) {
	cidr, err := ipam.BlockCIDR(b)
	if err != nil {
		log.Warn("ignoring IPAMBlock with a bad cidr", "error", err)
		return blockView{}, false
	}
	v := blockView{cidr: cidr, local: b.Spec.Affinity == v1.AffinityPrefixHost+nodeName}
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
			v.routable = append(v.routable, netip.PrefixFrom(ip, ip.BitLen()))
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
	slices.SortFunc(v.routable, netip.Prefix.Compare)
	slices.SortFunc(v.borrowed, netip.Addr.Compare)
	slices.SortFunc(v.workloads, func(a, b Workload) int { return a.IP.Compare(b.IP) })
	return v, true
}

// sameRoutes: the two views put the same routes, and the same workloads, in a snapshot; they
// may differ in the pods' addresses (podIPs).
func sameRoutes(a, b blockView) bool {
	return a.cidr == b.cidr && a.local == b.local && slices.Equal(a.routable, b.routable) &&
		slices.Equal(a.borrowed, b.borrowed) && slices.Equal(a.workloads, b.workloads)
}

// viewCache keeps each Node's and IPAMBlock's contribution while its resourceVersion stays. A nil
// cache computes every time.
type viewCache struct {
	nodes  map[string]*cachedNode
	blocks map[string]*cachedBlock
	// gen numbers the builds: an entry a build sees is marked with it, and the entries left
	// unmarked are the deleted objects (no map of names to fill and clear per build).
	gen uint64
	// skipNodes, skipBlocks: this build was not given the Nodes (or IPAMBlocks), so their
	// entries are not pruned.
	skipNodes, skipBlocks bool
	// changes: the blocks whose pod addresses the last builds changed, until taken.
	changes []blockChange
	// routesChanged: a block came, went, or changed what sameRoutes compares, since taken.
	routesChanged bool
}

// listed says which inputs the next build is given in full (the others it must not prune).
func (c *viewCache) listed(ch Changes) *viewCache {
	c.skipNodes, c.skipBlocks = ch&ChangedNodes == 0, ch&ChangedBlocks == 0
	return c
}

type cachedNode struct {
	rv   string
	seen uint64
	node model.Node
}

type cachedBlock struct {
	rv   string
	seen uint64
	view blockView
	ok   bool
}

func newViewCache() *viewCache {
	return &viewCache{nodes: map[string]*cachedNode{}, blocks: map[string]*cachedBlock{}, gen: 1}
}

func (c *viewCache) node(n *corev1.Node, log *slog.Logger) model.Node {
	if c == nil || n.ResourceVersion == "" {
		return parseNode(n, log)
	}
	if e, ok := c.nodes[n.Name]; ok && e.rv == n.ResourceVersion {
		e.seen = c.gen
		return e.node
	}
	node := parseNode(n, log)
	c.nodes[n.Name] = &cachedNode{rv: n.ResourceVersion, seen: c.gen, node: node}
	return node
}

func (c *viewCache) block(b *v1.IPAMBlock, nodeName string, log *slog.Logger) (blockView, bool) {
	if c == nil || b.ResourceVersion == "" {
		return viewBlock(b, nodeName, log)
	}
	prev := c.blocks[b.Name]
	if prev != nil && prev.rv == b.ResourceVersion {
		prev.seen = c.gen
		return prev.view, prev.ok
	}
	v, ok := viewBlock(b, nodeName, log)
	c.blocks[b.Name] = &cachedBlock{rv: b.ResourceVersion, seen: c.gen, view: v, ok: ok}
	var old blockView
	if prev != nil {
		old = prev.view
	}
	if len(old.podIPs) > 0 || len(v.podIPs) > 0 {
		c.changes = append(c.changes, blockChange{name: b.Name, old: old.podIPs, cur: v.podIPs})
	}
	if (prev == nil && ok) || (prev != nil && (prev.ok != ok || !sameRoutes(old, v))) {
		c.routesChanged = true
	}
	return v, ok
}

// nextNodes is prev, the nodes sorted by name, with the nodes that changed as get finds them now
// (nil: deleted): a copy, prev is a snapshot's. Nothing changed: prev itself.
func (c *viewCache) nextNodes(prev []model.Node, changed map[string]struct{}, get func(name string) *corev1.Node, log *slog.Logger) []model.Node {
	if len(changed) == 0 {
		return prev
	}
	out := slices.Clone(prev)
	for name := range changed {
		i, found := slices.BinarySearchFunc(out, name, byName)
		switch n := get(name); {
		case n == nil && found:
			out = slices.Delete(out, i, i+1)
			delete(c.nodes, name)
		case n == nil:
		case found:
			out[i] = c.node(n, log)
		default:
			out = slices.Insert(out, i, c.node(n, log))
		}
	}
	return out
}

func byName(n model.Node, name string) int { return strings.Compare(n.Name, name) }

// localNode is a copy of the node named name among nodes (sorted by name), nil when it is not.
func localNode(nodes []model.Node, name string) *model.Node {
	i, ok := slices.BinarySearchFunc(nodes, name, byName)
	if !ok {
		return nil
	}
	local := nodes[i]
	return &local
}

// dropBlock forgets a deleted block.
func (c *viewCache) dropBlock(name string) {
	e, ok := c.blocks[name]
	if !ok {
		return
	}
	delete(c.blocks, name)
	if len(e.view.podIPs) > 0 {
		c.changes = append(c.changes, blockChange{name: name, old: e.view.podIPs})
	}
	c.routesChanged = c.routesChanged || e.ok
}

// updateBlocks brings the cache up to date with the blocks that changed, by name, as get finds
// them now (nil: deleted).
func (c *viewCache) updateBlocks(changed map[string]struct{}, get func(name string) *v1.IPAMBlock, nodeName string, log *slog.Logger) {
	for name := range changed {
		if b := get(name); b != nil {
			c.block(b, nodeName, log)
		} else {
			c.dropBlock(name)
		}
	}
}

// nextBlocks sets the blocks' part of snap, the snapshot after prev, from the blocks' changes
// recorded since prev: built again when one moved a route, prev's otherwise; and the pods'
// addresses as a change. It says which of the two changed.
func (c *viewCache) nextBlocks(snap, prev *Snapshot) Changes {
	changes, routes := c.takeChanges()
	var changed Changes
	if routes {
		changed |= ChangedBlocks
		snap.setBlocks(c.views())
	} else {
		snap.LocalBlocks, snap.Borrowed, snap.Routable, snap.Workloads = prev.LocalBlocks, prev.Borrowed, prev.Routable, prev.Workloads
	}
	snap.PodIPs, snap.PodIPsChanged = nil, diffPodIPs(changes)
	if len(snap.PodIPsChanged.Removed) > 0 || len(snap.PodIPsChanged.Added) > 0 {
		changed |= ChangedPodIPs
	}
	return changed
}

// views are the valid blocks' views the cache holds, in no order.
func (c *viewCache) views() iter.Seq[blockView] {
	return func(yield func(blockView) bool) {
		for _, e := range c.blocks {
			if e.ok && !yield(e.view) {
				return
			}
		}
	}
}

// takeChanges returns the recorded block changes, and whether any moved a route, and forgets
// them.
func (c *viewCache) takeChanges() (changes []blockChange, routes bool) {
	changes, routes = c.changes, c.routesChanged
	c.changes, c.routesChanged = nil, false
	return changes, routes
}

// prune forgets the objects the last build did not see (deleted).
func (c *viewCache) prune() {
	if c == nil {
		return
	}
	// Not a walk over every entry when nothing was listed: that is most snapshots.
	for name, e := range c.nodes {
		if c.skipNodes {
			break
		}
		if e.seen != c.gen {
			delete(c.nodes, name)
		}
	}
	for name, e := range c.blocks {
		if c.skipBlocks {
			break
		}
		if e.seen != c.gen {
			c.dropBlock(name)
		}
	}
	c.gen++
	c.skipNodes, c.skipBlocks = false, false
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
