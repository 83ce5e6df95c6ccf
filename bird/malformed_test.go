package bird

import (
	"context"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/bgpwire"
)

// malformedCases are UPDATEs no correct router sends. The first three are the published
// remote-crash patterns of GoBGP before v4.4.0/v4.5.0 (a panic there is a crash of tabby-node,
// and of this test binary); the rest cover RFC 7606's classes.
func malformedCases(good netip.Prefix, nh netip.Addr) []struct {
	name    string
	body    []byte
	msgType byte // 0: UPDATE
} {
	as := bgpwire.ASPath(65093)
	nlri := bgpwire.NLRI(good)
	withAttrs := func(attrs ...[]byte) []byte { return bgpwire.Update(nil, attrs, nlri) }
	return []struct {
		name    string
		body    []byte
		msgType byte // 0: UPDATE
	}{
		// A message type BGP does not define: GoBGP v3's parser returns no message with the
		// error, and its error handler dereferenced the missing message (a crash from any
		// established peer; v4 resets the session).
		{name: "undefined message type 7", body: []byte{0}, msgType: 7},
		// CVE-2026-30405: NEXT_HOP shorter than 4 bytes without the transitive flag.
		{name: "NEXT_HOP length 1, not transitive", body: withAttrs(bgpwire.Origin(), as, bgpwire.Attr(0, bgpwire.AttrNextHop, []byte{10}, -1))},
		{name: "NEXT_HOP length 0, not transitive", body: withAttrs(bgpwire.Origin(), as, bgpwire.Attr(0, bgpwire.AttrNextHop, nil, -1))},
		// CVE-2026-41642: an unrecognised attribute marked well-known (optional bit clear).
		{name: "unknown well-known attribute", body: withAttrs(bgpwire.Origin(), as, bgpwire.NextHop(nh), bgpwire.Attr(bgpwire.FlagTransitive, 0xfe, []byte{1, 2, 3}, -1))},
		// CVE-2026-42285: attribute lengths that disagree with the total path attribute length.
		// ... and a treat-as-withdraw UPDATE that carries MP_REACH_NLRI of a family the session
		// never negotiated (IPv6 unicast here): GoBGP turned it into withdrawals for a table it
		// does not have.
		{name: "treat-as-withdraw with MP_REACH of an unconfigured family", body: withAttrs(mpReachIPv6(), bgpwire.Attr(0, bgpwire.AttrOrigin, []byte{0}, -1), as, bgpwire.NextHop(nh))},
		{name: "attribute longer than the attribute section", body: bgpwire.UpdateRaw(0, nil, 10, append(append(bgpwire.Origin(), as...), bgpwire.NextHop(nh)...), nlri)},
		{name: "attribute length past the message", body: withAttrs(bgpwire.Origin(), as, bgpwire.Attr(bgpwire.FlagTransitive, bgpwire.AttrNextHop, nh.AsSlice(), 40))},
		{name: "ORIGIN not transitive", body: withAttrs(bgpwire.Attr(0, bgpwire.AttrOrigin, []byte{0}, -1), as, bgpwire.NextHop(nh))},
		{name: "ORIGIN over-long", body: withAttrs(bgpwire.Attr(bgpwire.FlagTransitive, bgpwire.AttrOrigin, []byte{0, 0, 0}, -1), as, bgpwire.NextHop(nh))},
		{name: "truncated attribute header", body: withAttrs(bgpwire.Origin(), as, bgpwire.NextHop(nh), []byte{bgpwire.FlagTransitive})},
		{name: "NEXT_HOP 0.0.0.0", body: withAttrs(bgpwire.Origin(), as, bgpwire.NextHop(netip.IPv4Unspecified()))},
		{name: "NEXT_HOP multicast", body: withAttrs(bgpwire.Origin(), as, bgpwire.NextHop(netip.MustParseAddr("224.0.0.5")))},
		{name: "NEXT_HOP class E", body: withAttrs(bgpwire.Origin(), as, bgpwire.NextHop(netip.MustParseAddr("240.0.0.1")))},
		{name: "NEXT_HOP length 6", body: withAttrs(bgpwire.Origin(), as, bgpwire.Attr(bgpwire.FlagTransitive, bgpwire.AttrNextHop, []byte{198, 51, 100, 93, 0, 0}, -1))},
		{name: "withdrawn routes length past the message", body: bgpwire.UpdateRaw(200, bgpwire.NLRI(good), 0, nil, nil)},
		{name: "NLRI prefix length 33", body: withAttrs(bgpwire.Origin(), as, bgpwire.NextHop(nh))[:0:0]},
		{name: "prefix outside every pool, next hop 0.0.0.0", body: bgpwire.Update(nil, [][]byte{bgpwire.Origin(), as, bgpwire.NextHop(netip.IPv4Unspecified())}, bgpwire.NLRI(netip.MustParsePrefix("172.16.0.0/16")))},
	}
}

// mpReachIPv6 is an MP_REACH_NLRI for fd00:10:244:1::/64 via 2001:db8::93.
func mpReachIPv6() []byte {
	nh := netip.MustParseAddr("2001:db8::93").As16()
	v := []byte{0, 2, 1, 16}
	v = append(v, nh[:]...)
	v = append(v, 0, 64, 0xfd, 0, 0, 0x10, 0x02, 0x44, 0, 1)
	return bgpwire.Attr(bgpwire.FlagOptional, 14, v, -1)
}

// TestMalformedUpdates: an external peer's malformed UPDATE never takes the node down. For each
// case the peer first has a valid route installed, then sends the malformed UPDATE: the node keeps
// running (a panic in the speaker would end this process), the offending session is reset or the
// UPDATE treated as a withdrawal (RFC 7606), the other session and its routes are untouched, and
// the peer's valid route comes back afterwards (on a new session if it was reset).
func TestMalformedUpdates(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(91, nil, ""), mkNode(92, nil, "")}
	rawAddr := netip.MustParseAddr("198.51.100.93")
	netnstest.AddLoopback(t, rawAddr)
	bgpPeers := []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "raw"}, Spec: v1.BGPPeerSpec{Node: "node91", PeerIP: rawAddr.String(), ASNumber: 65093}}}
	a := startNode(t, all[0], all, func(b *Bird) { send(b, peerUpdates(bgpPeers...)...) })
	b := startNode(t, all[1], all, func(b *Bird) { send(b, peerUpdates(bgpPeers...)...) })
	nodeA, nodeB := addr4(all[0]), addr4(all[1])
	a.routes.waitRoute(t, b.block, nodeB, 15*time.Second)

	good := netip.MustParsePrefix("10.244.200.0/26")
	valid := bgpwire.Update(nil, [][]byte{bgpwire.Origin(), bgpwire.ASPath(65093), bgpwire.NextHop(rawAddr)}, bgpwire.NLRI(good))
	dial := func(t *testing.T) *bgpwire.Session {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			s, err := bgpwire.Dial(ctx, bgpwire.Config{Local: rawAddr, Remote: nodeA, ASN: 65093})
			cancel()
			if err == nil {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("raw peer: no session with node91 after 30s: %v", err)
			}
			time.Sleep(200 * time.Millisecond) // GoBGP refuses for a few seconds after a reset
		}
	}
	// One session serves every case it survives: each reset costs GoBGP's idle hold.
	s := dial(t)
	t.Cleanup(func() { _ = s.Close() }) // the session open at the end, whichever it is
	for _, tc := range malformedCases(good, rawAddr) {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.body) == 0 { // built here: NLRI bytes no encoder produces
				tc.body = bgpwire.Update(nil, [][]byte{bgpwire.Origin(), bgpwire.ASPath(65093), bgpwire.NextHop(rawAddr)}, []byte{33, 10, 244, 200, 0, 0})
			}
			if err := s.SendUpdate(valid); err != nil {
				t.Fatal(err)
			}
			a.routes.waitRoute(t, good, rawAddr, 10*time.Second)
			send := s.SendUpdate
			if tc.msgType != 0 {
				send = func(b []byte) error { return s.SendMessage(tc.msgType, b) }
			}
			if err := send(tc.body); err != nil {
				t.Fatalf("%s: send: %v", tc.name, err)
			}
			// What did the speaker do? Reset (NOTIFICATION, connection closed), treat-as-withdraw
			// (the route goes), or ignore (the route stays, nothing else happens).
			outcome := "ignored (session and route kept)"
			deadline := time.Now().Add(2 * time.Second)
		wait:
			for time.Now().Before(deadline) {
				select {
				case <-s.Closed():
					outcome = "session reset"
					if n := s.Notifications(); len(n) > 0 {
						outcome += " with " + n[len(n)-1].String()
					}
					break wait
				case <-time.After(20 * time.Millisecond):
				}
				if _, ok := a.routes.get(good); !ok {
					outcome = "treated as withdraw (RFC 7606)"
					break
				}
			}
			t.Logf("%-48s %s", tc.name+":", outcome)
			if _, ok := a.routes.get(netip.MustParsePrefix("172.16.0.0/16")); ok {
				t.Fatalf("%s: a prefix outside every pool reached the dataplane", tc.name)
			}
			// The other session and its route are untouched.
			if nh, ok := a.routes.get(b.block); !ok || nh != nodeB {
				t.Fatalf("%s: node92's block left node91's dataplane (%v %v)", tc.name, nh, ok)
			}
			a.waitPeer(t, nodeB, "established", time.Second)
			// The peer's valid route comes back.
			select {
			case <-s.Closed():
				s = dial(t)
			default:
			}
			if err := s.SendUpdate(valid); err != nil {
				t.Fatal(err)
			}
			a.routes.waitRoute(t, good, rawAddr, 10*time.Second)
		})
	}
	// The peer goes away: its route goes, node92's stays.
	_ = s.Close()
	a.routes.waitGone(t, good, 10*time.Second)
	if _, ok := a.routes.get(b.block); !ok {
		t.Fatal("node92's block left node91's dataplane")
	}
}
