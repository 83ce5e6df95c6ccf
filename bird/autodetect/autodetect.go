// Package autodetect finds the node's BGP IPv4 address, the way Calico's IP_AUTODETECTION_METHOD
// does. The result keeps the prefix length of the interface (198.51.100.11/24): it tells felix
// which other nodes share the subnet. tabby-node records it in the Node annotation
// tabby.dev/bgp-ipv4-address.
package autodetect

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/tabbynet/tabby/internal/nlretry"
)

// Method kinds.
const (
	KubernetesInternalIP = "kubernetes-internal-ip" // the default
	CIDR                 = "cidr"
	Interface            = "interface"
	CanReach             = "can-reach"
)

// Method is a parsed detection method.
type Method struct {
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

// Parse parses "", "kubernetes-internal-ip", "cidr=CIDR[,CIDR...]", "interface=REGEX" or
// "can-reach=IP".
func Parse(s string) (Method, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == KubernetesInternalIP {
		return Method{Kind: KubernetesInternalIP, raw: s}, nil
	}
	kind, arg, ok := strings.Cut(s, "=")
	if !ok || arg == "" {
		return Method{}, fmt.Errorf("address detection method %q: want kubernetes-internal-ip, cidr=CIDR, interface=REGEX or can-reach=IP", s)
	}
	m := Method{Kind: kind, raw: s}
	switch kind {
	case CIDR:
		for _, c := range strings.Split(arg, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil || !p.Addr().Is4() {
				return Method{}, fmt.Errorf("address detection method %q: %q is not an IPv4 CIDR", s, c)
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
		if err != nil || !a.Is4() {
			return Method{}, fmt.Errorf("address detection method %q: %q is not an IPv4 address", s, arg)
		}
		m.Target = a
	default:
		return Method{}, fmt.Errorf("address detection method %q: unknown kind %q (want kubernetes-internal-ip, cidr, interface or can-reach)", s, kind)
	}
	return m, nil
}

// candidate is an IPv4 address of an interface.
type candidate struct {
	iface  string
	prefix netip.Prefix
}

func (c candidate) String() string { return c.prefix.String() + " on " + c.iface }

// candidates lists the usable IPv4 addresses of this network namespace: global unicast, not on
// loopback.
func candidates() ([]candidate, error) {
	links, err := nlretry.Dump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []candidate
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := nlretry.Dump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_V4) })
		if err != nil {
			return nil, fmt.Errorf("list addresses of %s: %w", l.Attrs().Name, err)
		}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP.To4())
			if !ok || !ip.IsGlobalUnicast() {
				continue
			}
			ones, _ := a.Mask.Size()
			out = append(out, candidate{iface: l.Attrs().Name, prefix: netip.PrefixFrom(ip, ones)})
		}
	}
	return out, nil
}

// Detect returns the node's BGP address with its prefix length. nodeIP is the Kubernetes Node's
// InternalIP, used by the default method.
func Detect(m Method, nodeIP netip.Addr) (netip.Prefix, error) {
	all, err := candidates()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("detect BGP address (%s): %w", m, err)
	}
	var match func(candidate) bool
	switch m.Kind {
	case KubernetesInternalIP:
		if !nodeIP.IsValid() {
			return netip.Prefix{}, fmt.Errorf("detect BGP address (%s): the Node has no InternalIP", m)
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
			return netip.Prefix{}, fmt.Errorf("detect BGP address (%s): no route to %s: %v", m, m.Target, err)
		}
		src, ok := netip.AddrFromSlice(routes[0].Src.To4())
		if !ok {
			return netip.Prefix{}, fmt.Errorf("detect BGP address (%s): the route to %s has no source address", m, m.Target)
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
		return netip.Prefix{}, fmt.Errorf("detect BGP address (%s): no interface address matches; candidates: %s", m, list(all))
	default:
		return netip.Prefix{}, fmt.Errorf("detect BGP address (%s): ambiguous, %d addresses match: %s", m, len(found), list(found))
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
