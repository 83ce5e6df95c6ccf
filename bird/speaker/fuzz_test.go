package speaker

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// updateBody serialises an UPDATE's body (no header) for the seed corpus.
func updateBody(t testing.TB, withdrawn []string, attrs []bgp.PathAttributeInterface, nlri []string) []byte {
	t.Helper()
	pn := func(list []string) []bgp.PathNLRI {
		var out []bgp.PathNLRI
		for _, s := range list {
			p, err := bgp.NewIPAddrPrefix(netip.MustParsePrefix(s))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, bgp.PathNLRI{NLRI: p})
		}
		return out
	}
	b, err := bgp.NewBGPUpdateMessage(pn(withdrawn), attrs, pn(nlri)).Body.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzBestEvent feeds arbitrary UPDATE bodies through GoBGP's own parser and every path that
// comes out of it through bestEvent, the one place tabby turns what the speaker delivers into
// its own types: it must never panic, and an event it accepts is a valid, masked IPv4 prefix
// whose next hop, if any, is a valid address.
func FuzzBestEvent(f *testing.F) {
	nh, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr("198.51.100.7"))
	asPath := bgp.NewPathAttributeAsPath([]bgp.AsPathParamInterface{bgp.NewAs4PathParam(bgp.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{65001})})
	f.Add(updateBody(f, nil, []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), asPath, nh}, []string{"10.244.1.0/26"}))
	f.Add(updateBody(f, []string{"10.244.2.0/26", "10.244.3.7/32"}, nil, nil))
	f.Add(updateBody(f, nil, []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), nh}, []string{"0.0.0.0/0", "10.244.0.0/16"}))
	f.Add([]byte{0, 0, 0, 4, 0x40, 3, 4, 0})                 // NEXT_HOP cut short
	f.Add([]byte{0, 5, 0x20, 10, 244, 0, 0, 0, 0})           // withdrawn length past the end
	f.Add([]byte{0, 0, 0, 6, 0x40, 0xfe, 3, 1, 2, 3, 8, 10}) // unknown well-known attribute
	f.Fuzz(func(t *testing.T, body []byte) {
		h := &bgp.BGPHeader{Type: bgp.BGP_MSG_UPDATE, Len: uint16(min(len(body)+bgp.BGP_HEADER_LENGTH, 65535))}
		msg, err := bgp.ParseBGPBody(h, body)
		if err != nil {
			return
		}
		u, ok := msg.Body.(*bgp.BGPUpdate)
		if !ok {
			return
		}
		check := func(n bgp.PathNLRI, withdraw bool) {
			p := &apiutil.Path{Family: bgp.RF_IPv4_UC, Nlri: n.NLRI, Attrs: u.PathAttributes, Withdrawal: withdraw,
				PeerAddress: netip.AddrFrom4([4]byte{198, 51, 100, byte(binary.BigEndian.Uint16(append(body, 0, 0)[:2]))})}
			e, err := bestEvent(p)
			if err != nil {
				return
			}
			if !e.Prefix.IsValid() || !e.Prefix.Addr().Is4() || e.Prefix != e.Prefix.Masked() {
				t.Fatalf("bestEvent accepted prefix %v from NLRI %v", e.Prefix, n.NLRI)
			}
			if e.NextHop.IsValid() && e.NextHop.Is4In6() {
				t.Fatalf("next hop %v left IPv4-mapped", e.NextHop)
			}
			if e.Withdrawn != withdraw || e.Type != BestPath {
				t.Fatalf("event %+v for withdraw=%v", e, withdraw)
			}
		}
		for _, n := range u.NLRI {
			check(n, false)
		}
		for _, n := range u.WithdrawnRoutes {
			check(n, true)
		}
		// Paths without NLRI, or of another family, are errors, never panics.
		if _, err := bestEvent(&apiutil.Path{Family: bgp.RF_IPv6_UC, Attrs: u.PathAttributes}); err == nil {
			t.Fatal("bestEvent accepted a path without NLRI")
		}
	})
}
