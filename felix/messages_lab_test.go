package felix_test

import (
	"net/netip"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The messages the namespace tests send felix for its node, node-a, as the node's syncer and
// BGP speaker will.

const nodeName = "node-a"

// thisNode is node-a's NodeUpdate: its BGP addresses ("" for none) and tunnel address.
func thisNode(bgp4, bgp6, tunnel string) model.NodeUpdate {
	n := model.Node{Name: nodeName}
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

func pool(name, cidr string, mode v1.IPIPMode, natOutgoing bool) model.PoolUpdate {
	if mode == "" {
		mode = v1.IPIPModeNever
	}
	return model.PoolUpdate{Pool: model.Pool{Name: name, CIDR: netip.MustParsePrefix(cidr), IPIPMode: mode, NATOutgoing: natOutgoing}}
}

func localBlock(cidr string) model.BlockUpdate {
	return model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix(cidr), Node: nodeName}}
}

func workload(iface string, ips ...string) model.WorkloadUpdate {
	w := model.Workload{Pod: model.PodKey{Namespace: "default", Name: "pod-" + iface}, Interface: iface}
	for _, ip := range ips {
		w.IPs = append(w.IPs, netip.MustParseAddr(ip))
	}
	return model.WorkloadUpdate{Workload: w}
}

func learned(prefix, nextHop string) model.RouteUpdate {
	return model.RouteUpdate{Prefix: netip.MustParsePrefix(prefix), NextHop: netip.MustParseAddr(nextHop)}
}

func withdrawn(prefix string) model.RouteRemove {
	return model.RouteRemove{Prefix: netip.MustParsePrefix(prefix)}
}

func send(f *felix.Felix, msgs ...any) {
	for _, m := range msgs {
		f.OnUpdate(m)
	}
}
