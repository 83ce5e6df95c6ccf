package node

import (
	"fmt"
	"net"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/bird/autodetect"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// detectAddress finds this node's BGP address of the method's family (with its prefix length) and
// the interface that holds it: felix's uplink for that family. An IPv6 method of none, or the
// default one on a Node without an IPv6 InternalIP, finds nothing and is not an error: the node
// has no IPv6.
func detectAddress(fam ipfamily.Family, method string, n *corev1.Node) (netip.Prefix, string, error) {
	m, err := autodetect.ParseFamily(fam, method)
	if err != nil {
		return netip.Prefix{}, "", err
	}
	// Only the InternalIP is read: an invalid tabby annotation is the syncer's to report.
	node, _ := validation.ParseNode(n)
	internalIP := node.InternalIP.Get(fam)
	if fam == ipfamily.IPv6 && m.Kind == autodetect.KubernetesInternalIP && !internalIP.IsValid() {
		return netip.Prefix{}, "", nil
	}
	addr, err := autodetect.Detect(m, internalIP)
	if err != nil || !addr.IsValid() {
		return netip.Prefix{}, "", err
	}
	iface, err := interfaceOf(addr.Addr())
	if err != nil {
		return netip.Prefix{}, "", err
	}
	return addr, iface, nil
}

func interfaceOf(ip netip.Addr) (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if got, ok := netip.AddrFromSlice(ipn.IP); ok && got.Unmap() == ip {
					return ifc.Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no interface holds the BGP address %s", ip)
}

func methodName(method string) string {
	if method == "" {
		return autodetect.KubernetesInternalIP
	}
	return method
}
