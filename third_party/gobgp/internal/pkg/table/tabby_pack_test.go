package table

// Test of tabby's change "A batch packed without per-batch maps" (TABBY.md).

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// A batch's UPDATEs carry, for each NLRI and path identifier, the last thing queued for it
// (announced with its attributes, or withdrawn), whatever the batch's size: small batches look
// ahead for a successor, large ones use a map, as upstream does for all. Batches mix families,
// repeat keys and share attributes (several paths in one UPDATE), and are packed one after
// the other, as the senders do with the packers' reused scratch.
func TestPackUpdatesLastOfEachKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 400 {
		n := 1 + rng.IntN(80)
		var paths []*Path
		want := map[string]string{} // NLRI/id → "announce <next hop>" or "withdraw"
		for range n {
			i := rng.IntN(n/2 + 1)
			owner := &PeerInfo{PeerType: oc.PEER_TYPE_INTERNAL, AS: 64512, LocalAS: 64512,
				ID: netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + rng.IntN(3))})}
			owner.Address = owner.ID
			attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), bgp.NewPathAttributeLocalPref(100)}
			withdraw := rng.IntN(4) == 0
			var p *Path
			var key, nh string
			if rng.IntN(2) == 0 {
				nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 26))
				a, _ := bgp.NewPathAttributeNextHop(owner.Address)
				p = NewPath(bgp.RF_IPv4_UC, owner, bgp.PathNLRI{NLRI: nlri}, withdraw, append(attrs, a), time.Now(), false)
				key, nh = nlri.String(), owner.Address.String()
			} else {
				nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, byte(i)}), 122))
				a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: owner.ID.As4()[3]})
				mp, _ := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, a)
				p = NewPath(bgp.RF_IPv6_UC, owner, bgp.PathNLRI{NLRI: nlri}, withdraw, append(attrs, mp), time.Now(), false)
				key, nh = nlri.String(), a.String()
			}
			p.localID = uint32(rng.IntN(2))
			key = fmt.Sprintf("%s/%d", key, p.localID)
			want[key] = "announce " + nh
			if withdraw {
				want[key] = "withdraw"
			}
			paths = append(paths, p)
		}
		for _, shared := range []bool{false, true} {
			got := map[string]string{}
			for _, u := range PackUpdates(paths, shared) {
				body := u.Msg.Body.(*bgp.BGPUpdate)
				for _, w := range body.WithdrawnRoutes {
					got[fmt.Sprintf("%s/%d", w.NLRI, w.ID)] = "withdraw"
				}
				var nh string
				for _, a := range body.PathAttributes {
					if a, ok := a.(*bgp.PathAttributeNextHop); ok {
						nh = a.Value.String()
					}
				}
				for _, r := range body.NLRI {
					got[fmt.Sprintf("%s/%d", r.NLRI, r.ID)] = "announce " + nh
				}
				for _, a := range body.PathAttributes {
					switch a := a.(type) {
					case *bgp.PathAttributeMpReachNLRI:
						for _, r := range a.Value {
							got[fmt.Sprintf("%s/%d", r.NLRI, r.ID)] = "announce " + a.Nexthop.String()
						}
					case *bgp.PathAttributeMpUnreachNLRI:
						for _, r := range a.Value {
							got[fmt.Sprintf("%s/%d", r.NLRI, r.ID)] = "withdraw"
						}
					}
				}
			}
			if !maps.Equal(got, want) {
				t.Fatalf("round %d (%d paths, shared %v):\ngot  %v\nwant %v", round, n, shared, got, want)
			}
		}
	}
}
