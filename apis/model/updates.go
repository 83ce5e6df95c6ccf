package model

import (
	"net/netip"
	"slices"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

// The changes below flow from the node's syncer (and, for learned routes, from the BGP agent)
// into the agents' managers, in the order they happened, one object each: a manager's
// OnUpdate(msg any) keeps what concerns it and ignores the rest, and its
// CompleteDeferredWork applies what changed. Nobody sends a whole list again: a pod on another
// node is one BlockUpdate, not a snapshot of the cluster. A receiver may keep a message's
// values but never modify what they point to (maps, slices, API objects): the sender shares
// them.

// NodeUpdate: a node joined or something tabby reads of it changed. This node's own Node comes
// this way too: a manager compares Name with its own.
type NodeUpdate struct{ Node Node }

// NodeRemove: the node is gone.
type NodeRemove struct{ Name string }

// PoolUpdate: a valid IPPool was created or changed.
type PoolUpdate struct{ Pool Pool }

// PoolRemove: the pool is gone, or it is no longer valid.
type PoolRemove struct{ Name string }

// BlockUpdate: an IPAM block was claimed or changed what it routes (its node, its borrowed
// addresses).
type BlockUpdate struct{ Block Block }

// BlockRemove: the block was released.
type BlockRemove struct{ CIDR netip.Prefix }

// WorkloadUpdate: a pod on this node got its addresses, or they changed.
type WorkloadUpdate struct{ Workload Workload }

// WorkloadRemove: the pod behind this host veth has no address left on this node.
type WorkloadRemove struct{ Interface string }

// BGPConfigurationUpdate: the cluster's BGPConfiguration (the one named default); nil when
// there is none (defaults). Validated: an invalid one is sent as nil.
type BGPConfigurationUpdate struct{ Config *v1.BGPConfiguration }

// FelixConfigurationUpdate: the cluster's FelixConfiguration (the one named default); nil when
// there is none (defaults). Validated: an invalid one is sent as nil.
type FelixConfigurationUpdate struct{ Config *v1.FelixConfiguration }

// BGPPeerUpdate: a valid BGPPeer was created or changed.
type BGPPeerUpdate struct{ Peer *v1.BGPPeer }

// BGPPeerRemove: the BGPPeer is gone, or it is no longer valid.
type BGPPeerRemove struct{ Name string }

// BGPFilterUpdate: a valid BGPFilter was created or changed.
type BGPFilterUpdate struct{ Filter BGPFilter }

// BGPFilterRemove: the BGPFilter is gone, or it is no longer valid.
type BGPFilterRemove struct{ Name string }

// SecretUpdate: a Secret of tabby-node's namespace (BGP passwords refer to them).
type SecretUpdate struct {
	Name string
	Data map[string][]byte
}

// SecretRemove: the Secret is gone.
type SecretRemove struct{ Name string }

// RouteUpdate: the BGP speaker's route to a prefix learned from peers: inside a pool, or
// outside every pool from an external router whose route the import filter accepted (the BGP
// agent sends none for the cluster's own prefixes, this node's subnet or a service CIDR).
type RouteUpdate struct {
	Prefix  netip.Prefix
	NextHop netip.Addr // the best path's
	// NextHops, with ECMP (BGPConfiguration maxPaths), are the next hops of every path that
	// ties with the best one, NextHop among them, in SortNextHops order; nil or one: NextHop
	// alone.
	NextHops []netip.Addr
	// External: the prefix lies outside every pool (the BGP agent's view when it sent it). A
	// receiver routes it only while it still does, as it routes a pool's prefix only inside a
	// pool.
	External bool
}

// Hops are the route's next hops: NextHops, or NextHop alone.
func (u RouteUpdate) Hops() []netip.Addr {
	if len(u.NextHops) > 1 {
		return u.NextHops
	}
	return []netip.Addr{u.NextHop}
}

// BestFirst are the route's next hops, the best path's first.
func (u RouteUpdate) BestFirst() []netip.Addr {
	hops := []netip.Addr{u.NextHop}
	for _, h := range u.Hops() {
		if h != u.NextHop {
			hops = append(hops, h)
		}
	}
	return hops
}

// Equal tells whether two updates route the prefix the same way.
func (u RouteUpdate) Equal(o RouteUpdate) bool {
	return u.Prefix == o.Prefix && u.NextHop == o.NextHop && u.External == o.External && slices.Equal(u.multipath(), o.multipath())
}

// multipath is NextHops when they are several, else nil.
func (u RouteUpdate) multipath() []netip.Addr {
	if len(u.NextHops) > 1 {
		return u.NextHops
	}
	return nil
}

// SortNextHops puts next hops in the one order RouteUpdate.NextHops has (sorted, each once),
// so that an update compares equal whatever order the paths came in.
func SortNextHops(hops []netip.Addr) []netip.Addr {
	slices.SortFunc(hops, netip.Addr.Compare)
	return slices.Compact(hops)
}

// RouteRemove: no path to the prefix is left.
type RouteRemove struct{ Prefix netip.Prefix }

// InSync: every object of the datastore has been sent once since the agent started. Until
// then a manager adds and replaces but removes nothing it did not add itself: a restart must
// not take away what the kernel carries on the strength of half the cluster.
type InSync struct{}
