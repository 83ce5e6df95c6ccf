package bird

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// TestRouteReflectorsIPv6: TestRouteReflectors with every node dual-stack: over the IPv4
// sessions (MP-BGP) the clients learn each other's IPv6 blocks through two reflectors of one
// cluster, with the originating node's IPv6 address kept as next hop and ORIGINATOR_ID and
// CLUSTER_LIST as for IPv4; a client that withdraws its IPv6 block has it withdrawn everywhere,
// its IPv4 block staying.
func TestRouteReflectorsIPv6(t *testing.T) {
	netnstest.Require(t)
	ids := []int{101, 102, 11, 12, 13}
	all := []model.Node{
		mkNode(101, rrLabel, "244.0.0.1"), mkNode(102, rrLabel, "244.0.0.1"),
		mkNode(11, nil, ""), mkNode(12, nil, ""), mkNode(13, nil, ""),
	}
	for i, id := range ids {
		all[i].BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", id)))
	}
	var tns []*testNode
	for _, n := range all {
		cfg := func(c *Config) {}
		if n.Name == "node11" {
			cfg = func(c *Config) { c.GoBGPAPI = "127.0.0.1:50152" }
		}
		tns = append(tns, startNode(t, n, all, func(b *Bird) {
			send(b, confUpdate(meshOff()))
			send(b, peerUpdates(calicoRRPeers()...)...)
			send(b, poolUpdate(pool6))
			send(b, claims6(ids...)...)
		}, cfg))
	}
	clients := tns[2:]
	for i, a := range clients {
		for j, b := range clients {
			if i != j {
				a.routes.waitRoute(t, block6Of(ids[2+j]), addr6(b.Node), 15*time.Second)
				a.routes.waitRoute(t, b.block, addr4(b.Node), 15*time.Second)
			}
		}
	}
	// The reflectors' own IPv6 blocks reach the clients too.
	clients[0].routes.waitRoute(t, block6Of(101), addr6(tns[0].Node), 5*time.Second)

	// Settled (see TestRouteReflectors): one path from each reflector, each carrying node12's
	// router ID as originator, the cluster ID, and node12's IPv6 address as next hop.
	n12 := clients[1]
	deadline := time.Now().Add(10 * time.Second)
	for {
		paths := gobgpPaths(t, "127.0.0.1:50152", block6Of(12))
		var bad []string
		for _, p := range paths {
			orig, clusters, nh := attrs(p)
			if orig != addr4(n12.Node).String() || fmt.Sprint(clusters) != "[244.0.0.1]" || nh != addr6(n12.Node).String() {
				bad = append(bad, fmt.Sprintf("reflected path from %s: originator %q cluster list %v next hop %q", p.NeighborIp, orig, clusters, nh))
			}
		}
		if len(paths) == 2 && len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node11's paths for node12's IPv6 block after 10s: %d paths, %v; want one from each reflector, originator %s, next hop %s, cluster list [244.0.0.1]",
				len(paths), bad, addr4(n12.Node), addr6(n12.Node))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// node12 withdraws its IPv6 block: gone from every client and reflector; IPv4 stays.
	send(n12.bird, release(block6Of(12)))
	for _, tn := range []*testNode{tns[0], tns[1], clients[0], clients[2]} {
		tn.routes.waitGone(t, block6Of(12), 10*time.Second)
		if nh, ok := tn.routes.get(n12.block); !ok || nh != addr4(n12.Node) {
			t.Errorf("%s: node12's IPv4 block after its IPv6 withdrawal: %v %v", tn.Name, nh, ok)
		}
	}
}
