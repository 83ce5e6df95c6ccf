package bird

import (
	"bytes"
	"maps"
	"net/netip"
	"reflect"
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// The whole-list setters below are the former input of bird, kept for tabby-node until it
// sends the model's messages itself. Each compares its list with the one of the previous call
// and hands bird the difference as messages, in one piece (no pass sees half of a call).

// RouteUpdate is a route learned over BGP for felix to program.
//
// Deprecated: Config.Routes receives model.RouteUpdate and model.RouteRemove.
type RouteUpdate struct {
	Prefix    netip.Prefix
	NextHop   netip.Addr // invalid in a withdrawal
	Withdrawn bool
}

// routesToOnRoute adapts Config.OnRoute to Config.Routes.
func routesToOnRoute(onRoute func(RouteUpdate)) func(msg any) {
	return func(msg any) {
		switch m := msg.(type) {
		case model.RouteUpdate:
			onRoute(RouteUpdate{Prefix: m.Prefix, NextHop: m.NextHop})
		case model.RouteRemove:
			onRoute(RouteUpdate{Prefix: m.Prefix, Withdrawn: true})
		}
	}
}

// legacyLists are the lists of the setters' previous calls.
type legacyLists struct {
	nodes    map[string]model.Node
	pools    map[netip.Prefix]bool
	peers    map[string]v1.BGPPeer
	secrets  map[string]map[string][]byte
	local    map[netip.Prefix]bool
	routable []netip.Prefix // masked, sorted, each once
	// blocks are what local and routable stand for (blockMessages).
	blocks map[netip.Prefix]model.Block
}

func (b *Bird) legacyLocked() *legacyLists {
	if b.legacy == nil {
		b.legacy = &legacyLists{nodes: map[string]model.Node{}, pools: map[netip.Prefix]bool{}, peers: map[string]v1.BGPPeer{},
			secrets: map[string]map[string][]byte{}, blocks: map[netip.Prefix]model.Block{}}
	}
	return b.legacy
}

// SetNodes sets every node of the cluster, this one included.
//
// Deprecated: send model.NodeUpdate and model.NodeRemove to OnUpdate.
func (b *Bird) SetNodes(nodes []model.Node) {
	b.legacyMu.Lock()
	defer b.legacyMu.Unlock()
	b.onUpdates(b.legacyLocked().nodeMessages(nodes))
}

func (l *legacyLists) nodeMessages(nodes []model.Node) []any {
	var msgs []any
	seen := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		seen[n.Name] = true
		if old, ok := l.nodes[n.Name]; !ok || !old.Equal(n) {
			l.nodes[n.Name] = n
			msgs = append(msgs, model.NodeUpdate{Node: n})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l.nodes)) {
		if !seen[name] {
			delete(l.nodes, name)
			msgs = append(msgs, model.NodeRemove{Name: name})
		}
	}
	return msgs
}

// SetBGPConfiguration sets the cluster's BGPConfiguration; nil means defaults.
//
// Deprecated: send model.BGPConfigurationUpdate to OnUpdate.
func (b *Bird) SetBGPConfiguration(c *v1.BGPConfiguration) {
	b.OnUpdate(model.BGPConfigurationUpdate{Config: c})
}

// SetBGPPeers sets every BGPPeer.
//
// Deprecated: send model.BGPPeerUpdate and model.BGPPeerRemove to OnUpdate.
func (b *Bird) SetBGPPeers(list []v1.BGPPeer) {
	b.legacyMu.Lock()
	defer b.legacyMu.Unlock()
	b.onUpdates(b.legacyLocked().peerMessages(list))
}

func (l *legacyLists) peerMessages(list []v1.BGPPeer) []any {
	var msgs []any
	seen := make(map[string]bool, len(list))
	for _, p := range list {
		seen[p.Name] = true
		if old, ok := l.peers[p.Name]; !ok || !reflect.DeepEqual(old.Spec, p.Spec) {
			l.peers[p.Name] = p
			msgs = append(msgs, model.BGPPeerUpdate{Peer: &p})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l.peers)) {
		if !seen[name] {
			delete(l.peers, name)
			msgs = append(msgs, model.BGPPeerRemove{Name: name})
		}
	}
	return msgs
}

// SetSecrets sets the Secrets of tabby-node's namespace (name → data) that passwords refer to.
//
// Deprecated: send model.SecretUpdate and model.SecretRemove to OnUpdate.
func (b *Bird) SetSecrets(secrets map[string]map[string][]byte) {
	b.legacyMu.Lock()
	defer b.legacyMu.Unlock()
	b.onUpdates(b.legacyLocked().secretMessages(secrets))
}

func (l *legacyLists) secretMessages(secrets map[string]map[string][]byte) []any {
	var msgs []any
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		data := secrets[name]
		if old, ok := l.secrets[name]; !ok || !maps.EqualFunc(old, data, bytes.Equal) {
			l.secrets[name] = data
			msgs = append(msgs, model.SecretUpdate{Name: name, Data: data})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l.secrets)) {
		if _, ok := secrets[name]; !ok {
			delete(l.secrets, name)
			msgs = append(msgs, model.SecretRemove{Name: name})
		}
	}
	return msgs
}

// SetPools sets the IPPool CIDRs: the only prefixes accepted from or advertised to peers.
//
// Deprecated: send model.PoolUpdate and model.PoolRemove to OnUpdate.
func (b *Bird) SetPools(cidrs []netip.Prefix) {
	b.legacyMu.Lock()
	defer b.legacyMu.Unlock()
	b.onUpdates(b.legacyLocked().poolMessages(cidrs))
}

func (l *legacyLists) poolMessages(cidrs []netip.Prefix) []any {
	var msgs []any
	seen := make(map[netip.Prefix]bool, len(cidrs))
	for _, p := range cidrs {
		p = p.Masked()
		seen[p] = true
		if !l.pools[p] {
			l.pools[p] = true
			msgs = append(msgs, model.PoolUpdate{Pool: model.Pool{Name: p.String(), CIDR: p}})
		}
	}
	for _, p := range slices.SortedFunc(maps.Keys(l.pools), netip.Prefix.Compare) {
		if !seen[p] {
			delete(l.pools, p)
			msgs = append(msgs, model.PoolRemove{Name: p.String()})
		}
	}
	return msgs
}

// SetRoutable sets the prefixes inside the pools that IPAM explains, cluster-wide: every
// block's prefix and every borrowed /32.
//
// Deprecated: send model.BlockUpdate and model.BlockRemove to OnUpdate.
func (b *Bird) SetRoutable(p []netip.Prefix) {
	b.legacyMu.Lock()
	defer b.legacyMu.Unlock()
	b.onUpdates(b.legacyLocked().routableMessages(b.cfg.NodeName, p))
}

// SetLocalPrefixes sets the prefixes this node advertises (its blocks and borrowed /32s).
//
// Deprecated: send model.BlockUpdate and model.BlockRemove to OnUpdate.
func (b *Bird) SetLocalPrefixes(p []netip.Prefix) {
	b.legacyMu.Lock()
	defer b.legacyMu.Unlock()
	b.onUpdates(b.legacyLocked().localMessages(b.cfg.NodeName, p))
}

// routableMessages are the block messages of a new routable list. It changes with every block
// claimed or released in the cluster and holds all of them: its difference from the previous
// one is found in one walk of the two, sorted (as the syncer hands it over, else sorted here).
func (l *legacyLists) routableMessages(self string, routable []netip.Prefix) []any {
	sorted := make([]netip.Prefix, len(routable))
	for i, p := range routable {
		sorted[i] = p.Masked()
	}
	if !slices.IsSortedFunc(sorted, netip.Prefix.Compare) {
		slices.SortFunc(sorted, netip.Prefix.Compare)
	}
	sorted = slices.Compact(sorted)
	var changed []netip.Prefix
	prev, next := l.routable, sorted
	for len(prev) > 0 || len(next) > 0 {
		c := 1 // next[0] is new
		switch {
		case len(next) == 0:
			c = -1
		case len(prev) > 0:
			c = prev[0].Compare(next[0])
		}
		switch {
		case c < 0: // prev[0] is gone
			changed, prev = append(changed, prev[0]), prev[1:]
		case c > 0:
			changed, next = append(changed, next[0]), next[1:]
		default:
			prev, next = prev[1:], next[1:]
		}
	}
	l.routable = sorted
	return l.blockMessages(self, changed)
}

// localMessages are the block messages of a new list of this node's prefixes.
func (l *legacyLists) localMessages(self string, local []netip.Prefix) []any {
	next := make(map[netip.Prefix]bool, len(local))
	for _, p := range local {
		next[p.Masked()] = true
	}
	var changed []netip.Prefix
	for p := range next {
		if !l.local[p] {
			changed = append(changed, p)
		}
	}
	for p := range l.local {
		if !next[p] {
			changed = append(changed, p)
		}
	}
	l.local = next
	return l.blockMessages(self, changed)
}

// blockMessages brings the blocks that stand for the changed prefixes in line with local and
// routable: a block of this node for each prefix it advertises, one of no node for each other
// prefix IPAM explains.
func (l *legacyLists) blockMessages(self string, changed []netip.Prefix) []any {
	slices.SortFunc(changed, netip.Prefix.Compare)
	var msgs []any
	for _, p := range slices.Compact(changed) {
		old, had := l.blocks[p]
		want, has := model.Block{CIDR: p, Node: self}, true
		if !l.local[p] {
			want.Node = ""
			_, has = slices.BinarySearchFunc(l.routable, p, netip.Prefix.Compare)
		}
		switch {
		case has && (!had || !old.Equal(want)):
			l.blocks[p] = want
			msgs = append(msgs, model.BlockUpdate{Block: want})
		case !has && had:
			delete(l.blocks, p)
			msgs = append(msgs, model.BlockRemove{CIDR: p})
		}
	}
	return msgs
}
