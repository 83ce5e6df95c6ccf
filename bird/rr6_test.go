package bird

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// TestRouteReflectorsIPv6: TestRouteReflectors with every node dual-stack: over the IPv4
// sessions (MP-BGP) the clients learn each other's IPv6 blocks through two reflectors of one
// cluster, with the originating node's IPv6 address kept as next hop and ORIGINATOR_ID and
// CLUSTER_LIST as for IPv4; a client that withdraws its IPv6 block has it withdrawn everywhere,
// its IPv4 block staying.
func TestRouteReflectorsIPv6(t *testing.T) {
	netnstest.Require(t)
	ids := []int{101, 102, 11, 12, 13}
	all := []Node{
		mkNode(101, rrLabel, "244.0.0.1"), mkNode(102, rrLabel, "244.0.0.1"),
		mkNode(11, nil, ""), mkNode(12, nil, ""), mkNode(13, nil, ""),
	}
	var routable []netip.Prefix
	for i, id := range ids {
		all[i].Address6 = netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", id))
		routable = append(routable, block6Of(id))
	}
	routable = append(routable, testBlocks...)
	var tns []*testNode
	for i, n := range all {
		cfg := func(c *Config) {}
		if n.Name == "node11" {
			cfg = func(c *Config) { c.GoBGPAPI = "127.0.0.1:50152" }
		}
		tns = append(tns, startNode(t, n, all, func(b *Bird) {
			b.SetBGPConfiguration(meshOff())
			b.SetBGPPeers(calicoRRPeers())
			b.SetPools([]netip.Prefix{pool, pool6})
			b.SetRoutable(routable)
			b.SetLocalPrefixes([]netip.Prefix{blockOf(ids[i]), block6Of(ids[i])})
		}, cfg))
	}
	clients := tns[2:]
	for i, a := range clients {
		for j, b := range clients {
			if i != j {
				a.routes.waitRoute(t, block6Of(ids[2+j]), b.Address6.Addr(), 15*time.Second)
				a.routes.waitRoute(t, b.block, b.Address.Addr(), 15*time.Second)
			}
		}
	}
	// The reflectors' own IPv6 blocks reach the clients too.
	clients[0].routes.waitRoute(t, block6Of(101), tns[0].Address6.Addr(), 5*time.Second)

	// Settled (see TestRouteReflectors): one path from each reflector, each carrying node12's
	// router ID as originator, the cluster ID, and node12's IPv6 address as next hop.
	n12 := clients[1]
	deadline := time.Now().Add(10 * time.Second)
	for {
		paths := gobgpPaths(t, "127.0.0.1:50152", block6Of(12))
		var bad []string
		for _, p := range paths {
			orig, clusters, nh := attrs(p)
			if orig != n12.Address.Addr().String() || fmt.Sprint(clusters) != "[244.0.0.1]" || nh != n12.Address6.Addr().String() {
				bad = append(bad, fmt.Sprintf("reflected path from %s: originator %q cluster list %v next hop %q", p.NeighborIp, orig, clusters, nh))
			}
		}
		if len(paths) == 2 && len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node11's paths for node12's IPv6 block after 10s: %d paths, %v; want one from each reflector, originator %s, next hop %s, cluster list [244.0.0.1]",
				len(paths), bad, n12.Address.Addr(), n12.Address6.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// node12 withdraws its IPv6 block: gone from every client and reflector; IPv4 stays.
	n12.bird.SetLocalPrefixes([]netip.Prefix{n12.block})
	for _, tn := range []*testNode{tns[0], tns[1], clients[0], clients[2]} {
		tn.routes.waitGone(t, block6Of(12), 10*time.Second)
		if nh, ok := tn.routes.get(n12.block); !ok || nh != n12.Address.Addr() {
			t.Errorf("%s: node12's IPv4 block after its IPv6 withdrawal: %v %v", tn.Name, nh, ok)
		}
	}
}
