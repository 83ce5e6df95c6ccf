package table

// One export and one serialisation per kind of iBGP peer: tabby's change (TABBY.md, "One export
// per kind of peer"). A route reflector sends every client the same copy of a route: upstream
// built that copy (UpdatePathAttrs), packed it and serialised it once per client, which at 1,000
// clients was most of the reflector's CPU. Here the copy is built once per kind of peer and
// kept on the path it was made from, and the packers keep its serialised UPDATE on the copy.

import (
	"bytes"
	"log/slog"
	"net/netip"
	"sync/atomic"

	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/segmentio/fasthash/fnv1a"
)

// exportKey is everything UpdatePathAttrs reads, besides the path itself, when it builds the
// copy for an iBGP peer that is not a route-server client: two peers with one key are sent
// the same copy.
type exportKey struct {
	rrClient     bool
	clusterID    netip.Addr
	localAddress netip.Addr
	routerID     netip.Addr
	// Clone copies it from the path, which nexthop tracking may change after a copy was kept.
	nexthopInvalid bool
	// statement, when set, keys what an export statement's modifications made of a copy
	// (statementResult); the other fields are then zero.
	statement *Statement
}

func newExportKey(global *oc.Global, info *PeerInfo, original *Path) exportKey {
	return exportKey{
		rrClient:       info.RouteReflectorClient,
		clusterID:      info.RouteReflectorClusterID,
		localAddress:   info.LocalAddress,
		routerID:       global.Config.RouterId,
		nexthopInvalid: original.IsNexthopInvalid,
	}
}

type export struct {
	key  exportKey
	path *Path
}

// maxExports bounds the copies kept per path. A reflector has two kinds of iBGP peer (clients
// and the rest); more kinds than this are rare, and are built per peer as upstream does.
const maxExports = 4

// exportFor returns the copy kept for key, or nil.
func (path *Path) exportFor(key exportKey) *Path {
	if l := path.exports.Load(); l != nil {
		for _, e := range *l {
			if e.key == key {
				return e.path
			}
		}
	}
	return nil
}

// keepExport keeps exported as the copy for key. Peers' handlers export concurrently (they
// hold the server's lock for reading): the list is replaced, never changed in place.
func (path *Path) keepExport(key exportKey, exported *Path) {
	for {
		old := path.exports.Load()
		var l []export
		if old != nil {
			if len(*old) >= maxExports {
				return
			}
			for _, e := range *old {
				if e.key == key {
					return
				}
			}
			l = make([]export, len(*old), len(*old)+1)
			copy(l, *old)
		}
		l = append(l, export{key: key, path: exported})
		if path.exports.CompareAndSwap(old, &l) {
			return
		}
	}
}

// statementResult returns what s's modifications make of path, a copy iBGP peers share: built
// once and kept on it, a copy they share in turn, when no modification depends on the peer
// (peerIndependent). An export statement that modifies makes a copy, so without this every
// peer the statement matched got its own again (tabby's sibling reflectors' copies, whose tag
// the export policy strips).
func statementResult(logger *slog.Logger, s *Statement, path *Path, options *PolicyOptions) *Path {
	if !path.IsShared() || !s.peerIndependent() {
		return s.modify(logger, path, options)
	}
	key := exportKey{statement: s}
	if p := path.exportFor(key); p != nil {
		return p
	}
	p := s.modify(logger, path, options)
	p.wire = &wire{}
	path.keepExport(key, p)
	return p
}

// peerIndependent reports whether none of s's modifications reads the peer: they set
// communities, MED, LOCAL_PREF or ORIGIN from the statement and the path alone.
func (s *Statement) peerIndependent() bool {
	for _, a := range s.ModActions {
		switch a.(type) {
		case *CommunityAction, *ExtCommunityAction, *LargeCommunityAction, *MedAction, *LocalPrefAction, *OriginAction:
		default:
			return false
		}
	}
	return true
}

// wire is what the packers derive from a copy many peers are sent. A copy is never changed
// once built (policies and the server clone before they modify), so what is kept stays true.
// The packers run in every peer's sender at once: each part is stored once, atomically.
type wire struct {
	attrs atomic.Pointer[attrsWire]
	// update[1] is for sessions that send add-path identifiers for the path's family.
	update [2]atomic.Pointer[Packed]
}

// attrsWire is what a packer groups a path by: its serialised attributes (for multiprotocol
// families, without MP_REACH_NLRI, whose next hops are nexthopKey) and their hash.
type attrsWire struct {
	b          []byte
	nexthopKey string
	hash       uint64
}

// Packed is one UPDATE message a packer built. Wire, when set, is the message serialised,
// shared by every session sent it: the session neither serialises nor changes Msg.
type Packed struct {
	Msg  *bgp.BGPMessage
	Wire []byte
}

// mpAttrs returns what the multiprotocol packer groups path by. A copy's is kept on it;
// another path's is serialised into scratch, and kept reports which.
func mpAttrs(path *Path, scratch *bytes.Buffer) (a attrsWire, kept bool) {
	if path.wire != nil {
		if w := path.wire.attrs.Load(); w != nil {
			return *w, true
		}
	}
	_, a.nexthopKey = getMPReachNexthops(path)
	scratch.Reset()
	for _, v := range path.GetPathAttrs() {
		if v.GetType() == bgp.BGP_ATTR_TYPE_MP_REACH_NLRI {
			continue
		}
		b, _ := v.Serialize()
		scratch.Write(b)
	}
	a.hash = fnv1a.AddString64(fnv1a.AddBytes64(fnv1a.Init64, scratch.Bytes()), a.nexthopKey)
	a.b = scratch.Bytes()
	if path.wire == nil {
		return a, false
	}
	a.b = bytes.Clone(a.b)
	path.wire.attrs.CompareAndSwap(nil, &a)
	return a, true
}

// v4Attrs returns what the IPv4 packer groups path by, kept on a copy like mpAttrs'.
func v4Attrs(path *Path) attrsWire {
	if path.wire != nil {
		if w := path.wire.attrs.Load(); w != nil {
			return *w
		}
	}
	var b bytes.Buffer
	for _, v := range path.GetPathAttrs() {
		s, _ := v.Serialize()
		b.Write(s)
	}
	a := attrsWire{b: b.Bytes(), hash: path.GetHash()}
	if path.wire != nil {
		path.wire.attrs.CompareAndSwap(nil, &a)
	}
	return a
}

// alone returns the UPDATE that carries path alone, serialised once for every session sent the
// copy; nil when path is not a copy, or its message does not fit the smallest limit (then the
// session builds it, and reports what is wrong with it).
func alone(path *Path, options []*bgp.MarshallingOption, build func() *bgp.BGPMessage) *Packed {
	if path.wire == nil {
		return nil
	}
	i := 0
	if bgp.IsAddPathEnabled(false, path.GetFamily(), options) {
		i = 1
	}
	if u := path.wire.update[i].Load(); u != nil {
		return u
	}
	m := build()
	b, err := m.Serialize(options...)
	if err != nil || len(b) > bgp.BGP_MAX_MESSAGE_LENGTH {
		return nil
	}
	u := &Packed{Msg: m, Wire: b}
	if !path.wire.update[i].CompareAndSwap(nil, u) {
		return path.wire.update[i].Load()
	}
	return u
}

// aloneWithdrawn is alone for a batch whose only withdrawal is a copy: the UPDATE that
// withdraws it, serialised once for every session (msg builds it from its NLRI). A reflector
// whose client withdraws a block sends every other client that one withdrawal; each of its
// thousand senders built and serialised its own, and a withdrawal reached the clients later
// than an announcement, which is shared.
func aloneWithdrawn(withdrawals []*Path, shared bool, options []*bgp.MarshallingOption, msg func([]bgp.PathNLRI) *bgp.BGPMessage) *Packed {
	if !shared || len(withdrawals) != 1 {
		return nil
	}
	w := withdrawals[0]
	return alone(w, options, func() *bgp.BGPMessage {
		return msg([]bgp.PathNLRI{{NLRI: w.GetNlri(), ID: w.localID}})
	})
}

// IsShared reports whether path is a copy many peers may be sent, which no one may change.
func (path *Path) IsShared() bool {
	return path.wire != nil
}
