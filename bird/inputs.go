package bird

import (
	"bytes"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// dirtySet names the concerns a pass must bring in line with the inputs. A message marks only
// those it can change, and a pass runs only the reconcilers of the concerns marked.
type dirtySet uint8

const (
	// dirtySessions: what the sessions are computed from changed (nodes, the BGPConfiguration,
	// BGPPeers, Secrets). The pass computes them again and marks what the result changes.
	dirtySessions  dirtySet = 1 << iota
	dirtySpeaker            // the speaker's identity: router ID, AS, addresses, listen port
	dirtyPaths              // the paths this node advertises: its prefixes, the service CIDRs
	dirtyPolicy             // the import and export filters
	dirtyNeighbors          // the sessions configured in the speaker
	// dirtyRoutes: what decides the learned routes beside the paths themselves changed (the
	// pools, maxPaths): they are decided again.
	dirtyRoutes
	dirtyAll = dirtySessions | dirtySpeaker | dirtyPaths | dirtyPolicy | dirtyNeighbors | dirtyRoutes
)

// inputs is the cluster as the messages described it, with what bird derives from the blocks
// as they come: what this node advertises and what IPAM explains. A message's values are kept,
// never modified (the sender shares them).
type inputs struct {
	self  string       // this node's name
	nodes []model.Node // sorted by name
	pools map[string]netip.Prefix
	// poolCIDRs are the pools' CIDRs, sorted: the only prefixes accepted from or advertised to
	// peers. Replaced, never modified.
	poolCIDRs []netip.Prefix
	blocks    map[netip.Prefix]model.Block
	// own: this node's blocks and the addresses it borrowed in other nodes' blocks.
	own prefixSet
	// explained: every block's prefix and every borrowed address, cluster-wide: all an external
	// router may announce inside a pool.
	explained prefixSet
	bgpConf   *v1.BGPConfiguration
	bgpPeers  map[string]*v1.BGPPeer
	secrets   map[string]map[string][]byte
	inSync    bool

	// filters are the valid BGPFilters by name; advertisements the BGPConfiguration's
	// prefixAdvertisements, resolved (replaced, never modified).
	filters        map[string]model.BGPFilter
	advertisements []model.PrefixCommunities

	// Services (services.go). ranges are the BGPConfiguration's and the LoadBalancer pools';
	// aggregates the ranges announced whole, services every range (the policy's service set),
	// both derived from ranges, replaced, never modified. svcs are the Services by key with
	// what was decided for each; serviceHosts their host routes, each counted once per
	// Service that wants it.
	ranges       serviceRanges
	aggregates   []netip.Prefix
	services     []netip.Prefix
	lbPools      map[string]netip.Prefix
	svcs         map[string]announcedService
	serviceHosts prefixSet
}

func newInputs(self string) inputs {
	return inputs{self: self, pools: map[string]netip.Prefix{}, blocks: map[netip.Prefix]model.Block{},
		bgpPeers: map[string]*v1.BGPPeer{}, secrets: map[string]map[string][]byte{}, filters: map[string]model.BGPFilter{},
		lbPools: map[string]netip.Prefix{}, svcs: map[string]announcedService{}}
}

// record keeps what msg says and returns the concerns it may change. explainedUsed says whether
// the policy in place filters with the explained prefixes: without an external router, a block
// claimed or released elsewhere in the cluster changes nothing in the speaker.
func (in *inputs) record(msg any, explainedUsed bool) dirtySet {
	switch m := msg.(type) {
	case model.NodeUpdate:
		return in.updateNode(m.Node)
	case model.NodeRemove:
		if i, ok := in.findNode(m.Name); ok {
			in.nodes = slices.Delete(in.nodes, i, i+1)
			return dirtySessions
		}
	case model.PoolUpdate:
		if old, ok := in.pools[m.Pool.Name]; !ok || old != m.Pool.CIDR.Masked() {
			in.pools[m.Pool.Name] = m.Pool.CIDR.Masked()
			return in.poolsChanged()
		}
	case model.PoolRemove:
		if _, ok := in.pools[m.Name]; ok {
			delete(in.pools, m.Name)
			return in.poolsChanged()
		}
	case model.LoadBalancerPoolUpdate:
		if old, ok := in.lbPools[m.Pool.Name]; !ok || old != m.Pool.CIDR.Masked() {
			in.lbPools[m.Pool.Name] = m.Pool.CIDR.Masked()
			return in.rangesChanged(configRanges(in.bgpConf, in.lbPoolCIDRs()))
		}
	case model.LoadBalancerPoolRemove:
		if _, ok := in.lbPools[m.Name]; ok {
			delete(in.lbPools, m.Name)
			return in.rangesChanged(configRanges(in.bgpConf, in.lbPoolCIDRs()))
		}
	case model.ServiceUpdate:
		if old, ok := in.svcs[m.Service.Key]; ok && old.svc.Equal(m.Service) {
			return 0
		}
		return in.serviceChanged(m.Service.Key, &m.Service)
	case model.ServiceRemove:
		if _, ok := in.svcs[m.Key]; ok {
			return in.serviceChanged(m.Key, nil)
		}
	case model.BlockUpdate:
		old, had := in.blocks[m.Block.CIDR]
		if had && old.Equal(m.Block) {
			return 0
		}
		in.blocks[m.Block.CIDR] = m.Block
		return in.blockChanged(old, had, m.Block, true, explainedUsed)
	case model.BlockRemove:
		if old, had := in.blocks[m.CIDR]; had {
			delete(in.blocks, m.CIDR)
			return in.blockChanged(old, true, model.Block{}, false, explainedUsed)
		}
	case model.BGPConfigurationUpdate:
		return in.updateBGPConfiguration(m.Config)
	case model.BGPPeerUpdate:
		if m.Peer == nil {
			return 0
		}
		if old := in.bgpPeers[m.Peer.Name]; old != nil && reflect.DeepEqual(old.Spec, m.Peer.Spec) {
			return 0
		}
		in.bgpPeers[m.Peer.Name] = m.Peer
		return dirtySessions
	case model.BGPPeerRemove:
		if _, ok := in.bgpPeers[m.Name]; ok {
			delete(in.bgpPeers, m.Name)
			return dirtySessions
		}
	case model.BGPFilterUpdate:
		// Whether it exists decides whether its peers' sessions may open; what it says, the
		// policy.
		if old, ok := in.filters[m.Filter.Name]; ok && old.Equal(m.Filter) {
			return 0
		}
		in.filters[m.Filter.Name] = m.Filter
		return dirtySessions | dirtyPolicy
	case model.BGPFilterRemove:
		if _, ok := in.filters[m.Name]; ok {
			delete(in.filters, m.Name)
			return dirtySessions | dirtyPolicy
		}
	case model.SecretUpdate:
		if old, ok := in.secrets[m.Name]; ok && maps.EqualFunc(old, m.Data, bytes.Equal) {
			return 0
		}
		in.secrets[m.Name] = m.Data
		return in.secretChanged(m.Name)
	case model.SecretRemove:
		if _, ok := in.secrets[m.Name]; ok {
			delete(in.secrets, m.Name)
			return in.secretChanged(m.Name)
		}
	case model.InSync:
		if !in.inSync {
			in.inSync = true
			return dirtyNeighbors
		}
	}
	return 0
}

func (in *inputs) findNode(name string) (int, bool) {
	return slices.BinarySearchFunc(in.nodes, name, func(n model.Node, name string) int { return strings.Compare(n.Name, name) })
}

// node returns the node named name.
func (in *inputs) node(name string) (model.Node, bool) {
	if i, ok := in.findNode(name); ok {
		return in.nodes[i], true
	}
	return model.Node{}, false
}

func (in *inputs) updateNode(n model.Node) dirtySet {
	i, ok := in.findNode(n.Name)
	if !ok {
		in.nodes = slices.Insert(in.nodes, i, n)
		return dirtySessions
	}
	old := in.nodes[i]
	in.nodes[i] = n
	switch {
	case peers.SessionsDiffer(old, n):
		return dirtySessions
	case !old.RestartingUntil.Equal(n.RestartingUntil):
		// A mark lifted while the node is away ends the graceful restart its sessions are in.
		return dirtyNeighbors
	}
	return 0
}

func (in *inputs) poolsChanged() dirtySet {
	cidrs := slices.Collect(maps.Values(in.pools))
	slices.SortFunc(cidrs, netip.Prefix.Compare)
	cidrs = slices.Compact(cidrs)
	if slices.Equal(cidrs, in.poolCIDRs) {
		return 0
	}
	in.poolCIDRs = cidrs
	return dirtyPolicy | dirtyRoutes
}

// blockChanged counts a block's prefixes out (old, when had) and in (b, when has).
func (in *inputs) blockChanged(old model.Block, had bool, b model.Block, has bool, explainedUsed bool) dirtySet {
	var own, explained bool
	count := func(b model.Block, add bool) {
		apply := func(s *prefixSet, p netip.Prefix) bool {
			if add {
				return s.add(p)
			}
			return s.remove(p)
		}
		cidr := b.CIDR.Masked()
		explained = apply(&in.explained, cidr) || explained
		if b.Node == in.self {
			own = apply(&in.own, cidr) || own
		}
		for _, a := range b.Borrowed {
			p := ipfamily.HostPrefix(a.Addr)
			explained = apply(&in.explained, p) || explained
			if a.Node == in.self {
				own = apply(&in.own, p) || own
			}
		}
	}
	// In first, then out: a prefix in both is never absent in between.
	if has {
		count(b, true)
	}
	if had {
		count(old, false)
	}
	var d dirtySet
	if own {
		d |= dirtyPaths | dirtyPolicy
	}
	if explained && explainedUsed {
		d |= dirtyPolicy
	}
	return d
}

func (in *inputs) updateBGPConfiguration(c *v1.BGPConfiguration) dirtySet {
	old := in.bgpConf
	in.bgpConf = c
	var d dirtySet
	if (old == nil) != (c == nil) || old != nil && !reflect.DeepEqual(old.Spec, c.Spec) {
		d |= dirtySessions
	}
	d |= in.rangesChanged(configRanges(c, in.lbPoolCIDRs()))
	if maxPaths(old) != maxPaths(c) {
		d |= dirtyRoutes
	}
	// The syncer passes only validated configurations: no error here.
	if adv, _ := validation.ParsePrefixAdvertisements(c); !slices.EqualFunc(adv, in.advertisements, model.PrefixCommunities.Equal) {
		in.advertisements = adv
		d |= dirtyPolicy
	}
	return d
}

// secretChanged: only a Secret a BGPPeer's password refers to changes a session.
func (in *inputs) secretChanged(name string) dirtySet {
	for _, p := range in.bgpPeers {
		if p.Spec.Password != nil && p.Spec.Password.SecretKeyRef != nil && p.Spec.Password.SecretKeyRef.Name == name {
			return dirtySessions
		}
	}
	return 0
}

// sessionsInput is what peers.Compute needs, copied: the pass computes without the lock.
func (in *inputs) sessionsInput() peers.Input {
	out := peers.Input{LocalNode: in.self, Nodes: slices.Clone(in.nodes), Config: in.bgpConf, Secrets: maps.Clone(in.secrets),
		Filters: make(map[string]struct{}, len(in.filters))}
	for name := range in.filters {
		out.Filters[name] = struct{}{}
	}
	out.Peers = make([]v1.BGPPeer, 0, len(in.bgpPeers))
	for _, p := range in.bgpPeers {
		out.Peers = append(out.Peers, *p)
	}
	return out
}

func (in *inputs) inPools(p netip.Prefix) bool {
	for _, pool := range in.poolCIDRs {
		if pool.Bits() <= p.Bits() && pool.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// prefixSet is a set of prefixes kept sorted (netip.Prefix.Compare), each held as many times as
// it was added.
type prefixSet struct {
	held   map[netip.Prefix]int
	sorted []netip.Prefix
	// shared: sorted was handed out by list, and is copied before it changes.
	shared bool
}

// add adds p and tells whether it is new to the set.
func (s *prefixSet) add(p netip.Prefix) bool {
	if s.held == nil {
		s.held = map[netip.Prefix]int{}
	}
	s.held[p]++
	if s.held[p] > 1 {
		return false
	}
	i, _ := slices.BinarySearchFunc(s.sorted, p, netip.Prefix.Compare)
	s.own(1)
	s.sorted = slices.Insert(s.sorted, i, p)
	return true
}

// remove removes p once and tells whether it left the set.
func (s *prefixSet) remove(p netip.Prefix) bool {
	n, ok := s.held[p]
	if !ok {
		return false
	}
	if n > 1 {
		s.held[p] = n - 1
		return false
	}
	delete(s.held, p)
	if i, ok := slices.BinarySearchFunc(s.sorted, p, netip.Prefix.Compare); ok {
		s.own(0)
		s.sorted = slices.Delete(s.sorted, i, i+1)
	}
	return true
}

// own makes sorted the set's own again, with room for more, before it changes.
func (s *prefixSet) own(more int) {
	if s.shared {
		s.sorted = append(make([]netip.Prefix, 0, len(s.sorted)+more), s.sorted...)
		s.shared = false
	}
}

// list returns the prefixes, sorted. The slice is never modified, by the set or the caller: a
// policy handed to the speaker keeps it.
func (s *prefixSet) list() []netip.Prefix {
	s.shared = true
	return s.sorted
}
