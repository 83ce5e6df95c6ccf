package bird

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The IPv6 side of hijack_test.go: the same cluster (a route reflector, node201, with the owner
// node21 and a bystander node22 as clients), every node dual-stack, and a BIRD2 ToR at the
// reflector announcing IPv6 prefixes, over an IPv6 session or over the IPv4 one (MP-BGP).

var otherRack6 = block6Of(0xe6)

// startHijackCluster6 starts the dual-stack cluster and the ToR; over6 puts the ToR's session
// on IPv6 addresses.
func startHijackCluster6(t *testing.T, tor birdToR, routeServer, over6 bool) hijackCluster {
	t.Helper()
	netnstest.Require(t)
	all := []model.Node{mkNode(201, rrLabel, "244.0.0.9"), mkNode(21, nil, ""), mkNode(22, nil, "")}
	for i, n := range []int{201, 21, 22} {
		all[i].BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", n)))
	}
	tor.Addr, tor.Addr6, tor.NodeAS = netip.MustParseAddr("198.51.100.249"), netip.MustParseAddr("2001:db8:100::249"), v1.DefaultASNumber
	peerIP := tor.Addr
	if over6 {
		tor.Node6, peerIP = addr6(all[0]), tor.Addr6
	} else {
		tor.Node, tor.IPv6 = addr4(all[0]), true
	}
	ns := torNamespace6(t, addr4(all[0]), tor.Addr, all[0].BGPAddress.Get(ipfamily.IPv6), tor.Addr6)
	tor.start(t, ns)
	bgpPeers := append(calicoRRPeers(), v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"},
		Spec: v1.BGPPeerSpec{Node: "node201", PeerIP: peerIP.String(), ASNumber: tor.AS, RouteServer: routeServer}})
	c := hijackCluster{tor: peerIP}
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, func(b *Bird) {
			send(b, confUpdate(meshOff()))
			send(b, peerUpdates(bgpPeers...)...)
			send(b, poolUpdate(pool6))
			// IPAM has every node's IPv6 block and the other rack's, nothing else in the pool.
			send(b, claims6(201, 21, 22, 0xe6)...)
		}))
	}
	c.rr, c.owner, c.bystander = tns[0], tns[1], tns[2]
	c.rr.waitPeer(t, peerIP, "established", 30*time.Second)
	return c
}

// keepsOwnerPath6 is keepsOwnerPath for the owner's IPv6 block: the ToR's legitimate IPv6
// route arrives (from the ToR's IPv6 address as next hop on either session), the reflector
// and the bystander route node21's IPv6 block to node21's IPv6 address, and keep doing so.
func (c hijackCluster) keepsOwnerPath6(t *testing.T, tor6 netip.Addr) {
	t.Helper()
	own, nh := block6Of(21), addr6(c.owner.Node)
	c.rr.routes.waitRoute(t, otherRack6, tor6, 15*time.Second)
	for _, tn := range []*testNode{c.rr, c.bystander} {
		tn.routes.waitRoute(t, own, nh, 10*time.Second)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, tn := range []*testNode{c.rr, c.bystander} {
			if got, _ := tn.routes.get(own); got != nh {
				t.Fatalf("%s routes node21's IPv6 block %s via %s: the ToR took it", tn.Name, own, got)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestToRCannotHijackIPv6: a ToR in route-server mode (declared so: its routes pass the
// first-AS check) announces node21's exact IPv6 block, a more-specific inside it, and a prefix
// of the IPv6 pool that is no block, beside its other rack's block. The other rack's block is
// learned; node21's block stays node21's on the reflector and the bystander (the ToR's path is
// accepted but loses on LOCAL_PREF); the more-specific and the unexplained prefix are
// rejected. The same over an IPv6 session and over MP-BGP on the IPv4 one.
func TestToRCannotHijackIPv6(t *testing.T) {
	inside := netip.MustParsePrefix(block6Of(21).Addr().String() + "/124")
	unexplained := netip.MustParsePrefix("fd00:10:244:8000::/64")
	for _, over6 := range []bool{true, false} {
		name := "MP-BGP over the IPv4 session"
		if over6 {
			name = "IPv6 session"
		}
		t.Run(name, func(t *testing.T) {
			c := startHijackCluster6(t, birdToR{AS: 65000, RouteServer: true,
				Announce: []netip.Prefix{block6Of(21), inside, unexplained, otherRack6}}, true, over6)
			c.keepsOwnerPath6(t, netip.MustParseAddr("2001:db8:100::249"))
			for _, tn := range []*testNode{c.rr, c.owner, c.bystander} {
				for _, p := range []netip.Prefix{inside, unexplained} {
					if nh, ok := tn.routes.get(p); ok {
						t.Errorf("%s installed the ToR's %s via %s", tn.Name, p, nh)
					}
				}
			}
			// The reflector received the four; its import policy let in the two that IPAM
			// explains: the other rack's block, and node21's, which loses to node21's own path.
			if got, want := waitStatusFamilies(t, c.rr, c.tor, familiesWant(over6, "up 4/2/3")), familiesWant(over6, "up 4/2/3"); got != want {
				t.Errorf("reflector's session with the ToR: %q, want %q", got, want)
			}
		})
	}
}

// TestFirstASEnforcedIPv6: an eBGP ToR whose IPv6 routes do not begin with its AS (a route
// server not declared as one) gets none of them in, its legitimate one included.
func TestFirstASEnforcedIPv6(t *testing.T) {
	for _, over6 := range []bool{true, false} {
		t.Run(fmt.Sprintf("over IPv6=%v", over6), func(t *testing.T) {
			c := startHijackCluster6(t, birdToR{AS: 65000, RouteServer: true, Announce: []netip.Prefix{block6Of(21), otherRack6}}, false, over6)
			c.bystander.routes.waitRoute(t, block6Of(21), addr6(c.owner.Node), 10*time.Second)
			// Settled once the ToR's two routes have arrived (and been refused).
			if got, want := waitStatusFamilies(t, c.rr, c.tor, familiesWant(over6, "up 2/0/3")), familiesWant(over6, "up 2/0/3"); got != want {
				t.Errorf("reflector's session with the ToR: %q, want %q", got, want)
			}
			for _, tn := range []*testNode{c.rr, c.bystander} {
				if nh, ok := tn.routes.get(otherRack6); ok {
					t.Errorf("%s: path without the ToR's AS first accepted: %s via %s", tn.Name, otherRack6, nh)
				}
				// The reflector's own copy may land after the bystander's: wait for it.
				tn.routes.waitRoute(t, block6Of(21), addr6(c.owner.Node), 10*time.Second)
			}
		})
	}
}

// familiesWant is the reflector's ToR session status with ipv6 as given: the IPv4 session also
// carries IPv4, on which the ToR announces nothing and the reflector sends the three blocks.
func familiesWant(over6 bool, ipv6 string) string {
	if over6 {
		return "ipv6 " + ipv6
	}
	return "ipv4 up 0/0/3 ipv6 " + ipv6
}
