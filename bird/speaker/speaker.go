// Package speaker is the narrow interface bird uses to drive a BGP implementation, and its GoBGP
// v4 implementation. Nothing else in tabby imports GoBGP: bird deals in peers.Peer, prefixes
// and events, so the session logic can be read (and replaced) without GoBGP's API in the way.
package speaker

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/peers"
)

// Speaker is a BGP speaker.
type Speaker interface {
	// Start starts the speaker; it must be called once, before anything else.
	Start(ctx context.Context, s peers.Speaker) error
	// Stop stops it. restart=false: every peer is told to drop our routes at once (Cease /
	// Hard Reset). restart=true: the sessions end the graceful-restart way (RFC 8538: a Cease
	// that is not a Hard Reset), so peers keep our routes as stale until we are back.
	Stop(ctx context.Context, restart bool) error
	AddPeer(ctx context.Context, p peers.Peer) error
	DeletePeer(ctx context.Context, addr netip.Addr) error
	// UpdateBFD gives an existing peer p's BFD without resetting its BGP session (the BFD
	// session restarts).
	UpdateBFD(ctx context.Context, p peers.Peer) error
	AddPath(ctx context.Context, prefix netip.Prefix, nextHop netip.Addr) error
	DeletePath(ctx context.Context, prefix netip.Prefix, nextHop netip.Addr) error
	// SetPolicy makes p the import/export filters and re-evaluates the routes already
	// received that the change can concern.
	SetPolicy(ctx context.Context, p Policy) error
	// Watch calls fn for every peer state change, best-path change, path a peer contributes
	// after the import policy and notable peer log record until ctx is done. fn must not
	// block.
	Watch(ctx context.Context, fn func(Event)) error
	// Peers lists the sessions with the routes received from and sent to each.
	Peers(ctx context.Context) ([]PeerState, error)
	// Accepted counts, per peer and address family ("ipv4", "ipv6"), the routes the import
	// policy let in. It walks the whole RIB: for status, not for a loop.
	Accepted(ctx context.Context) (map[netip.Addr]map[string]uint64, error)
}

// Policy is tabby's route filter (docs/architecture.md, "Route policy").
type Policy struct {
	Pools []netip.Prefix // accepted and advertised, with every more-specific prefix
	Local []netip.Prefix // ours: never accepted from an external router
	// Services are the service CIDRs every node announces (BGPConfiguration serviceClusterIPs and
	// serviceExternalIPs): sent to external routers only, accepted from no one (kube-proxy on
	// each node handles service traffic; no node routes it to another).
	Services []netip.Prefix
	External []netip.Addr // routers that are not tabby nodes (ToRs)
	// KeepNextHop are the eBGP peers (BGPPeer keepOriginalNextHop) that get routes with their
	// next hop unchanged instead of this node.
	KeepNextHop []netip.Addr
	// NextHopSelf are the other eBGP peers: what this node passes on to them carries this node
	// as next hop. GoBGP would put the session's local address there, which on an IPv4 session
	// is an IPv4 address that no router accepts for an IPv6 route (RFC 4760, RFC 2545): IPv6
	// routes get IPv6NextHop instead.
	NextHopSelf []netip.Addr
	// IPv6NextHop is this node's IPv6 BGP address, the next hop of the IPv6 routes it passes on
	// (invalid: none, and then no session carries IPv6).
	IPv6NextHop netip.Addr
	// Siblings are the other route reflectors of this node's cluster: what they send is tagged
	// and made less preferred, and never sent to a sibling (docs/architecture.md, "Route
	// reflectors").
	Siblings []netip.Addr
	// Explained are the prefixes inside the pools that IPAM can explain: every block's exact
	// prefix and every borrowed /32 in the cluster. Inside a pool an external router's route
	// is accepted only for one of these, exactly.
	Explained []netip.Prefix
	// FirstAS are the eBGP external routers whose routes must begin with their own AS (every
	// one but a route server).
	FirstAS []PeerAS

	// Filters are the BGPFilters of the peers that have some, evaluated after tabby's safety
	// rules (docs/architecture.md, "Route filters").
	Filters []FilterChain
	// Communities go on this node's own routes equal to or inside their prefix, on export to
	// every peer (BGPConfiguration prefixAdvertisements).
	Communities []model.PrefixCommunities
}

// FilterChain is the rules of a list of BGPFilters, in order (a filter's rules first match
// wins, a route no rule of a filter matches goes on to the next one: the rules of the list one
// after the other), and the peers that have that list.
type FilterChain struct {
	Peers  []netip.Addr
	Import []model.FilterRule
	Export []model.FilterRule
}

// Equal compares two chains.
func (c FilterChain) Equal(o FilterChain) bool {
	return slices.Equal(c.Peers, o.Peers) && slices.Equal(c.Import, o.Import) && slices.Equal(c.Export, o.Export)
}

// Equal compares two policies field by field.
func (a Policy) Equal(b Policy) bool {
	return slices.Equal(a.Pools, b.Pools) && slices.Equal(a.Local, b.Local) && slices.Equal(a.Services, b.Services) &&
		slices.Equal(a.External, b.External) && slices.Equal(a.KeepNextHop, b.KeepNextHop) &&
		slices.Equal(a.NextHopSelf, b.NextHopSelf) && a.IPv6NextHop == b.IPv6NextHop && slices.Equal(a.Siblings, b.Siblings) &&
		slices.Equal(a.Explained, b.Explained) && slices.Equal(a.FirstAS, b.FirstAS) &&
		slices.EqualFunc(a.Filters, b.Filters, FilterChain.Equal) && slices.EqualFunc(a.Communities, b.Communities, model.PrefixCommunities.Equal)
}

// PeerAS is a peer and its AS.
type PeerAS struct {
	Address netip.Addr
	ASN     uint32
}

// EventType tells which fields of an Event are set.
type EventType int

const (
	PeerStateChanged EventType = iota
	BestPath
	// PeerLog is a peer-related warning from the speaker (why a session is down) or a
	// NOTIFICATION received from the peer.
	PeerLog
	// AcceptedPath is a peer's path to a prefix as the import policy let it in (Attrs), or its
	// end (Withdrawn: withdrawn, rejected, or dropped with the session): with the best paths,
	// what the equal-cost paths (ECMP) are computed from.
	AcceptedPath
)

// PathAttrs are what of a path the BGP decision compares before its last tie-breakers (router
// ID, peer address): paths equal in all of them are of equal cost.
type PathAttrs struct {
	LocalPref uint32
	ASPathLen int // AS_SEQUENCE members, an AS_SET as one, confederation segments not at all
	Origin    uint8
	MED       uint32
	// NeighborAS is the AS the path came from: the first of its AS path, or ours for a path
	// from our own AS. MEDs compare only between paths from one neighbour AS.
	NeighborAS uint32
	IBGP       bool
	// Stale: kept from a session that ended, for the peer's graceful restart (RFC 4724).
	Stale bool
}

// Event is something that happened in the speaker.
type Event struct {
	Type EventType
	Peer netip.Addr // PeerStateChanged, PeerLog, BestPath (zero for a local path)

	State string // PeerStateChanged: idle, connect, active, opensent, openconfirm, established
	// Reason (PeerStateChanged, out of established) is why the session went down, as the
	// speaker tells it: "notification-received cease/...", "hold-timer-expired", "read-failed".
	Reason string
	// HardReset (PeerStateChanged): the peer ended the session with a Cease / Hard Reset
	// (RFC 8538), which is never a graceful restart: the speaker has dropped its routes.
	HardReset bool

	Prefix    netip.Prefix // BestPath, AcceptedPath
	NextHop   netip.Addr   // BestPath, AcceptedPath
	Withdrawn bool         // BestPath: no path is left; AcceptedPath: the peer's path is gone
	Attrs     PathAttrs    // AcceptedPath

	Message      string // PeerLog
	Notification *Notification
	// BFDDown (PeerLog): BFD declared the peer down (its packets stopped, or it said so) and
	// the speaker is resetting the session.
	BFDDown bool
	Time    time.Time
}

// Notification is a BGP NOTIFICATION received from a peer.
type Notification struct {
	Code, Subcode uint8
	Communication string
}

// Cease subcodes that matter to graceful restart (RFC 4486, RFC 8538).
const (
	CodeCease                  = 6
	SubcodeAdministrativeReset = 4
	SubcodeHardReset           = 9
)

// RestartCommunication is the shutdown communication (RFC 8203) of a graceful-restart-style
// stop: peers running bird see it and keep our routes (docs/architecture.md, "Restart versus
// death").
const RestartCommunication = "tabby graceful restart"

// PeerState is a peer as the speaker sees it.
type PeerState struct {
	Address  netip.Addr
	State    string
	Since    time.Time // last change into or out of established
	Received uint64    // prefixes the peer sent (before our import policy)
	Sent     uint64
	// EORReceived: the peer has sent End-of-RIB since the session came up.
	EORReceived bool
	// Families are Received and Sent per address family of the session.
	Families []FamilyRoutes
	// BFD is the session's BFD state (RFC 5880: BFDUp, ...), empty without BFD.
	BFD string
}

// BFD session states (RFC 5880 section 4.1).
const (
	BFDAdminDown = "admin down"
	BFDDown      = "down"
	BFDInit      = "init"
	BFDUp        = "up"
)

// FamilyRoutes counts one address family's routes on a session.
type FamilyRoutes struct {
	Family string // "ipv4" or "ipv6" (unicast)
	// Negotiated: the session is established and both sides offered the family. A family we
	// offer that the peer did not (a ToR without an IPv6 channel) carries nothing.
	Negotiated bool
	Received   uint64 // what the peer sent, before our import policy
	Sent       uint64
}
