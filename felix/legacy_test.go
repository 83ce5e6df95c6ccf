package felix

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// The deprecated setters send what changed since the last call, as the model's messages, and
// nothing (no wake, no pass) when nothing did.
func TestLegacySettersSendChanges(t *testing.T) {
	f, _, _, _ := newFakeFelix(t)
	took := func(what string, want ...string) {
		t.Helper()
		var got []string
		for _, m := range f.updates.take() {
			if u, ok := m.(model.NodeUpdate); ok {
				m = fmt.Sprintf("%s %v %s", u.Node.Name, u.Node.BGPAddress, u.Node.IPIPTunnelAddr)
			}
			got = append(got, fmt.Sprintf("%T %v", m, m))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: sent\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	a, b, c := netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("10.244.0.6"), netip.MustParseAddr("fd00:10:244::5")

	f.SetLocalNode(netip.MustParsePrefix("198.51.100.11/24"), a)
	f.SetLocalNode6(netip.MustParsePrefix("2001:db8:100::11/64"))
	f.SetLocalNode(netip.MustParsePrefix("198.51.100.11/24"), a)
	took("node", "string n1 [198.51.100.11/24 invalid Prefix] 10.244.0.5", "string n1 [198.51.100.11/24 2001:db8:100::11/64] 10.244.0.5")

	p1 := Pool{Name: "p1", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever}
	p2 := Pool{Name: "p2", CIDR: netip.MustParsePrefix("fd00:10:244::/48"), IPIPMode: v1.IPIPModeNever}
	f.SetPools([]Pool{p1, p2})
	took("pools", fmt.Sprintf("model.PoolUpdate %v", model.PoolUpdate{Pool: p1}), fmt.Sprintf("model.PoolUpdate %v", model.PoolUpdate{Pool: p2}))
	f.SetPools([]Pool{p2, p1})
	took("same pools")
	p1.NATOutgoing = true
	f.SetPools([]Pool{p1})
	took("one changed, one gone", fmt.Sprintf("model.PoolUpdate %v", model.PoolUpdate{Pool: p1}), "model.PoolRemove {p2}")

	f.SetLocalBlocks([]netip.Prefix{netip.MustParsePrefix("10.244.0.0/26"), netip.MustParsePrefix("10.244.0.64/26")})
	f.SetLocalBlocks([]netip.Prefix{netip.MustParsePrefix("10.244.0.64/26"), netip.MustParsePrefix("10.244.0.128/26")})
	took("blocks", "model.BlockUpdate {{10.244.0.0/26 n1 []}}", "model.BlockUpdate {{10.244.0.64/26 n1 []}}",
		"model.BlockUpdate {{10.244.0.128/26 n1 []}}", "model.BlockRemove {10.244.0.0/26}")

	f.SetWorkloads([]Workload{{IP: c, Interface: "cali1"}, {IP: a, Interface: "cali1"}, {IP: b, Interface: "cali2"}, {IP: b, Interface: "cali2"}})
	took("workloads", "model.WorkloadUpdate {{/ cali1 [10.244.0.5 fd00:10:244::5]}}", "model.WorkloadUpdate {{/ cali2 [10.244.0.6]}}")
	f.SetWorkloads([]Workload{{IP: b, Interface: "cali2"}, {IP: a, Interface: "cali1"}, {IP: c, Interface: "cali1"}})
	took("same workloads")
	f.SetWorkloads([]Workload{{IP: a, Interface: "cali1"}, {IP: c, Interface: "cali1"}, {IP: b, Interface: "cali3"}})
	took("a pod on another veth", "model.WorkloadRemove {cali2}", "model.WorkloadUpdate {{/ cali3 [10.244.0.6]}}")
	f.SetWorkloads([]Workload{{IP: a, Interface: "cali1"}, {IP: b, Interface: "cali3"}})
	took("an address gone", "model.WorkloadUpdate {{/ cali1 [10.244.0.5]}}")

	f.UpsertBGPRoute(BGPRoute{Prefix: netip.MustParsePrefix("10.244.1.0/26"), NextHop: netip.MustParseAddr("198.51.100.12")})
	f.DeleteBGPRoute(netip.MustParsePrefix("10.244.1.0/26"))
	f.SetInSync()
	took("routes and in sync", "model.RouteUpdate {10.244.1.0/26 198.51.100.12}", "model.RouteRemove {10.244.1.0/26}", "model.InSync {}")
}
