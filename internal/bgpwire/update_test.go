package bgpwire

import (
	"net/netip"
	"slices"
	"testing"
)

func TestParseUpdate(t *testing.T) {
	nh6 := netip.MustParseAddr("2001:db8:100::11").As16()
	ll := netip.MustParseAddr("fe80::1").As16()
	p6 := netip.MustParsePrefix("fd00:10:244:1::/122")
	mp := []byte{0, 2, 1, 32}
	mp = append(append(append(mp, nh6[:]...), ll[:]...), 0)
	mp = append(mp, NLRI(p6)...)
	p4 := netip.MustParsePrefix("10.244.1.0/26")
	body := Update(NLRI(netip.MustParsePrefix("10.244.9.0/26")), [][]byte{Origin(), ASPath(64512), NextHop(netip.MustParseAddr("198.51.100.11")), Attr(FlagOptional, AttrMPReach, mp, -1)}, NLRI(p4))
	u, err := ParseUpdate(body)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(u.NLRI, []netip.Prefix{p4}) || !slices.Equal(u.Withdrawn, []netip.Prefix{netip.MustParsePrefix("10.244.9.0/26")}) {
		t.Errorf("IPv4 part: %+v", u)
	}
	if len(u.MPReach) != 1 || u.MPReach[0].AFI != 2 || !slices.Equal(u.MPReach[0].NLRI, []netip.Prefix{p6}) {
		t.Fatalf("MP_REACH: %+v", u.MPReach)
	}
	nhs, err := u.MPReach[0].NextHops()
	if err != nil || len(nhs) != 2 || nhs[0] != netip.AddrFrom16(nh6) || nhs[1] != netip.AddrFrom16(ll) {
		t.Errorf("next hops %v, %v", nhs, err)
	}

	eor6, err := ParseUpdate(Update(nil, [][]byte{Attr(FlagOptional, AttrMPUnreach, []byte{0, 2, 1}, -1)}, nil))
	if err != nil || eor6.EndOfRIB != 2 {
		t.Errorf("IPv6 End-of-RIB: %+v %v", eor6, err)
	}
	if eor4, err := ParseUpdate(Update(nil, nil, nil)); err != nil || eor4.EndOfRIB != 1 {
		t.Errorf("IPv4 End-of-RIB: %+v %v", eor4, err)
	}
	if _, err := ParseUpdate(UpdateRaw(0, nil, 50, Origin(), nil)); err == nil {
		t.Error("attribute length past the message: no error")
	}
}
