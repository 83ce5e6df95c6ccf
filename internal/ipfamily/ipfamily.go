// Package ipfamily is the one home of "IPv4 or IPv6" in tabby. A family always comes from an
// address or a prefix that was parsed once at the edge, never from a separate flag that could
// disagree with it; everything that differs per family (host prefix length, the iptables and
// ipset flavour) is answered here, so the rest of the code is written once for both.
package ipfamily

import (
	"fmt"
	"net/netip"
)

// Family is IPv4 or IPv6.
type Family uint8

const (
	// Unknown is the zero value: an invalid address has no family.
	Unknown Family = 0
	IPv4    Family = 4
	IPv6    Family = 6
)

// All lists the families in the order tabby handles them.
var All = []Family{IPv4, IPv6}

// OfAddr returns a's family; an IPv4-mapped IPv6 address is IPv4 (callers parse with
// netip and unmap at the edge, but a stray mapped address must not become a sixth family).
func OfAddr(a netip.Addr) Family {
	switch {
	case !a.IsValid():
		return Unknown
	case a.Is4() || a.Is4In6():
		return IPv4
	default:
		return IPv6
	}
}

// OfPrefix returns p's family.
func OfPrefix(p netip.Prefix) Family { return OfAddr(p.Addr()) }

// String is "IPv4" or "IPv6".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

// Bits is the address length: 32 or 128.
func (f Family) Bits() int {
	if f == IPv6 {
		return 128
	}
	return 32
}

// HostPrefix is a as a single-address prefix: a /32 or a /128.
func HostPrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	return netip.PrefixFrom(a, OfAddr(a).Bits())
}

// IPSetFamily is the `family` argument of `ipset create`.
func (f Family) IPSetFamily() string {
	if f == IPv6 {
		return "inet6"
	}
	return "inet"
}

// IPTablesCommand is the iptables flavour's command prefix ("iptables" or "ip6tables"); the
// backend suffix ("-nft", "-legacy", "-restore") is appended by the caller.
func (f Family) IPTablesCommand() string {
	if f == IPv6 {
		return "ip6tables"
	}
	return "iptables"
}

// Split returns the prefixes of one family, in their order.
func Split(ps []netip.Prefix, f Family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if OfPrefix(p) == f {
			out = append(out, p)
		}
	}
	return out
}

// NameSuffix tells apart the two families' copies of an object whose names share one name
// space (ipset names are global in a network namespace, across families): "" for IPv4, so
// names tabby used before IPv6 stay as they were, and "-v6" for IPv6.
func (f Family) NameSuffix() string {
	if f == IPv6 {
		return "-v6"
	}
	return ""
}

// Pair holds one value per family, in place of an X and X6 field pair: p.Get(ipfamily.IPv6).
// It is comparable when T is.
type Pair[T any] [2]T

func (f Family) index() int {
	if f == IPv6 {
		return 1
	}
	return 0
}

// Get returns f's value (IPv4's for Unknown).
func (p Pair[T]) Get(f Family) T { return p[f.index()] }

// Set sets f's value.
func (p *Pair[T]) Set(f Family, v T) { p[f.index()] = v }

// PairOf is a pair from an IPv4 and an IPv6 value.
func PairOf[T any](v4, v6 T) Pair[T] { return Pair[T]{v4, v6} }

// Ptr points at f's value, for whatever fills it in place (a flag).
func (p *Pair[T]) Ptr(f Family) *T { return &p[f.index()] }

// ComparePrefixes orders prefixes by address, then by length (10.0.0.0/8, 10.0.0.0/16,
// 10.1.0.0/16): the order a walk of an address range needs, and the one people read.
// netip.Prefix.Compare orders by length first.
func ComparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
