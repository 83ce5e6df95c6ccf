// Package modeltest builds the model's messages for tests, as the syncer and the BGP agent send
// them, from the strings a test reads best ("10.244.1.0/26"). A malformed string panics: it is a
// bug in the test.
package modeltest

import (
	"fmt"
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

// VXLANBlocksPerNode is how many blocks each VXLANNode6 owns.
const VXLANBlocksPerNode = 12

// VXLANBlock6 is the k-th /122 of fd00:10:244::/48; node i owns blocks i×VXLANBlocksPerNode and
// the VXLANBlocksPerNode−1 after it. IPv6, whose space holds thousands of nodes' underlay
// addresses for the benchmarks of a VXLAN cluster at scale.
func VXLANBlock6(k int) netip.Prefix {
	b := netip.MustParseAddr("fd00:10:244::").As16()
	v := uint32(k) << 6
	b[12], b[13], b[14], b[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	return netip.PrefixFrom(netip.AddrFrom16(b), 122)
}

// VXLANNode6 is node i of such a cluster, named node-NNNN, its VTEP the first address of its first
// block; node -1 is the node under test, named local, its underlay 2001:db8:100::11/64 and its
// VTEP outside the others' blocks.
func VXLANNode6(i int, local string) model.Node {
	n := model.Node{Name: local}
	if i < 0 {
		n.BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix("2001:db8:100::11/64"))
		n.VXLANTunnelAddr.Set(ipfamily.IPv6, netip.MustParseAddr("fd00:10:244:ffff::"))
		n.VXLANMAC.Set(ipfamily.IPv6, model.MAC{0x66, 0x1f, 0, 0, 0xff, 0xff})
		return n
	}
	n.Name = fmt.Sprintf("node-%04d", i)
	under := netip.MustParseAddr("2001:db8:100::").As16()
	under[14], under[15] = byte((0x1000+i)>>8), byte(0x1000+i)
	n.BGPAddress.Set(ipfamily.IPv6, netip.PrefixFrom(netip.AddrFrom16(under), 64))
	n.VXLANTunnelAddr.Set(ipfamily.IPv6, VXLANBlock6(i*VXLANBlocksPerNode).Addr())
	n.VXLANMAC.Set(ipfamily.IPv6, model.MAC{0x66, 0x1f, 0, 0, byte(i >> 8), byte(i)})
	return n
}
