package table

// Tests of tabby's changes to GoBGP (TABBY.md).

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// wireOf is what a session is sent for path: its attributes serialised, and its next hop.
func wireOf(t *testing.T, path *Path) string {
	t.Helper()
	var b []byte
	for _, a := range path.GetPathAttrs() {
		s, err := a.Serialize()
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, s...)
	}
	return fmt.Sprintf("%x withdraw=%v nexthop=%v", b, path.IsWithdraw, path.GetNexthop())
}

// randomPeerInfo varies every field of PeerInfo between few values, so that peers collide.
func randomPeerInfo(rng *rand.Rand, peerType oc.PeerType) *PeerInfo {
	v4 := func(a, b byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, a + byte(rng.IntN(int(b)))}) }
	return &PeerInfo{
		PeerType:                peerType,
		AS:                      64512 + uint32(rng.IntN(2)),
		ID:                      v4(1, 3),
		Address:                 v4(1, 3),
		LocalAS:                 64512 + uint32(rng.IntN(2)),
		LocalID:                 v4(101, 2),
		LocalAddress:            v4(101, 2),
		RouteReflectorClient:    rng.IntN(2) == 0,
		RouteReflectorClusterID: netip.AddrFrom4([4]byte{244, 0, 0, byte(1 + rng.IntN(2))}),
		MultihopTtl:             uint8(rng.IntN(2)),
		Confederation:           rng.IntN(2) == 0,
		RemovePrivateAs:         oc.RemovePrivateAsOption([]string{"", "all", "replace"}[rng.IntN(3)]),
	}
}

// An iBGP peer is sent the copy UpdatePathAttrs built for the first peer with its key, so the
// key must hold everything the copy depends on: for random peers, paths and routers, the copy
// handed out is what upstream's UpdatePathAttrs builds for that very peer.
func TestExportIsUpstreamsForEveryPeer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	logger := slog.New(slog.DiscardHandler)
	nlri4, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("10.244.1.0/26"))
	nlri6, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("fd00:10:244::/122"))
	routers := []*oc.Global{
		{Config: oc.GlobalConfig{As: 64512, RouterId: netip.MustParseAddr("198.51.100.101")}},
		{Config: oc.GlobalConfig{As: 64512, RouterId: netip.MustParseAddr("198.51.100.102")}},
	}
	shared := 0
	for range 500 {
		var source *PeerInfo // local
		if rng.IntN(3) > 0 {
			source = randomPeerInfo(rng, oc.PEER_TYPE_INTERNAL)
		}
		attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0)}
		if rng.IntN(2) == 0 {
			attrs = append(attrs, bgp.NewPathAttributeAsPath(nil), bgp.NewPathAttributeLocalPref(100))
		}
		if rng.IntN(3) == 0 {
			id, _ := bgp.NewPathAttributeOriginatorId(netip.MustParseAddr("198.51.100.11"))
			cl, _ := bgp.NewPathAttributeClusterList([]netip.Addr{netip.MustParseAddr("244.0.0.9")})
			attrs = append(attrs, id, cl)
		}
		var original *Path
		nexthop := netip.MustParseAddr("198.51.100.11")
		if rng.IntN(4) == 0 {
			nexthop = netip.IPv4Unspecified()
		}
		if rng.IntN(2) == 0 {
			nh, _ := bgp.NewPathAttributeNextHop(nexthop)
			original = NewPath(bgp.RF_IPv4_UC, source, bgp.PathNLRI{NLRI: nlri4}, rng.IntN(4) == 0, append(attrs, nh), time.Now(), false)
		} else {
			mp, _ := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri6}}, netip.MustParseAddr("2001:db8::11"))
			original = NewPath(bgp.RF_IPv6_UC, source, bgp.PathNLRI{NLRI: nlri6}, rng.IntN(4) == 0, append(attrs, mp), time.Now(), false)
		}
		for range 12 {
			info := randomPeerInfo(rng, oc.PEER_TYPE_INTERNAL)
			if rng.IntN(4) == 0 {
				info.PeerType = oc.PEER_TYPE_EXTERNAL
			}
			global := routers[rng.IntN(2)]
			original.IsNexthopInvalid = rng.IntN(8) == 0
			got := UpdatePathAttrs(logger, global, info, original)
			want := updatePathAttrs(logger, global, info, original)
			if g, w := wireOf(t, got), wireOf(t, want); g != w || got.IsNexthopInvalid != want.IsNexthopInvalid {
				t.Fatalf("peer %+v was handed %s, nexthop invalid %v; upstream builds %s, %v", info, g, got.IsNexthopInvalid, w, want.IsNexthopInvalid)
			}
			if got.IsShared() != (info.PeerType == oc.PEER_TYPE_INTERNAL) {
				t.Fatalf("a %v peer's copy: shared %v", info.PeerType, got.IsShared())
			}
			if got.IsShared() && UpdatePathAttrs(logger, global, info, original) == got {
				shared++
			}
		}
	}
	if shared == 0 {
		t.Fatal("no copy was handed out twice")
	}
}

// Route-reflector clients of one reflector are sent one copy; an eBGP peer gets its own.
func TestExportOneCopyPerKindOfPeer(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	global := &oc.Global{Config: oc.GlobalConfig{As: 64512, RouterId: netip.MustParseAddr("198.51.100.101")}}
	nlri, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("10.244.1.0/26"))
	nh, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr("198.51.100.11"))
	owner := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, ID: netip.MustParseAddr("198.51.100.11"), Address: netip.MustParseAddr("198.51.100.11")}
	original := NewPath(bgp.RF_IPv4_UC, owner, bgp.PathNLRI{NLRI: nlri}, false,
		[]bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), nh, bgp.NewPathAttributeLocalPref(100)}, time.Now(), false)
	client := func(addr string) *PeerInfo {
		return &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, Address: netip.MustParseAddr(addr), ID: netip.MustParseAddr(addr),
			LocalAddress: netip.MustParseAddr("198.51.100.101"), RouteReflectorClient: true, RouteReflectorClusterID: netip.MustParseAddr("244.0.0.1")}
	}
	a := UpdatePathAttrs(logger, global, client("198.51.100.12"), original)
	b := UpdatePathAttrs(logger, global, client("198.51.100.13"), original)
	if a != b || !a.IsShared() {
		t.Fatalf("two clients of one reflector got different copies (%p, %p)", a, b)
	}
	sibling := client("198.51.100.102")
	sibling.RouteReflectorClient = false
	if s := UpdatePathAttrs(logger, global, sibling, original); s == a {
		t.Fatal("a non-client was sent the clients' copy")
	}
	tor := &PeerInfo{PeerType: oc.PEER_TYPE_EXTERNAL, AS: 64513, LocalAS: 64512, LocalAddress: netip.MustParseAddr("198.51.100.101")}
	if e1, e2 := UpdatePathAttrs(logger, global, tor, original), UpdatePathAttrs(logger, global, tor, original); e1 == e2 || e1.IsShared() {
		t.Fatal("an eBGP peer's copy is shared")
	}
}

// updateBytes serialises a packer's output, each message as a session sends it.
func updateBytes(t *testing.T, updates []Packed, options *bgp.MarshallingOption) (msgs []string, wires int) {
	t.Helper()
	for _, u := range updates {
		b := u.Wire
		if b == nil {
			var err error
			if b, err = u.Msg.Serialize(options); err != nil {
				t.Fatal(err)
			}
		} else {
			wires++
		}
		msgs = append(msgs, fmt.Sprintf("%x", b))
	}
	slices.Sort(msgs)
	return msgs, wires
}

// A session sent shared copies gets, byte for byte, the UPDATEs upstream's packer builds (in
// its order, which is a map's), with or without add-path; the ones that carry one copy come
// serialised once, for every session at once.
func TestPackUpdatesSharedAsUpstream(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	logger := slog.New(slog.DiscardHandler)
	global := &oc.Global{Config: oc.GlobalConfig{As: 64512, RouterId: netip.MustParseAddr("198.51.100.101")}}
	client := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, LocalAddress: netip.MustParseAddr("198.51.100.101"),
		RouteReflectorClient: true, RouteReflectorClusterID: netip.MustParseAddr("244.0.0.1")}
	sent := 0
	for round := range 200 {
		var paths []*Path
		for i := range 1 + rng.IntN(40) {
			owner := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512,
				ID: netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + rng.IntN(4))})}
			owner.Address = owner.ID
			attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), bgp.NewPathAttributeLocalPref(100)}
			var p *Path
			if rng.IntN(2) == 0 {
				nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 26))
				nh, _ := bgp.NewPathAttributeNextHop(owner.Address)
				p = NewPath(bgp.RF_IPv4_UC, owner, bgp.PathNLRI{NLRI: nlri, ID: uint32(i)}, rng.IntN(5) == 0, append(attrs, nh), time.Now(), false)
			} else {
				nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, byte(i)}), 122))
				nh := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: owner.ID.As4()[3]})
				mp, _ := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, nh)
				p = NewPath(bgp.RF_IPv6_UC, owner, bgp.PathNLRI{NLRI: nlri, ID: uint32(i)}, rng.IntN(5) == 0, append(attrs, mp), time.Now(), false)
			}
			p.localID = uint32(i)
			if rng.IntN(3) > 0 {
				p = UpdatePathAttrs(logger, global, client, p)
			}
			paths = append(paths, p)
		}
		if rng.IntN(4) == 0 {
			paths = append(paths, NewEOR(bgp.RF_IPv6_UC))
		}
		// The reference: each copy as a path of its own, which nothing is kept on.
		plain := make([]*Path, len(paths))
		for i, p := range paths {
			plain[i] = p
			if p.IsShared() {
				plain[i] = p.Clone(p.IsWithdraw)
			}
		}
		// Sessions with and without add-path are sent the same copies, in either order.
		withoutAddPath := &bgp.MarshallingOption{}
		withAddPath := &bgp.MarshallingOption{AddPath: map[bgp.Family]bgp.BGPAddPathMode{bgp.RF_IPv4_UC: bgp.BGP_ADD_PATH_SEND, bgp.RF_IPv6_UC: bgp.BGP_ADD_PATH_SEND}}
		for pass, options := range []*bgp.MarshallingOption{withoutAddPath, withAddPath, withoutAddPath, withAddPath} {
			if round%2 == 1 {
				options = []*bgp.MarshallingOption{withAddPath, withoutAddPath}[pass%2]
			}
			want, _ := updateBytes(t, PackUpdates(plain, false, options), options)
			got, wires := updateBytes(t, PackUpdates(paths, true, options), options)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d pass %d: shared UPDATEs\n%v\nupstream's\n%v", round, pass, got, want)
			}
			sent += wires
			// A session that rewrites its messages gets its own, still the same bytes.
			if own, wires := updateBytes(t, PackUpdates(paths, false, options), options); !slices.Equal(own, want) || wires != 0 {
				t.Fatalf("round %d: unshared UPDATEs differ (%d of them shared)", round, wires)
			}
		}
	}
	if sent == 0 {
		t.Fatal("no UPDATE was sent serialised once")
	}
}

// A reflector's client withdrawing its block is one withdrawal every other client is sent: its
// UPDATE is serialised once for all of them (IPv4 and multiprotocol, with add-path and
// without), the same bytes as upstream's; a batch of two withdrawals is built per session.
func TestLoneWithdrawalShared(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	global := &oc.Global{Config: oc.GlobalConfig{As: 64512, RouterId: netip.MustParseAddr("198.51.100.101")}}
	client := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, LocalAddress: netip.MustParseAddr("198.51.100.101"),
		RouteReflectorClient: true, RouteReflectorClusterID: netip.MustParseAddr("244.0.0.1")}
	owner := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, ID: netip.MustParseAddr("198.51.100.7")}
	owner.Address = owner.ID
	withdrawn := func(i int, v6 bool) *Path {
		attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), bgp.NewPathAttributeLocalPref(100)}
		var p *Path
		if v6 {
			nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, byte(i)}), 122))
			mp, _ := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, netip.MustParseAddr("2001:db8::7"))
			p = NewPath(bgp.RF_IPv6_UC, owner, bgp.PathNLRI{NLRI: nlri}, true, append(attrs, mp), time.Now(), false)
		} else {
			nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 26))
			nh, _ := bgp.NewPathAttributeNextHop(owner.Address)
			p = NewPath(bgp.RF_IPv4_UC, owner, bgp.PathNLRI{NLRI: nlri}, true, append(attrs, nh), time.Now(), false)
		}
		p.localID = uint32(1 + i)
		return UpdatePathAttrs(logger, global, client, p) // the copy every client is sent
	}
	addPath := &bgp.MarshallingOption{AddPath: map[bgp.Family]bgp.BGPAddPathMode{bgp.RF_IPv4_UC: bgp.BGP_ADD_PATH_SEND, bgp.RF_IPv6_UC: bgp.BGP_ADD_PATH_SEND}}
	for _, v6 := range []bool{false, true} {
		for _, options := range []*bgp.MarshallingOption{{}, addPath} {
			w := withdrawn(1, v6)
			if !w.IsShared() {
				t.Fatal("the withdrawal's copy is not shared")
			}
			first, second := PackUpdates([]*Path{w}, true, options), PackUpdates([]*Path{w}, true, options)
			want, _ := updateBytes(t, PackUpdates([]*Path{w.Clone(true)}, false, options), options)
			got, wires := updateBytes(t, first, options)
			if wires != 1 || !slices.Equal(got, want) {
				t.Fatalf("IPv6 %v, add-path %v: %d of %d serialised once; %v, upstream's %v", v6, options.AddPath != nil, wires, len(first), got, want)
			}
			if len(second) != 1 || &second[0].Wire[0] != &first[0].Wire[0] {
				t.Fatalf("IPv6 %v: the second session serialised the withdrawal again", v6)
			}
			two := []*Path{withdrawn(2, v6), withdrawn(3, v6)}
			want, _ = updateBytes(t, PackUpdates([]*Path{two[0].Clone(true), two[1].Clone(true)}, false, options), options)
			got, wires = updateBytes(t, PackUpdates(two, true, options), options)
			if wires != 0 || !slices.Equal(got, want) {
				t.Fatalf("IPv6 %v: two withdrawals: %d serialised once; %v, upstream's %v", v6, wires, got, want)
			}
		}
	}
}

// The senders of many sessions pack the same copies at once.
func TestPackUpdatesConcurrently(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	global := &oc.Global{Config: oc.GlobalConfig{As: 64512, RouterId: netip.MustParseAddr("198.51.100.101")}}
	client := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, LocalAddress: netip.MustParseAddr("198.51.100.101"),
		RouteReflectorClient: true, RouteReflectorClusterID: netip.MustParseAddr("244.0.0.1")}
	var paths []*Path
	for i := range 64 {
		owner := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, ID: netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})}
		owner.Address = owner.ID
		nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, byte(i)}), 122))
		mp, _ := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)}))
		p := NewPath(bgp.RF_IPv6_UC, owner, bgp.PathNLRI{NLRI: nlri}, false,
			[]bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), bgp.NewPathAttributeLocalPref(100), mp}, time.Now(), false)
		paths = append(paths, UpdatePathAttrs(logger, global, client, p))
	}
	options := &bgp.MarshallingOption{}
	results := make([][]string, 8)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			for _, u := range PackUpdates(paths, true, options) {
				results[i] = append(results[i], fmt.Sprintf("%x", u.Wire))
			}
			slices.Sort(results[i])
		})
	}
	wg.Wait()
	for i := range results {
		if len(results[i]) != len(paths) || !slices.Equal(results[i], results[0]) || results[i][0] == "" {
			t.Fatalf("sender %d packed %d UPDATEs, sender 0 %d, or one was not serialised once", i, len(results[i]), len(results[0]))
		}
	}
}

// An export statement whose modifications read only the path (here: a community removed, as
// tabby strips its sibling tag) makes one copy of a copy iBGP peers share, itself shared, and
// the same as the copy it makes for each peer upstream; one that reads the peer (a next hop
// action), or a path no peers share, gets a copy per peer.
func TestStatementResultShared(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	global := &oc.Global{Config: oc.GlobalConfig{As: 64512, RouterId: netip.MustParseAddr("198.51.100.101")}}
	nlri, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("10.244.1.0/26"))
	nh, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr("198.51.100.11"))
	owner := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, ID: netip.MustParseAddr("198.51.100.102"), Address: netip.MustParseAddr("198.51.100.102")}
	original := NewPath(bgp.RF_IPv4_UC, owner, bgp.PathNLRI{NLRI: nlri}, false,
		[]bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), nh, bgp.NewPathAttributeLocalPref(100),
			bgp.NewPathAttributeCommunities([]uint32{202, 7})}, time.Now(), false)
	client := func(addr string) *PolicyOptions {
		return &PolicyOptions{Info: &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512, Address: netip.MustParseAddr(addr),
			LocalAddress: netip.MustParseAddr("198.51.100.101"), RouteReflectorClient: true, RouteReflectorClusterID: netip.MustParseAddr("244.0.0.1")},
			OldNextHop: netip.MustParseAddr("198.51.100.11")}
	}
	strip, err := NewCommunityAction(oc.SetCommunity{Options: "remove", SetCommunityMethod: oc.SetCommunityMethod{CommunitiesList: []string{"0:202"}}})
	if err != nil {
		t.Fatal(err)
	}
	self, err := NewNexthopAction("self")
	if err != nil {
		t.Fatal(err)
	}
	accept := &RoutingAction{AcceptRoute: true}
	stripStmt := &Statement{Name: "strip", RouteAction: accept, ModActions: []Action{strip}}
	selfStmt := &Statement{Name: "self", RouteAction: accept, ModActions: []Action{strip, self}}

	a, b := client("198.51.100.12"), client("198.51.100.13")
	shared := UpdatePathAttrs(logger, global, a.Info, original)
	_, pa := stripStmt.Apply(logger, shared, a)
	_, pb := stripStmt.Apply(logger, shared, b)
	if pa != pb || !pa.IsShared() {
		t.Fatalf("two clients got different copies from one statement (%p, %p), shared %v", pa, pb, pa.IsShared())
	}
	if got, want := wireOf(t, pa), wireOf(t, stripStmt.modify(logger, shared, a)); got != want {
		t.Fatalf("shared result %s, upstream's %s", got, want)
	}
	if slices.Contains(pa.GetCommunities(), 202) || !slices.Contains(pa.GetCommunities(), 7) {
		t.Fatalf("communities %v, want 7 without 202", pa.GetCommunities())
	}
	if _, p1 := selfStmt.Apply(logger, shared, a); p1 == pa || p1.IsShared() {
		t.Fatal("a statement that sets the next hop shared its result")
	}
	own := original.Clone(false)
	if _, p1 := stripStmt.Apply(logger, own, a); p1.IsShared() {
		t.Fatal("a path no peers share got a shared result")
	}
}
