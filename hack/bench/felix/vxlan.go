package main

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/model/modeltest"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The VXLAN full sync: 1,000 other nodes, each a VTEP (a neighbour and an FDB entry on
// vxlan-v6.tabby) with 12 blocks behind it, 12,000 routes via the VTEPs. IPv6, whose address
// space holds that many nodes' underlay addresses.
const vxlanVTEPs, vxlanBlocksPerVTEP = 1000, modeltest.VXLANBlocksPerNode

var vxlanBlock = modeltest.VXLANBlock6

// vxlanNode is node i; node -1 is this one, its underlay on up0 (as newNS makes it).
func vxlanNode(i int) model.Node { return modeltest.VXLANNode6(i, "bench") }

// vxlanScripts are what `ip -batch` and `bridge -batch` are given to make what felix makes.
func vxlanScripts() (ip, bridge string) {
	var sb, fdb strings.Builder
	local := vxlanNode(-1)
	fmt.Fprintf(&sb, "link add vxlan-v6.tabby address %s mtu 1430 type vxlan id %d dstport %d local %s nolearning\n",
		local.VXLANMAC.Get(ipfamily.IPv6), v1.DefaultVXLANVNI, v1.DefaultVXLANPort, local.BGPAddress.Get(ipfamily.IPv6).Addr())
	sb.WriteString("link set vxlan-v6.tabby up\n")
	fmt.Fprintf(&sb, "addr add %s/128 dev vxlan-v6.tabby nodad\n", local.VXLANTunnelAddr.Get(ipfamily.IPv6))
	for i := 0; i < vxlanVTEPs; i++ {
		n := vxlanNode(i)
		vtep, mac := n.VXLANTunnelAddr.Get(ipfamily.IPv6), n.VXLANMAC.Get(ipfamily.IPv6)
		fmt.Fprintf(&sb, "neigh replace %s lladdr %s dev vxlan-v6.tabby nud permanent\n", vtep, mac)
		fmt.Fprintf(&fdb, "fdb replace %s dev vxlan-v6.tabby dst %s self permanent\n", mac, n.BGPAddress.Get(ipfamily.IPv6).Addr())
		for j := 0; j < vxlanBlocksPerVTEP; j++ {
			fmt.Fprintf(&sb, "route replace %s via %s dev vxlan-v6.tabby onlink proto %d\n", vxlanBlock(i*vxlanBlocksPerVTEP+j), vtep, v1.RouteProtocol)
		}
	}
	return sb.String(), fdb.String()
}

func vxlanMessages() []any {
	msgs := []any{
		model.NodeUpdate{Node: vxlanNode(-1)},
		model.PoolUpdate{Pool: model.Pool{Name: "vx6", CIDR: netip.MustParsePrefix("fd00:10:244::/48"), IPIPMode: v1.IPIPModeNever, VXLANMode: v1.VXLANModeAlways}},
	}
	for i := 0; i < vxlanVTEPs; i++ {
		n := vxlanNode(i)
		msgs = append(msgs, model.NodeUpdate{Node: n})
		for j := 0; j < vxlanBlocksPerVTEP; j++ {
			msgs = append(msgs, model.BlockUpdate{Block: model.Block{CIDR: vxlanBlock(i*vxlanBlocksPerVTEP + j), Node: n.Name}})
		}
	}
	return append(msgs, model.InSync{})
}

// vxlanFullSync times `ip -batch` plus `bridge -batch` and a fresh felix's first apply making
// the same device, neighbours, FDB entries and routes, each in its own namespace, rounds times.
func vxlanFullSync(ctx context.Context) (ipTimes, felixTimes []time.Duration, err error) {
	ipScript, fdbScript := vxlanScripts()
	msgs := vxlanMessages()
	for _, tabby := range []bool{false, true} {
		b, err := newNSWith(0)
		if err != nil {
			return nil, nil, err
		}
		defer b.close()
		for r := 0; r < rounds; r++ {
			if r > 0 { // the device takes its routes, neighbours and FDB entries with it
				if out, err := exec.Command("ip", "-n", b.name(), "link", "del", "vxlan-v6.tabby").CombinedOutput(); err != nil {
					return nil, nil, fmt.Errorf("delete vxlan-v6.tabby: %v: %s", err, out)
				}
			}
			d, err := vxlanSyncOnce(ctx, b, tabby, msgs, ipScript, fdbScript)
			if err != nil {
				return nil, nil, err
			}
			if tabby {
				felixTimes = append(felixTimes, d)
			} else {
				ipTimes = append(ipTimes, d)
			}
		}
		if n, fdb := b.count(), b.fdbCount(); n != vxlanVTEPs*vxlanBlocksPerVTEP || fdb != vxlanVTEPs {
			return nil, nil, fmt.Errorf("tabby %v made %d routes and %d FDB entries, want %d and %d", tabby, n, fdb, vxlanVTEPs*vxlanBlocksPerVTEP, vxlanVTEPs)
		}
	}
	return ipTimes, felixTimes, nil
}

func vxlanSyncOnce(ctx context.Context, b *benchNS, tabby bool, msgs []any, ipScript, fdbScript string) (time.Duration, error) {
	if !tabby {
		start := time.Now()
		for _, c := range []struct{ tool, script string }{{"ip", ipScript}, {"bridge", fdbScript}} {
			cmd := exec.CommandContext(ctx, c.tool, "-n", b.name(), "-batch", "-")
			cmd.Stdin = strings.NewReader(c.script)
			if out, err := cmd.CombinedOutput(); err != nil {
				return 0, fmt.Errorf("%s -batch: %v: %s", c.tool, err, out)
			}
		}
		return time.Since(start), nil
	}
	f, err := felix.New(felix.Config{NodeName: "bench", UplinkInterface: ipfamily.PairOf("up0", "up0"), NetNSPath: b.Path(), ResyncInterval: time.Hour})
	if err != nil {
		return 0, err
	}
	defer f.Close()
	f.OnUpdates(msgs)
	start := time.Now()
	if err := f.ApplyNow(ctx); err != nil {
		return 0, fmt.Errorf("felix VXLAN full sync: %w", err)
	}
	return time.Since(start), nil
}

func (b *benchNS) fdbCount() int {
	out, _ := exec.Command("bridge", "-n", b.name(), "fdb", "show", "dev", "vxlan-v6.tabby").Output()
	return strings.Count(string(out), "permanent")
}
