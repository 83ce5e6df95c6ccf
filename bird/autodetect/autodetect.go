// Package autodetect finds the node's BGP address of one family, the way Calico's
// IP_AUTODETECTION_METHOD and IP6_AUTODETECTION_METHOD do. The result keeps the prefix length of
// the interface (198.51.100.11/24, 2001:db8:100::11/64): it tells felix which other nodes share
// the subnet. tabby-node records it in the Node annotations tabby.dev/bgp-ipv4-address and
// tabby.dev/bgp-ipv6-address.
package autodetect

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/internal/nlretry"
)

// Method kinds.
const (
	KubernetesInternalIP = "kubernetes-internal-ip" // the default
	CIDR                 = "cidr"
	Interface            = "interface"
	CanReach             = "can-reach"
	// None: the node has no address of the family. A node needs one of the two: tabby-node
	// refuses none for both.
	None = "none"
)

// Method is a parsed detection method.
type Method struct {
	Family ipfamily.Family
	Kind   string
	CIDRs  []netip.Prefix // cidr=
	Iface  *regexp.Regexp // interface=
	Target netip.Addr     // can-reach=
	raw    string
}

func (m Method) String() string {
	if m.raw == "" {
		return KubernetesInternalIP
	}
	return m.raw
}

// Parse parses an IPv4 method: "", "kubernetes-internal-ip", "cidr=CIDR[,CIDR...]",
// "interface=REGEX" or "can-reach=IP".
func Parse(s string) (Method, error) { return ParseFamily(ipfamily.IPv4, s) }

// ParseFamily parses a method for the family's address.
func ParseFamily(fam ipfamily.Family, s string) (Method, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == KubernetesInternalIP {
		return Method{Family: fam, Kind: KubernetesInternalIP, raw: s}, nil
	}
	if s == None {
		return Method{Family: fam, Kind: None, raw: s}, nil
	}
	kind, arg, ok := strings.Cut(s, "=")
	if !ok || arg == "" {
		return Method{}, fmt.Errorf("address detection method %q: want kubernetes-internal-ip, cidr=CIDR, interface=REGEX or can-reach=IP", s)
	}
	m := Method{Family: fam, Kind: kind, raw: s}
	switch kind {
	case CIDR:
		for _, c := range strings.Split(arg, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil || ipfamily.OfPrefix(p) != fam || p.Addr().Is4In6() {
				return Method{}, fmt.Errorf("address detection method %q: %q is not an %s CIDR", s, c, fam)
			}
			m.CIDRs = append(m.CIDRs, p.Masked())
		}
	case Interface:
		re, err := regexp.Compile(arg)
		if err != nil {
			return Method{}, fmt.Errorf("address detection method %q: %w", s, err)
		}
		m.Iface = re
	case CanReach:
		a, err := netip.ParseAddr(arg)
		if err != nil || ipfamily.OfAddr(a) != fam || a.Is4In6() {
			return Method{}, fmt.Errorf("address detection method %q: %q is not an %s address", s, arg, fam)
		}
		m.Target = a
	default:
		return Method{}, fmt.Errorf("address detection method %q: unknown kind %q (want kubernetes-internal-ip, cidr, interface or can-reach)", s, kind)
	}
	return m, nil
}

// candidate is an address of an interface.
type candidate struct {
	iface  string
	prefix netip.Prefix
}

func (c candidate) String() string { return c.prefix.String() + " on " + c.iface }

// candidates lists the family's usable addresses of this network namespace: global unicast (never
// a link-local), not on loopback, and for IPv6 neither tentative nor deprecated.
func candidates(fam ipfamily.Family) ([]candidate, error) {
	nlFamily := netlink.FAMILY_V4
	if fam == ipfamily.IPv6 {
		nlFamily = netlink.FAMILY_V6
	}
	links, err := nlretry.Dump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []candidate
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := nlretry.Dump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, nlFamily) })
		if err != nil {
			return nil, fmt.Errorf("list addresses of %s: %w", l.Attrs().Name, err)
		}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ipfamily.OfAddr(ip) != fam || !ip.IsGlobalUnicast() || a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED|unix.IFA_F_DEPRECATED) != 0 {
				continue
			}
			ones, _ := a.Mask.Size()
			out = append(out, candidate{iface: l.Attrs().Name, prefix: netip.PrefixFrom(ip, ones)})
		}
	}
	return out, nil
}

// Detect returns the node's BGP address of m's family with its prefix length. nodeIP is the
// Kubernetes Node's InternalIP of that family, used by the default method. Method none returns
// the invalid prefix.
func Detect(m Method, nodeIP netip.Addr) (netip.Prefix, error) {
	if m.Family == ipfamily.Unknown {
		m.Family = ipfamily.IPv4
	}
	if m.Kind == None {
		return netip.Prefix{}, nil
	}
	all, err := candidates(m.Family)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("detect BGP %s address (%s): %w", m.Family, m, err)
	}
	var match func(candidate) bool
	switch m.Kind {
	case KubernetesInternalIP:
		if !nodeIP.IsValid() {
			return netip.Prefix{}, fmt.Errorf("detect BGP %s address (%s): the Node has no %s InternalIP", m.Family, m, m.Family)
		}
		match = func(c candidate) bool { return c.prefix.Addr() == nodeIP }
	case CIDR:
		match = func(c candidate) bool {
			return slices.ContainsFunc(m.CIDRs, func(p netip.Prefix) bool { return p.Contains(c.prefix.Addr()) })
		}
	case Interface:
		match = func(c candidate) bool { return m.Iface.MatchString(c.iface) }
	case CanReach:
		routes, err := netlink.RouteGet(m.Target.AsSlice())
		if err != nil || len(routes) == 0 {
			return netip.Prefix{}, fmt.Errorf("detect BGP %s address (%s): no route to %s: %v", m.Family, m, m.Target, err)
		}
		src, ok := netip.AddrFromSlice(routes[0].Src)
		if src = src.Unmap(); !ok || ipfamily.OfAddr(src) != m.Family {
			return netip.Prefix{}, fmt.Errorf("detect BGP %s address (%s): the route to %s has no source address", m.Family, m, m.Target)
		}
		match = func(c candidate) bool { return c.prefix.Addr() == src }
	default:
		return netip.Prefix{}, fmt.Errorf("detect BGP address: unknown method %q", m)
	}
	var found []candidate
	for _, c := range all {
		if match(c) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0].prefix, nil
	case 0:
		return netip.Prefix{}, fmt.Errorf("detect BGP %s address (%s): no interface address matches; candidates: %s", m.Family, m, list(all))
	default:
		return netip.Prefix{}, fmt.Errorf("detect BGP %s address (%s): ambiguous, %d addresses match: %s", m.Family, m, len(found), list(found))
	}
}

func list(cs []candidate) string {
	if len(cs) == 0 {
		return "none"
	}
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}
