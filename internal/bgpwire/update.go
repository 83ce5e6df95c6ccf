package bgpwire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Path attribute type codes of RFC 4760.
const (
	AttrMPReach   = 14
	AttrMPUnreach = 15
)

// Received is an UPDATE as the wire carried it: what a test checks when the question is
// what a speaker sent, not what a lenient receiver made of it.
type Received struct {
	Withdrawn []netip.Prefix // IPv4 withdrawn routes
	NLRI      []netip.Prefix // IPv4 NLRI, next hop in NextHop
	NextHop   []byte         // the NEXT_HOP attribute's value, as sent
	// MPReach is every MP_REACH_NLRI (RFC 4760): its AFI/SAFI, next hop bytes as sent (16 for
	// a global IPv6 address, 32 with a link-local one after it, 4 for IPv4) and prefixes.
	MPReach   []MPReach
	MPUnreach []netip.Prefix
	// EndOfRIB is the AFI (1 IPv4, 2 IPv6) whose End-of-RIB marker (RFC 4724) this UPDATE is;
	// 0 when it is not one.
	EndOfRIB uint16
	Err      error // the UPDATE did not parse; the fields above are empty
}

// MPReach is one MP_REACH_NLRI attribute.
type MPReach struct {
	AFI     uint16
	SAFI    uint8
	NextHop []byte
	NLRI    []netip.Prefix
}

// NextHops decodes the next hop field: one address, or a global and a link-local IPv6 address.
func (m MPReach) NextHops() ([]netip.Addr, error) {
	switch len(m.NextHop) {
	case 4, 16:
		a, _ := netip.AddrFromSlice(m.NextHop)
		return []netip.Addr{a}, nil
	case 32:
		g, _ := netip.AddrFromSlice(m.NextHop[:16])
		ll, _ := netip.AddrFromSlice(m.NextHop[16:])
		return []netip.Addr{g, ll}, nil
	}
	return nil, fmt.Errorf("next hop of %d bytes", len(m.NextHop))
}

// ParseUpdate decodes an UPDATE body (after the header).
func ParseUpdate(body []byte) (Received, error) {
	var u Received
	if len(body) < 2 {
		return u, fmt.Errorf("UPDATE of %d bytes", len(body))
	}
	wl := int(binary.BigEndian.Uint16(body))
	if 2+wl+2 > len(body) {
		return u, fmt.Errorf("withdrawn routes length %d past the message", wl)
	}
	var err error
	if u.Withdrawn, err = parsePrefixes(body[2:2+wl], 32); err != nil {
		return u, fmt.Errorf("withdrawn routes: %w", err)
	}
	rest := body[2+wl:]
	al := int(binary.BigEndian.Uint16(rest))
	if 2+al > len(rest) {
		return u, fmt.Errorf("path attribute length %d past the message", al)
	}
	attrs := rest[2 : 2+al]
	if u.NLRI, err = parsePrefixes(rest[2+al:], 32); err != nil {
		return u, fmt.Errorf("NLRI: %w", err)
	}
	if wl == 0 && al == 0 && len(u.NLRI) == 0 {
		u.EndOfRIB = 1
		return u, nil
	}
	nattrs := 0
	var unreachAFI uint16
	for len(attrs) > 0 {
		nattrs++
		if len(attrs) < 3 {
			return u, fmt.Errorf("truncated attribute header")
		}
		flags, typ := attrs[0], attrs[1]
		n, hl := int(attrs[2]), 3
		if flags&FlagExtended != 0 {
			if len(attrs) < 4 {
				return u, fmt.Errorf("truncated attribute header")
			}
			n, hl = int(binary.BigEndian.Uint16(attrs[2:])), 4
		}
		if hl+n > len(attrs) {
			return u, fmt.Errorf("attribute %d: length %d past the attributes", typ, n)
		}
		v := attrs[hl : hl+n]
		attrs = attrs[hl+n:]
		switch typ {
		case AttrNextHop:
			u.NextHop = v
		case AttrMPReach:
			m, err := parseMPReach(v)
			if err != nil {
				return u, fmt.Errorf("MP_REACH_NLRI: %w", err)
			}
			u.MPReach = append(u.MPReach, m)
		case AttrMPUnreach:
			if len(v) < 3 {
				return u, fmt.Errorf("MP_UNREACH_NLRI of %d bytes", len(v))
			}
			ps, err := parsePrefixes(v[3:], afiBits(binary.BigEndian.Uint16(v)))
			if err != nil {
				return u, fmt.Errorf("MP_UNREACH_NLRI: %w", err)
			}
			u.MPUnreach = append(u.MPUnreach, ps...)
			unreachAFI = binary.BigEndian.Uint16(v)
		}
	}
	if nattrs == 1 && unreachAFI != 0 && len(u.MPUnreach) == 0 && len(u.Withdrawn) == 0 && len(u.NLRI) == 0 {
		u.EndOfRIB = unreachAFI
	}
	return u, nil
}

func parseMPReach(v []byte) (MPReach, error) {
	if len(v) < 4 {
		return MPReach{}, fmt.Errorf("%d bytes", len(v))
	}
	m := MPReach{AFI: binary.BigEndian.Uint16(v), SAFI: v[2]}
	nl := int(v[3])
	if 4+nl+1 > len(v) {
		return m, fmt.Errorf("next hop length %d past the attribute", nl)
	}
	m.NextHop = v[4 : 4+nl]
	var err error
	m.NLRI, err = parsePrefixes(v[4+nl+1:], afiBits(m.AFI)) // one reserved byte after the next hop
	return m, err
}

func afiBits(afi uint16) int {
	if afi == 2 {
		return 128
	}
	return 32
}

func parsePrefixes(b []byte, bits int) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for len(b) > 0 {
		l := int(b[0])
		n := (l + 7) / 8
		if l > bits || 1+n > len(b) {
			return nil, fmt.Errorf("prefix length %d", l)
		}
		var a netip.Addr
		if bits == 32 {
			var v [4]byte
			copy(v[:], b[1:1+n])
			a = netip.AddrFrom4(v)
		} else {
			var v [16]byte
			copy(v[:], b[1:1+n])
			a = netip.AddrFrom16(v)
		}
		out = append(out, netip.PrefixFrom(a, l))
		b = b[1+n:]
	}
	return out, nil
}

// Received returns the UPDATEs received so far, in order.
func (s *Session) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.updates...)
}
