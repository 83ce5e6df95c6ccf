package vxlanview

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// world: a, b and c on 2001:db8:1::/64 and 198.51.100.0/24 (c on 203.0.113.0/24); an IPv4
// VXLAN pool (Always), an IPv6 one (CrossSubnet) and a native pool. c has no IPv4 MAC yet.
func world() ([]model.Node, []model.Pool, []model.Block) {
	node := func(name, v4, v6, vtep4, vtep6 string, mac bool) model.Node {
		n := model.Node{Name: name, BGPAddress: ipfamily.PairOf(pfx(v4), pfx(v6))}
		n.VXLANTunnelAddr = ipfamily.PairOf(netip.MustParseAddr(vtep4), netip.MustParseAddr(vtep6))
		n.VXLANMAC.Set(ipfamily.IPv6, model.MAC{0x66, 0, 0, 0, 6, name[0]})
		if mac {
			n.VXLANMAC.Set(ipfamily.IPv4, model.MAC{0x66, 0, 0, 0, 4, name[0]})
		}
		return n
	}
	nodes := []model.Node{
		node("a", "198.51.100.1/24", "2001:db8:1::1/64", "10.244.0.1", "fd00:10:244::1", true),
		node("b", "198.51.100.2/24", "2001:db8:1::2/64", "10.244.0.65", "fd00:10:244::41", true),
		node("c", "203.0.113.3/24", "2001:db8:2::3/64", "10.244.0.129", "fd00:10:244::81", false),
	}
	pools := []model.Pool{
		{Name: "vx4", CIDR: pfx("10.244.0.0/16"), BlockSize: 26, IPIPMode: v1.IPIPModeNever, VXLANMode: v1.VXLANModeAlways},
		{Name: "vx6", CIDR: pfx("fd00:10:244::/48"), BlockSize: 122, IPIPMode: v1.IPIPModeNever, VXLANMode: v1.VXLANModeCrossSubnet},
		{Name: "native", CIDR: pfx("10.245.0.0/16"), BlockSize: 26, IPIPMode: v1.IPIPModeNever, VXLANMode: v1.VXLANModeNever},
	}
	blocks := []model.Block{
		{CIDR: pfx("10.244.0.0/26"), Node: "a"},
		{CIDR: pfx("10.244.0.64/26"), Node: "b", Borrowed: []model.Borrowed{{Addr: netip.MustParseAddr("10.244.0.70"), Node: "c"}}},
		{CIDR: pfx("10.244.0.128/26"), Node: "c"},
		{CIDR: pfx("fd00:10:244::40/122"), Node: "b"},
		{CIDR: pfx("fd00:10:244::80/122"), Node: "c"},
		{CIDR: pfx("10.245.0.0/26"), Node: "b"}, // native: no VXLAN route
		{CIDR: pfx("10.244.1.0/26")},            // no affinity: no route
	}
	return nodes, pools, blocks
}

func TestComputeCluster(t *testing.T) {
	nodes, pools, blocks := world()
	v := Compute(nodes, pools, blocks, "")
	if len(v.Families) != 2 || v.Families[0].Device != "vxlan.tabby" || v.Families[1].Device != "vxlan-v6.tabby" {
		t.Fatalf("families %+v", v.Families)
	}
	v4 := v.Families[0].Peers
	if len(v4) != 3 || v4[1].Node != "b" || v4[1].VTEP != netip.MustParseAddr("10.244.0.65") || v4[1].MAC != "66:00:00:00:04:62" ||
		v4[1].Underlay != netip.MustParseAddr("198.51.100.2") || prefixes(v4[1].Blocks) != "10.244.0.64/26" || len(v4[1].Missing) != 0 {
		t.Fatalf("b over IPv4: %+v", v4)
	}
	// c's borrowed address goes through c's VTEP; its MAC is missing.
	if c := v4[2]; prefixes(c.Blocks) != "10.244.0.70/32,10.244.0.128/26" || len(c.Missing) != 1 || !strings.Contains(c.Missing[0], v1.AnnotationVXLANIPv4MAC) {
		t.Fatalf("c over IPv4: %+v", c)
	}
	// Without a viewer, CrossSubnet blocks are all listed as VXLAN's.
	if v6 := v.Families[1].Peers; len(v6) != 3 || prefixes(v6[1].Blocks) != "fd00:10:244::40/122" || len(v6[1].Native) != 0 {
		t.Fatalf("IPv6: %+v", v6)
	}
}

// From a: its own row goes, and b's IPv6 block of the CrossSubnet pool is native (b is on a's
// subnet), c's is not.
func TestComputeFromANode(t *testing.T) {
	nodes, pools, blocks := world()
	v := Compute(nodes, pools, blocks, "a")
	for _, f := range v.Families {
		if len(f.Peers) != 2 || f.Peers[0].Node != "b" || f.Peers[1].Node != "c" {
			t.Fatalf("%s peers from a: %+v", f.Family, f.Peers)
		}
	}
	v6 := v.Families[1].Peers
	if len(v6[0].Blocks) != 0 || prefixes(v6[0].Native) != "fd00:10:244::40/122" || prefixes(v6[1].Blocks) != "fd00:10:244::80/122" || len(v6[1].Native) != 0 {
		t.Fatalf("CrossSubnet from a: %+v", v6)
	}
	var out bytes.Buffer
	if err := Print(&out, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"IPv4 VXLAN (vxlan.tabby) as node a programs it",
		"NODE   VTEP",
		"IPv6 VXLAN (vxlan-v6.tabby) as node a programs it",
		"no MAC (tabby.dev/vxlan-ipv4-mac)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if lines := strings.Split(out.String(), "\n"); !strings.HasPrefix(lines[2], "b ") || !strings.Contains(lines[2], "10.244.0.65") || !strings.Contains(lines[2], "198.51.100.2") {
		t.Errorf("b's row: %q", lines[2])
	}
	if err := Print(&out, View{}); err != nil || !strings.Contains(out.String(), "No VXLAN pool") {
		t.Errorf("no VXLAN pool: %v %q", err, out.String())
	}
}
