package table

// Tests of tabby's changes to GoBGP (TABBY.md).

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// upstreamGetPathAttrs is GoBGP v4.8.0's GetPathAttrs, the reference for tabby's.
func upstreamGetPathAttrs(path *Path) []bgp.PathAttributeInterface {
	deleted := NewBitmap(math.MaxUint8)
	modified := make(map[uint]bgp.PathAttributeInterface)
	p := path
	for {
		for _, t := range p.dels {
			deleted.Flag(uint(t))
		}
		if p.parent == nil {
			list := PathAttrs(make([]bgp.PathAttributeInterface, 0, len(p.pathAttrs)))
			for _, a := range p.pathAttrs {
				typ := uint(a.GetType())
				if m, ok := modified[typ]; ok {
					list = append(list, m)
					delete(modified, typ)
				} else if !deleted.GetFlag(typ) {
					list = append(list, a)
				}
			}
			if len(modified) > 0 {
				for _, m := range modified {
					list = append(list, m)
				}
				sort.Sort(list)
			}
			return list
		}
		for _, a := range p.pathAttrs {
			typ := uint(a.GetType())
			if _, ok := modified[typ]; !deleted.GetFlag(typ) && !ok {
				modified[typ] = a
			}
		}
		p = p.parent
	}
}

// Random chains of clones that set and delete attributes, as export policy and route
// reflection do, give the same attributes in the same order as upstream's implementation.
func TestGetPathAttrsAsUpstream(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nlri, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("10.244.1.0/26"))
	attr := func(typ int, v uint32) bgp.PathAttributeInterface {
		switch typ {
		case 0:
			return bgp.NewPathAttributeOrigin(uint8(v % 3))
		case 1:
			nh, _ := bgp.NewPathAttributeNextHop(netip.AddrFrom4([4]byte{198, 51, 100, byte(v)}))
			return nh
		case 2:
			return bgp.NewPathAttributeMultiExitDisc(v)
		case 3:
			return bgp.NewPathAttributeLocalPref(v)
		case 4:
			a, _ := bgp.NewPathAttributeOriginatorId(netip.AddrFrom4([4]byte{198, 51, 100, byte(v)}))
			return a
		case 5:
			a, _ := bgp.NewPathAttributeClusterList([]netip.Addr{netip.AddrFrom4([4]byte{244, 0, 0, byte(v)})})
			return a
		case 6:
			return bgp.NewPathAttributeCommunities([]uint32{v})
		default:
			return bgp.NewPathAttributeAsPath(nil)
		}
	}
	types := func(l []bgp.PathAttributeInterface) []bgp.BGPAttrType {
		var out []bgp.BGPAttrType
		for _, a := range l {
			out = append(out, a.GetType())
		}
		return out
	}
	for range 2000 {
		root := []bgp.PathAttributeInterface{}
		for typ := range 8 {
			if rng.IntN(2) == 0 {
				root = append(root, attr(typ, rng.Uint32()))
			}
		}
		slices.SortFunc(root, func(a, b bgp.PathAttributeInterface) int { return int(a.GetType()) - int(b.GetType()) })
		p := NewPath(bgp.RF_IPv4_UC, nil, bgp.PathNLRI{NLRI: nlri}, false, root, time.Now(), false)
		for range rng.IntN(5) {
			p = p.Clone(false)
			for range rng.IntN(4) {
				typ := rng.IntN(8)
				if rng.IntN(3) == 0 {
					p.delPathAttr(attr(typ, 0).GetType())
				} else {
					p.setPathAttr(attr(typ, rng.Uint32()))
				}
			}
		}
		got, want := p.GetPathAttrs(), upstreamGetPathAttrs(p)
		if len(got) != len(want) {
			t.Fatalf("attributes %v, upstream %v", types(got), types(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("attribute %d: %v, upstream %v (types %v)", i, got[i], want[i], types(want))
			}
		}
	}
}

func BenchmarkGetPathAttrs(b *testing.B) {
	nlri, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("10.244.1.0/26"))
	nh, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr("198.51.100.1"))
	p := NewPath(bgp.RF_IPv4_UC, nil, bgp.PathNLRI{NLRI: nlri}, false,
		[]bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), nh, bgp.NewPathAttributeLocalPref(100)}, time.Now(), false)
	// A reflected copy: ORIGINATOR_ID and CLUSTER_LIST added.
	p = p.Clone(false)
	id, _ := bgp.NewPathAttributeOriginatorId(netip.MustParseAddr("198.51.100.1"))
	p.setPathAttr(id)
	cl, _ := bgp.NewPathAttributeClusterList([]netip.Addr{netip.MustParseAddr("244.0.0.1")})
	p.setPathAttr(cl)
	b.Run("tabby", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.GetPathAttrs()
		}
	})
	b.Run("upstream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = upstreamGetPathAttrs(p)
		}
	})
}
