package bird

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

var pool6 = netip.MustParsePrefix("fd00:10:244::/48")

func block6Of(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%x::/122", i))
}

// torNamespace6 is torNamespace with an IPv6 subnet on the same link: tor6/64 on the ToR's end
// and node6 on the node's. BIRD resolves a direct eBGP peer's next hop on a shared network.
func torNamespace6(t testing.TB, node, tor netip.Addr, node6 netip.Prefix, tor6 netip.Addr) string {
	t.Helper()
	ns := torNamespace(t, node, tor)
	for _, c := range [][]string{
		{"ip", "netns", "exec", ns, "sh", "-c", fmt.Sprintf("ip addr add %s/64 dev $(ip -o link show type veth | cut -d: -f2 | cut -d@ -f1 | tr -d ' ') nodad", tor6)},
		{"sh", "-c", fmt.Sprintf("ip addr add %s dev tor%d nodad", node6, os.Getpid()%100000)},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	return ns
}

// TestDualStackMesh: over the same IPv4 sessions (MP-BGP), dual-stack nodes exchange their IPv6
// blocks with their IPv6 BGP address as next hop, beside their IPv4 blocks; an IPv4-only node
// in the same mesh keeps its sessions and IPv4 routes and is offered no IPv6.
func TestDualStackMesh(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(11, nil, ""), mkNode(12, nil, ""), mkNode(13, nil, "")}
	for i := range all[:2] {
		all[i].BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", 11+i)))
	}
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, func(b *Bird) {
			send(b, poolUpdate(pool6))
			send(b, claims6(11, 12)...)
		}))
	}
	for _, a := range tns {
		for _, b := range tns {
			if a != b {
				a.routes.waitRoute(t, b.block, addr4(b.Node), 15*time.Second)
			}
		}
	}
	tns[0].routes.waitRoute(t, block6Of(12), addr6(all[1]), 15*time.Second)
	tns[1].routes.waitRoute(t, block6Of(11), addr6(all[0]), 15*time.Second)
	for _, p := range []netip.Prefix{block6Of(11), block6Of(12)} {
		if nh, ok := tns[2].routes.get(p); ok {
			t.Errorf("the IPv4-only node learned %s via %s", p, nh)
		}
	}

	// node11 withdraws its IPv6 block; its IPv4 one stays.
	send(tns[0].bird, release(block6Of(11)))
	if d := tns[1].routes.waitGone(t, block6Of(11), 2*time.Second); d > time.Second {
		t.Errorf("IPv6 withdrawal took %v", d)
	}
	if nh, ok := tns[1].routes.get(blockOf(11)); !ok || nh != addr4(all[0]) {
		t.Errorf("node11's IPv4 block after its IPv6 withdrawal: %v %v", nh, ok)
	}
	// An IPv6 prefix outside every pool, advertised by mistake beside a block, never travels:
	// once the block that went with it has come and gone, the stray one is not there.
	stray := netip.MustParsePrefix("2001:db8:ffff::/64")
	send(tns[1].bird, claim(stray, all[1].Name))
	tns[0].routes.waitRoute(t, block6Of(12), addr6(all[1]), 5*time.Second)
	send(tns[1].bird, release(block6Of(12)), release(stray))
	tns[0].routes.waitGone(t, block6Of(12), 5*time.Second)
	if nh, ok := tns[0].routes.get(stray); ok {
		t.Errorf("a prefix outside the pools was imported via %s", nh)
	}
}

// TestBIRD2ToRLearnsIPv6: a real ToR (BIRD2) with an IPv6 unicast channel on its IPv4 session
// learns a dual-stack node's IPv6 block, with the node's IPv6 address as next hop, beside the
// IPv4 block.
func TestBIRD2ToRLearnsIPv6(t *testing.T) {
	netnstest.Require(t)
	tor, nodeAddr := netip.MustParseAddr("198.51.100.248"), netip.MustParseAddr("198.51.100.92")
	tor6, node6 := netip.MustParseAddr("2001:db8:100::248"), netip.MustParsePrefix("2001:db8:100::92/64")
	ns := torNamespace6(t, nodeAddr, tor, node6, tor6)
	birdc := birdToR{Addr: tor, Node: nodeAddr, AS: 65000, NodeAS: 64512, IPv6: true}.start(t, ns)
	n := mkNode(92, nil, "")
	n.BGPAddress.Set(ipfamily.IPv6, node6)
	a := startNode(t, n, []model.Node{n}, func(b *Bird) {
		send(b, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: tor.String(), ASNumber: 65000}})...)
		send(b, poolUpdate(pool6))
		send(b, claims6(92)...)
	})
	a.waitPeer(t, tor, "established", 30*time.Second)
	for _, c := range []struct {
		block netip.Prefix
		via   string
	}{{block6Of(92), "via " + node6.Addr().String()}, {blockOf(92), "via " + nodeAddr.String()}} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			out := birdc("show", "route", "for", c.block.String(), "all")
			if strings.Contains(out, c.block.String()) && strings.Contains(out, c.via) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("BIRD2 has no %s %s:\n%s\n%s", c.block, c.via, out, birdc("show", "protocols", "all", "tor"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
