// Package peers computes the BGP sessions one tabby node should have from the datastore: the
// node-to-node mesh, route-reflector relations and BGPPeer objects. It is pure (no GoBGP, no I/O)
// so that every topology rule is tested in a table; bird applies the result to the speaker.
package peers

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/selector"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Type says why a session exists, in the words `tabbyctl node status` prints.
type Type string

const (
	Mesh                 Type = "mesh"
	Global               Type = "global"
	NodeSpecific         Type = "node-specific"
	RouteReflector       Type = "route-reflector"        // the peer is a route reflector serving us
	RouteReflectorClient Type = "route-reflector-client" // we reflect for the peer
)

// Defaults of the sessions between tabby nodes: a dead node's routes must be gone in under 10 s.
const (
	DefaultKeepalive   = 3 * time.Second
	DefaultHold        = 9 * time.Second
	DefaultRestartTime = 120 * time.Second
	// External peers (ToRs) get the usual BGP timers: their operators tune them on their side.
	ExternalKeepalive = 30 * time.Second
	ExternalHold      = 90 * time.Second
)

// BGPAddress is a node's BGP address of each family, with the prefix length of its interface:
// its annotations, and for IPv4 until the node has annotated itself, its InternalIP.
func BGPAddress(n model.Node) ipfamily.Pair[netip.Prefix] {
	a := n.BGPAddress
	if ip := n.InternalIP.Get(ipfamily.IPv4); !a.Get(ipfamily.IPv4).IsValid() && ip.Is4() {
		a.Set(ipfamily.IPv4, netip.PrefixFrom(ip, 32))
	}
	return a
}

// SessionsDiffer tells whether what Compute reads of a node differs between a and b: a change of
// anything else (its restart mark, its tunnel address) changes no session.
func SessionsDiffer(a, b model.Node) bool {
	return a.Name != b.Name || !maps.Equal(a.Labels, b.Labels) || BGPAddress(a) != BGPAddress(b) ||
		a.ASN != b.ASN || a.RRClusterID != b.RRClusterID || a.NoBGP != b.NoBGP
}

// Input is everything the peer set depends on.
type Input struct {
	LocalNode string
	// Nodes are the cluster's nodes, this one included. Where two claim one address, the first
	// in this order gets the session.
	Nodes   []model.Node
	Config  *v1.BGPConfiguration // nil: defaults
	Peers   []v1.BGPPeer
	Secrets map[string]map[string][]byte // Secrets of tabby-node's namespace: name → data
	// Filters are the names of the valid BGPFilters.
	Filters map[string]struct{}
}

// Speaker is the speaker-wide configuration.
type Speaker struct {
	RouterID netip.Addr
	// Address is the node's BGP address of each family (invalid: none of that family): where
	// the sessions of that family start from and the speaker listens, and the next hop of the
	// node's own prefixes of that family. With an IPv6 one, every session also carries IPv6
	// unicast (MP-BGP).
	Address ipfamily.Pair[netip.Prefix]
	// Listen, when valid, is where the speaker listens for connections of its family instead of
	// Address (0.0.0.0: every IPv4 address). Compute leaves it unset: it is the agent's choice,
	// not the cluster's.
	Listen     netip.Addr
	ASN        uint32
	ListenPort uint16
	ClusterID  string // non-empty: this node is a route reflector
}

// Peer is one desired session. Two Peers are the same session configuration iff they are ==
// (bird resets a session only when its Peer changed).
type Peer struct {
	Address  netip.Addr
	Port     uint16
	ASN      uint32
	LocalASN uint32
	Type     Type
	// Node is the remote tabby node's name, empty for an external router.
	Node string
	// Source names the object that asked for the session: "mesh" or "bgppeer/NAME".
	Source    string
	Password  string
	RRClient  bool
	ClusterID string // with RRClient: the cluster ID we reflect for
	// Sibling: the peer is another route reflector of our own cluster (both reflect for
	// ClusterID). The speaker keeps what it learns from a sibling away from the other siblings
	// (see docs/architecture.md, "Route reflectors").
	Sibling             bool
	EBGPMultihop        uint8 // TTL; 0 = directly connected
	KeepOriginalNextHop bool
	// RouteServer: an external route server (BGPPeer routeServer), whose routes need not begin
	// with its own AS.
	RouteServer bool
	// Passive: wait for the peer to connect. Between two tabby nodes the one with the higher
	// address waits: GoBGP closes incoming connections for 5 s after a failed attempt, so two
	// sides dialling each other after a restart can miss each other for many seconds, and a
	// graceful-restart helper whose dial is refused that way drops the routes it keeps.
	Passive     bool
	Keepalive   time.Duration
	Hold        time.Duration
	RestartTime time.Duration
	BFD         BFD
	// Err says why the session cannot be configured (a missing Secret): bird shows it instead
	// of opening the session, so a password is never silently dropped.
	Err string

	// Filters are the BGPPeer's filters, in order, joined by commas (a Peer stays comparable).
	Filters string
}

// BFD is a session's BFD (the zero value: none).
type BFD struct {
	Enabled    bool
	MinRx      time.Duration
	MinTx      time.Duration
	Multiplier uint8
}

// BFD defaults, FRR's and BIRD's: a peer is declared down after DefaultBFDMultiplier intervals
// without a packet from it.
const (
	DefaultBFDInterval   = 300 * time.Millisecond
	DefaultBFDMultiplier = 3
)

// BFDOf is the BFD a BGPPeer's or the BGPConfiguration's bfd asks for, defaults applied.
func BFDOf(b *v1.BFD) BFD {
	if b == nil || !b.Enabled {
		return BFD{}
	}
	out := BFD{Enabled: true, MinRx: DefaultBFDInterval, MinTx: DefaultBFDInterval, Multiplier: DefaultBFDMultiplier}
	if b.MinRx != nil && b.MinRx.Duration > 0 {
		out.MinRx = b.MinRx.Duration
	}
	if b.MinTx != nil && b.MinTx.Duration > 0 {
		out.MinTx = b.MinTx.Duration
	}
	if b.Multiplier != nil && *b.Multiplier > 0 && *b.Multiplier < 256 {
		out.Multiplier = uint8(*b.Multiplier)
	}
	return out
}

// IBGP tells an internal session.
func (p Peer) IBGP() bool { return p.ASN == p.LocalASN }

// Result is the computed configuration.
type Result struct {
	Speaker Speaker
	Peers   []Peer // sorted by address, one per address
	// Problems are non-fatal issues (a bad selector, a duplicate address) for logs and status.
	Problems []string
}

// LocalASN is the AS of a node: its annotation, else BGPConfiguration.asNumber, else 64512.
func LocalASN(n model.Node, cfg *v1.BGPConfiguration) uint32 {
	if n.ASN != 0 {
		return n.ASN
	}
	if cfg != nil && cfg.Spec.ASNumber != nil && *cfg.Spec.ASNumber != 0 {
		return *cfg.Spec.ASNumber
	}
	return v1.DefaultASNumber
}

// Timers returns the keepalive and hold times between tabby nodes.
func Timers(cfg *v1.BGPConfiguration) (keepalive, hold time.Duration) {
	keepalive, hold = DefaultKeepalive, DefaultHold
	if cfg != nil && cfg.Spec.KeepaliveTime != nil && cfg.Spec.KeepaliveTime.Duration > 0 {
		keepalive = cfg.Spec.KeepaliveTime.Duration
	}
	if cfg != nil && cfg.Spec.HoldTime != nil && cfg.Spec.HoldTime.Duration > 0 {
		hold = cfg.Spec.HoldTime.Duration
	}
	return keepalive, hold
}

func listenPort(cfg *v1.BGPConfiguration) uint16 {
	if cfg != nil && cfg.Spec.ListenPort != nil && *cfg.Spec.ListenPort > 0 && *cfg.Spec.ListenPort < 65536 {
		return uint16(*cfg.Spec.ListenPort)
	}
	return v1.DefaultListenPort
}

func meshEnabled(cfg *v1.BGPConfiguration) bool {
	return cfg == nil || cfg.Spec.NodeToNodeMeshEnabled == nil || *cfg.Spec.NodeToNodeMeshEnabled
}

// Compute returns the speaker configuration and sessions of in.LocalNode. It fails only when the
// local node itself cannot speak BGP (unknown, or no address yet).
func Compute(in Input) (Result, error) {
	var local *model.Node
	for i := range in.Nodes {
		if in.Nodes[i].Name == in.LocalNode {
			local = &in.Nodes[i]
		}
	}
	if local == nil {
		return Result{}, fmt.Errorf("local node %q is not among the %d nodes", in.LocalNode, len(in.Nodes))
	}
	localAddr := BGPAddress(*local)
	for _, f := range ipfamily.All {
		if a := localAddr.Get(f); a.IsValid() && ipfamily.OfPrefix(a) != f {
			return Result{}, fmt.Errorf("local node %q: %s BGP address %s is not %s", local.Name, f, a, f)
		}
	}
	if localAddr == (ipfamily.Pair[netip.Prefix]{}) {
		return Result{}, fmt.Errorf("local node %q has no BGP address (annotations %s, %s)", local.Name, v1.AnnotationBGPIPv4Address, v1.AnnotationBGPIPv6Address)
	}
	res := Result{Speaker: Speaker{
		RouterID:   RouterID(*local),
		Address:    localAddr,
		ASN:        LocalASN(*local, in.Config),
		ListenPort: listenPort(in.Config),
		ClusterID:  local.RRClusterID,
	}}
	keepalive, hold := Timers(in.Config)
	var meshBFD BFD
	if in.Config != nil {
		meshBFD = BFDOf(in.Config.Spec.BFD)
	}
	// nodeAt finds the tabby node an explicit BGPPeer's peerIP is. Its index is built on first
	// use: in a large cluster building it dominated a computation (a Node change elsewhere),
	// and most computations have no peerIP that opens on this node.
	var byAddr map[netip.Addr]int
	nodeAt := func(addr netip.Addr) (model.Node, bool) {
		if byAddr == nil {
			byAddr = make(map[netip.Addr]int, len(in.Nodes))
			for i, n := range in.Nodes {
				for _, a := range BGPAddress(n) {
					if a.IsValid() {
						byAddr[a.Addr()] = i
					}
				}
			}
		}
		i, ok := byAddr[addr]
		if !ok {
			return model.Node{}, false
		}
		return in.Nodes[i], true
	}
	// ourAddr is the address a session to a peer of that family starts from (invalid: none).
	ourAddr := func(peer netip.Addr) netip.Addr {
		return localAddr.Get(ipfamily.OfAddr(peer)).Addr()
	}
	chosen := map[netip.Addr]Peer{}
	add := func(p Peer) {
		if p.Address == ourAddr(p.Address) {
			return // a selector that also matches this node
		}
		if old, dup := chosen[p.Address]; dup {
			if old.Source != p.Source {
				res.Problems = append(res.Problems, fmt.Sprintf("peer %s: asked for by %s and %s; keeping %s", p.Address, old.Source, p.Source, old.Source))
			}
			return
		}
		chosen[p.Address] = p
	}
	// towardsNode fills the relation to another tabby node: iBGP route-reflector roles.
	towardsNode := func(p *Peer, n model.Node) {
		p.Node = n.Name
		p.Passive = ourAddr(p.Address).Compare(p.Address) > 0
		p.Keepalive, p.Hold = keepalive, hold
		if !p.IBGP() {
			return
		}
		if n.RRClusterID != "" {
			p.Type = RouteReflector
		} else if local.RRClusterID != "" {
			p.Type = RouteReflectorClient
		}
		// A reflector treats every iBGP tabby node as a client, other reflectors of its own
		// cluster (siblings) included: GoBGP adds ORIGINATOR_ID and CLUSTER_LIST only on routes
		// it sends to a client, so a client route passed to a non-client reflector would come
		// out of it with the wrong ORIGINATOR_ID. Loops between siblings are kept out by the
		// route policy, not by the CLUSTER_LIST (docs/architecture.md, "Route reflectors").
		if local.RRClusterID != "" {
			p.RRClient, p.ClusterID = true, local.RRClusterID
			p.Sibling = n.RRClusterID == local.RRClusterID
		}
	}

	// Explicit BGPPeers first, in name order, so that they win over the mesh for one address.
	bgpPeers := slices.Clone(in.Peers)
	slices.SortFunc(bgpPeers, func(a, b v1.BGPPeer) int { return cmp.Compare(a.Name, b.Name) })
	for _, bp := range bgpPeers {
		src := "bgppeer/" + bp.Name
		if errs := validation.BGPPeer(&bp); len(errs) > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s ignored: %v", src, errs.ToAggregate()))
			continue
		}
		typ := Global
		// opens tells whether the BGPPeer's node/nodeSelector picks node n.
		opens := func(n model.Node) bool { return true }
		switch {
		case bp.Spec.Node != "":
			opens = func(n model.Node) bool { return n.Name == bp.Spec.Node }
			typ = NodeSpecific
		case bp.Spec.NodeSelector != "":
			sel, err := selector.Parse(bp.Spec.NodeSelector)
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("%s ignored: nodeSelector: %v", src, err))
				continue
			}
			opens = func(n model.Node) bool { return sel.Matches(n.Labels) }
			typ = NodeSpecific
		}
		base := Peer{
			LocalASN:            res.Speaker.ASN,
			Type:                typ,
			Source:              src,
			KeepOriginalNextHop: bp.Spec.KeepOriginalNextHop,
			RouteServer:         bp.Spec.RouteServer,
			EBGPMultihop:        uint8(bp.Spec.EBGPMultihop),
			Keepalive:           ExternalKeepalive,
			Hold:                ExternalHold,
			RestartTime:         DefaultRestartTime,
			BFD:                 BFDOf(bp.Spec.BFD),
		}
		// A session to a tabby node without a bfd of its own takes the BGPConfiguration's.
		toNode := func(p *Peer, n model.Node) {
			towardsNode(p, n)
			if bp.Spec.BFD == nil {
				p.BFD = meshBFD
			}
		}
		if bp.Spec.MaxRestartTime != nil && bp.Spec.MaxRestartTime.Duration > 0 {
			base.RestartTime = bp.Spec.MaxRestartTime.Duration
		}
		base.Filters = strings.Join(bp.Spec.Filters, ",")
		for _, name := range bp.Spec.Filters {
			// A session without a filter its operator asked for could send or take what the
			// filter was written to stop: it stays down, and says why, until the filter exists.
			if _, ok := in.Filters[name]; !ok && base.Err == "" {
				base.Err = fmt.Sprintf("%s: BGPFilter %q does not exist or is invalid: the session stays down until it does", src, name)
			}
		}
		if ref := secretRef(bp); ref != nil {
			pw, err := lookupSecret(in.Secrets, ref)
			if err != nil {
				base.Err = fmt.Sprintf("%s: password: %v", src, err)
			}
			base.Password = pw
		}
		if bp.Spec.PeerIP != "" {
			if !opens(*local) {
				continue
			}
			addr, port, err := validation.ParsePeerIP(bp.Spec.PeerIP)
			if err != nil { // validated above; kept for safety
				res.Problems = append(res.Problems, fmt.Sprintf("%s ignored: peerIP %q: %v", src, bp.Spec.PeerIP, err))
				continue
			}
			if !ourAddr(addr).IsValid() {
				// Not an error of the BGPPeer: this node simply has no address of that family.
				fam, ann := "IPv4", v1.AnnotationBGPIPv4Address
				if addr.Is6() {
					fam, ann = "IPv6", v1.AnnotationBGPIPv6Address
				}
				res.Problems = append(res.Problems, fmt.Sprintf("%s: no session to %s: node %s has no %s BGP address (annotation %s)", src, addr, local.Name, fam, ann))
				continue
			}
			p := base
			p.Address, p.Port, p.ASN = addr, port, bp.Spec.ASNumber
			if n, ok := nodeAt(addr); ok {
				toNode(&p, n)
			}
			add(p)
			continue
		}
		sel, err := selector.Parse(bp.Spec.PeerSelector)
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("%s ignored: peerSelector: %v", src, err))
			continue
		}
		// A session between two tabby nodes is symmetric: the nodes the selectors pick open it
		// towards the nodes peerSelector picks, and those open it back (Calico's semantics: the
		// route reflectors learn their clients from the same object).
		for _, n := range in.Nodes {
			addr := sessionAddr(localAddr, n)
			if n.Name == local.Name || !addr.IsValid() {
				continue
			}
			if !(opens(*local) && sel.Matches(n.Labels)) && !(sel.Matches(local.Labels) && opens(n)) {
				continue
			}
			p := base
			p.Address, p.Port, p.ASN = addr, res.Speaker.ListenPort, LocalASN(n, in.Config)
			toNode(&p, n)
			add(p)
		}
	}

	if meshEnabled(in.Config) && local.RRClusterID == "" {
		for _, n := range in.Nodes {
			addr := sessionAddr(localAddr, n)
			if n.Name == local.Name || n.RRClusterID != "" || !addr.IsValid() {
				continue
			}
			p := Peer{
				Address:     addr,
				Port:        res.Speaker.ListenPort,
				ASN:         LocalASN(n, in.Config),
				LocalASN:    res.Speaker.ASN,
				Type:        Mesh,
				Source:      "mesh",
				RestartTime: DefaultRestartTime,
				BFD:         meshBFD,
			}
			towardsNode(&p, n)
			add(p)
		}
	}

	for _, p := range chosen {
		res.Peers = append(res.Peers, p)
	}
	slices.SortFunc(res.Peers, func(a, b Peer) int { return a.Address.Compare(b.Address) })
	return res, nil
}

// sessionAddr is where a session between two tabby nodes goes: the other node's IPv4 address
// when both have one, else its IPv6 address when both have that (IPv6-only nodes), else
// nowhere (an IPv4-only and an IPv6-only node cannot peer, and a node that runs no BGP agent,
// tabby-node --bgp=none, has its addresses for VXLAN only).
func sessionAddr(local ipfamily.Pair[netip.Prefix], n model.Node) netip.Addr {
	if n.NoBGP {
		return netip.Addr{}
	}
	other := BGPAddress(n)
	for _, f := range ipfamily.All {
		if a := other.Get(f); local.Get(f).IsValid() && a.IsValid() && ipfamily.OfPrefix(a) == f {
			return a.Addr()
		}
	}
	return netip.Addr{}
}

// RouterID is the node's BGP router ID: its IPv4 address, or for an IPv6-only node four bytes
// of a hash of its name in 240.0.0.0/4 (reserved, so never a real IPv4 neighbour), as Calico
// derives one ("hash"). The router ID only has to be unique in the AS.
func RouterID(n model.Node) netip.Addr {
	if a := BGPAddress(n).Get(ipfamily.IPv4); a.IsValid() {
		return a.Addr()
	}
	h := fnv.New32a()
	h.Write([]byte(n.Name))
	v := h.Sum32()
	return netip.AddrFrom4([4]byte{0xf0 | byte(v>>24)&0x0f, byte(v >> 16), byte(v >> 8), byte(v)})
}

func secretRef(bp v1.BGPPeer) *v1.SecretKeyRef {
	if bp.Spec.Password == nil {
		return nil
	}
	return bp.Spec.Password.SecretKeyRef
}

func lookupSecret(secrets map[string]map[string][]byte, ref *v1.SecretKeyRef) (string, error) {
	data, ok := secrets[ref.Name]
	if !ok {
		return "", fmt.Errorf("password secret %q not found", ref.Name)
	}
	v, ok := data[ref.Key]
	if !ok {
		return "", fmt.Errorf("password secret %q has no key %q", ref.Name, ref.Key)
	}
	if len(v) == 0 {
		return "", fmt.Errorf("password secret %q key %q is empty", ref.Name, ref.Key)
	}
	if len(v) > 80 { // TCP_MD5SIG_MAXKEYLEN
		return "", fmt.Errorf("password secret %q key %q: the password is %d bytes, at most 80", ref.Name, ref.Key, len(v))
	}
	return string(v), nil
}
