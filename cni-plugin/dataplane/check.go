package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/tabbynet/tabby/internal/ipfamily"

	"github.com/vishvananda/netlink"

	"github.com/tabbynet/tabby/internal/nlretry"
)

// Check verifies an attachment and names every part that is missing or wrong, in one error.
func Check(a Attachment) error {
	ch, err := openNetns(a.Netns)
	if err != nil {
		return err
	}
	defer ch.Close()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	cl, err := ch.LinkByName(a.IfName)
	if err != nil {
		bad("container interface %s not found in %s", a.IfName, a.Netns)
	} else {
		if _, ok := cl.(*netlink.Veth); !ok {
			bad("container interface %s is a %s, not a veth", a.IfName, cl.Type())
		}
		if cl.Attrs().RawFlags&1 == 0 { // IFF_UP
			bad("container interface %s is down", a.IfName)
		}
		addrs, err := nlretry.Dump(func() ([]netlink.Addr, error) { return ch.AddrList(cl, netlink.FAMILY_ALL) })
		if err != nil {
			return fmt.Errorf("list addresses of %s in container: %w", a.IfName, err)
		}
		for _, ip := range a.IPs {
			if !hasAddr(addrs, ip) {
				bad("address %s missing on container interface %s", hostNet(ip), a.IfName)
			}
		}
		routes, err := nlretry.Dump(func() ([]netlink.Route, error) { return ch.RouteList(cl, netlink.FAMILY_ALL) })
		if err != nil {
			return fmt.Errorf("list routes in container: %w", err)
		}
		gateways := map[netip.Addr]bool{}
		for _, ip := range a.IPs {
			gateways[GatewayFor(ip)] = true
		}
		if gw4 := Gateways.Get(ipfamily.IPv4); gateways[gw4] && !hasRoute(routes, func(r netlink.Route) bool {
			return isHostDst(r, gw4) && r.Scope == netlink.SCOPE_LINK
		}) {
			bad("container route %s dev %s scope link missing", gw4, a.IfName)
		}
		for gw := range gateways {
			if !hasRoute(routes, func(r netlink.Route) bool {
				return (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw != nil && r.Gw.Equal(gw.AsSlice())
			}) {
				bad("container route default via %s missing", gw)
			}
		}
	}

	hl, err := netlink.LinkByName(a.HostVeth)
	if err != nil {
		bad("host veth %s not found", a.HostVeth)
	} else {
		if _, ok := hl.(*netlink.Veth); !ok {
			bad("host interface %s is a %s, not a veth", a.HostVeth, hl.Type())
		}
		if hl.Attrs().RawFlags&1 == 0 {
			bad("host veth %s is down", a.HostVeth)
		}
		if !bytes.Equal(hl.Attrs().HardwareAddr, HostVethMAC) {
			bad("host veth %s has MAC %s, want %s", a.HostVeth, hl.Attrs().HardwareAddr, HostVethMAC)
		}
		if cl != nil && cl.Attrs().ParentIndex != hl.Attrs().Index {
			bad("host veth %s is not the peer of container interface %s", a.HostVeth, a.IfName)
		}
		for _, s := range []string{"/proc/sys/net/ipv4/conf/" + a.HostVeth + "/proxy_arp", "/proc/sys/net/ipv4/conf/" + a.HostVeth + "/forwarding"} {
			if v, err := os.ReadFile(s); err != nil || strings.TrimSpace(string(v)) != "1" {
				bad("sysctl %s is not 1", s)
			}
		}
		routes, err := nlretry.Dump(func() ([]netlink.Route, error) { return netlink.RouteList(hl, netlink.FAMILY_ALL) })
		if err != nil {
			return fmt.Errorf("list host routes of %s: %w", a.HostVeth, err)
		}
		for _, ip := range a.IPs {
			if !hasRoute(routes, func(r netlink.Route) bool { return isHostDst(r, ip) }) {
				bad("host route %s dev %s missing", hostNet(ip), a.HostVeth)
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func hasAddr(addrs []netlink.Addr, ip netip.Addr) bool {
	for _, a := range addrs {
		got, ok := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if ok && got.Unmap() == ip.Unmap() && ones == ip.BitLen() {
			return true
		}
	}
	return false
}

func hasRoute(routes []netlink.Route, match func(netlink.Route) bool) bool {
	for _, r := range routes {
		if match(r) {
			return true
		}
	}
	return false
}

func isHostDst(r netlink.Route, ip netip.Addr) bool {
	if r.Dst == nil {
		return false
	}
	ones, _ := r.Dst.Mask.Size()
	got, ok := netip.AddrFromSlice(r.Dst.IP)
	return ok && got.Unmap() == ip.Unmap() && ones == ip.BitLen()
}
