// Package modeltest builds the model's messages for tests, as the syncer and the BGP agent send
// them, from the strings a test reads best ("10.244.1.0/26"). A malformed string panics: it is a
// bug in the test.
package modeltest

import (
	"net/netip"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Node is name's NodeUpdate with its BGP addresses and IPIP tunnel address ("" for none).
func Node(name, bgp4, bgp6, tunnel string) model.NodeUpdate {
	n := model.Node{Name: name}
	if bgp4 != "" {
		n.BGPAddress.Set(ipfamily.IPv4, netip.MustParsePrefix(bgp4))
	}
	if bgp6 != "" {
		n.BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix(bgp6))
	}
	if tunnel != "" {
		n.IPIPTunnelAddr = netip.MustParseAddr(tunnel)
	}
	return model.NodeUpdate{Node: n}
}

// Pool is a PoolUpdate; mode "" is Never.
func Pool(name, cidr string, mode v1.IPIPMode, natOutgoing bool) model.PoolUpdate {
	if mode == "" {
		mode = v1.IPIPModeNever
	}
	return model.PoolUpdate{Pool: model.Pool{Name: name, CIDR: netip.MustParsePrefix(cidr), IPIPMode: mode, NATOutgoing: natOutgoing}}
}

// Block is a BlockUpdate of a block affine to node.
func Block(cidr, node string) model.BlockUpdate {
	return model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix(cidr), Node: node}}
}

// Workload is a WorkloadUpdate of the pod default/pod-IFACE behind iface.
func Workload(iface string, ips ...string) model.WorkloadUpdate {
	w := model.Workload{Pod: model.PodKey{Namespace: "default", Name: "pod-" + iface}, Interface: iface}
	for _, ip := range ips {
		w.IPs = append(w.IPs, netip.MustParseAddr(ip))
	}
	return model.WorkloadUpdate{Workload: w}
}

// Learned is a RouteUpdate: the BGP agent's best path to prefix.
func Learned(prefix, nextHop string) model.RouteUpdate {
	return model.RouteUpdate{Prefix: netip.MustParsePrefix(prefix), NextHop: netip.MustParseAddr(nextHop)}
}

// Withdrawn is a RouteRemove.
func Withdrawn(prefix string) model.RouteRemove {
	return model.RouteRemove{Prefix: netip.MustParsePrefix(prefix)}
}
