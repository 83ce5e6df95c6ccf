package lab

import (
	"fmt"
	"net/netip"
	"strconv"
)

// Families says which address families a lab's pods get.
type Families int

const (
	// IPv4Only is wave 1's lab: an IPv4 underlay and IPv4 pods.
	IPv4Only Families = iota
	// DualStack gives the underlay both families and every pod one address of each (the
	// chart's IPv4 pool and its IPv6 pool).
	DualStack
	// IPv6Only is an IPv6-only cluster as tabby sees it: pods get an IPv6 address only (the
	// chart's IPv6 pool alone), and nodes have no IPv4 BGP address (tabby-node
	// --bgp-address=none, no IPv4 InternalIP), so they mesh over IPv6 with router IDs derived
	// from their names. The lab's links keep their IPv4 addresses, unused by tabby.
	IPv6Only
)

// ParseFamilies reads the names the lab command takes.
func ParseFamilies(s string) (Families, error) {
	switch s {
	case "ipv4", "":
		return IPv4Only, nil
	case "dual":
		return DualStack, nil
	case "ipv6":
		return IPv6Only, nil
	}
	return 0, fmt.Errorf("address families %q: want ipv4, dual or ipv6", s)
}

func (f Families) String() string { return [...]string{"ipv4", "dual", "ipv6"}[f] }

// IPv4Pods tells whether pods get an IPv4 address.
func (f Families) IPv4Pods() bool { return f != IPv6Only }

// IPv6 tells whether the lab has IPv6 (an IPv6 underlay and IPv6 pods).
func (f Families) IPv6() bool { return f != IPv4Only }

// helmSet are the chart values that give the lab its pools; the lab's own HelmSet comes after
// them and wins.
func (f Families) helmSet() []string {
	switch f {
	case DualStack:
		return []string{"ipv6Pool.create=true"}
	case IPv6Only:
		return []string{"ipPool.create=false", "ipv6Pool.create=true"}
	}
	return nil
}

// The IPv6 underlay mirrors the IPv4 one: a /64 per subnet with the router at ::1, "the
// internet" behind the router, and node N of a subnet at ::N (node .11 is ::11).
var (
	SubnetA6      = netip.MustParsePrefix("2001:db8:100::/64")
	SubnetB6      = netip.MustParsePrefix("2001:db8:180::/64")
	RouterA6      = netip.MustParseAddr("2001:db8:100::1")
	RouterB6      = netip.MustParseAddr("2001:db8:180::1")
	InternetNet6  = netip.MustParsePrefix("2001:db8:203::/64")
	RouterInet6   = netip.MustParseAddr("2001:db8:203::1")
	InternetHost6 = netip.MustParseAddr("2001:db8:203::100")
	PodCIDR6      = netip.MustParsePrefix("fd00:10:244::/48")
	// nodeAddr6Method is tabby-node's --bgp-address6 in the lab: both subnets' /64s.
	nodeAddr6Method = "cidr=2001:db8:100::/40"
)

// Prefix6 is the subnet's IPv6 range.
func (s Subnet) Prefix6() netip.Prefix { return [...]netip.Prefix{SubnetA6, SubnetB6}[s] }

// Gateway6 is the router's IPv6 address on the subnet.
func (s Subnet) Gateway6() netip.Addr { return [...]netip.Addr{RouterA6, RouterB6}[s] }

// hostAddr6 is host number host on the subnet's IPv6 range, written with the same digits as
// the IPv4 host number so that 198.51.100.12 and 2001:db8:100::12 are one node.
func (s Subnet) hostAddr6(host int) netip.Addr {
	n, err := strconv.ParseUint(strconv.Itoa(host), 16, 16)
	if err != nil {
		panic(fmt.Sprintf("host number %d: %v", host, err))
	}
	b := s.Prefix6().Addr().As16()
	b[14], b[15] = byte(n>>8), byte(n)
	return netip.AddrFrom16(b)
}
