package bird

import (
	"context"
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

// TestToRIPv6: a BIRD2 ToR and a dual-stack tabby node, with IPv6 carried over an IPv6 session
// (BGPPeer peerIP 2001:db8:100::247) or over the IPv4 one (MP-BGP). Either way the ToR learns
// the node's IPv6 block with the node's IPv6 address as next hop, the node learns the ToR's
// legitimate IPv6 route (another rack's block), and the ToR cannot hijack: a more-specific
// inside the node's own IPv6 block is never accepted. The status tells per family what was
// negotiated, received, accepted and sent; a ToR without an IPv6 channel leaves IPv6 "not
// negotiated" on the IPv4 session.
func TestToRIPv6(t *testing.T) {
	netnstest.Require(t)
	tor, nodeAddr := netip.MustParseAddr("198.51.100.247"), netip.MustParseAddr("198.51.100.93")
	tor6, node6 := netip.MustParseAddr("2001:db8:100::247"), netip.MustParsePrefix("2001:db8:100::93/64")
	own, otherRack6 := block6Of(93), block6Of(0xe6)
	inside := netip.MustParsePrefix(own.Addr().String() + "/124")
	// want is the status per family: state received/accepted/sent.
	for _, tc := range []struct {
		name   string
		peerIP netip.Addr
		tor    birdToR
		want   string
	}{
		// Both of the ToR's IPv6 prefixes arrive; the one inside our block is rejected.
		{"IPv6 session", tor6, birdToR{Addr6: tor6, Node6: node6.Addr()}, "ipv6 up 2/1/1"},
		{"MP-BGP over the IPv4 session", tor, birdToR{Node: nodeAddr, IPv6: true, Addr6: tor6}, "ipv4 up 0/0/1 ipv6 up 2/1/1"},
		{"IPv4 session, ToR without IPv6", tor, birdToR{Node: nodeAddr}, "ipv4 up 0/0/1 ipv6 not negotiated 0/0/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := torNamespace6(t, nodeAddr, tor, node6, tor6)
			r := tc.tor
			r.Addr, r.AS, r.NodeAS = tor, 65000, v1.DefaultASNumber
			r.Announce = []netip.Prefix{inside, otherRack6}
			birdc := r.start(t, ns)
			n := mkNode(93, nil, "")
			n.BGPAddress.Set(ipfamily.IPv6, node6)
			a := startNode(t, n, []model.Node{n}, func(b *Bird) {
				send(b, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: tc.peerIP.String(), ASNumber: 65000}})...)
				send(b, poolUpdate(pool6))
				send(b, claims6(93, 0xe6)...)
			})
			a.waitPeer(t, tc.peerIP, "established", 30*time.Second)
			if strings.Contains(tc.want, "ipv6 up") {
				waitBIRDRoute(t, birdc, "", own, node6.Addr())
				a.routes.waitRoute(t, otherRack6, tor6, 15*time.Second)
			}
			// The counts settle once the ToR's routes are in and ours are out.
			got := waitStatusFamilies(t, a, tc.peerIP, tc.want)
			if got != tc.want {
				t.Errorf("session families %q, want %q", got, tc.want)
			}
			if nh, ok := a.routes.get(inside); ok {
				t.Fatalf("the ToR's %s inside the node's own %s accepted via %s", inside, own, nh)
			}
		})
	}
}

// waitBIRDRoute waits until a BIRD2 ToR has p via nh (from protocol proto, any if empty).
func waitBIRDRoute(t *testing.T, birdc func(args ...string) string, proto string, p netip.Prefix, nh netip.Addr) {
	t.Helper()
	args := []string{"show", "route", "for", p.String()}
	if proto != "" {
		args = append(args, "protocol", proto)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := birdc(append(args, "all")...)
		if strings.Contains(out, p.String()) && strings.Contains(out, "via "+nh.String()+" ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("BIRD2 has no %s via %s:\n%s\n%s", p, nh, out, birdc("show", "protocols", "all"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// statusFamilies is the families of the node's session with peer as "ipv4 up 0/0/1 ipv6 up
// 2/1/1": state received/accepted/sent.
func statusFamilies(t *testing.T, a *testNode, peer netip.Addr) string {
	t.Helper()
	st, err := a.bird.Status(context.Background())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, p := range st.Peers {
		if p.Address != peer.String() {
			continue
		}
		var fams []string
		for _, f := range p.Families {
			fams = append(fams, fmt.Sprintf("%s %s %d/%d/%d", f.Family, f.State, f.Received, f.Accepted, f.Sent))
		}
		return strings.Join(fams, " ")
	}
	t.Fatalf("%s has no session with %s: %+v", a.Name, peer, st.Peers)
	return ""
}

// waitStatusFamilies waits up to 5 s for statusFamilies to be want and returns the last one.
func waitStatusFamilies(t *testing.T, a *testNode, peer netip.Addr, want string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := statusFamilies(t, a, peer)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestToRIPv6TwoNodes: a BIRD2 ToR peers over IPv6 with two dual-stack tabby nodes (one global
// BGPPeer with an IPv6 peerIP) and learns each node's IPv6 block from that node with the node's
// IPv6 address as next hop (and the other node's block from each, next hop self as eBGP
// wants); nothing of IPv4 travels on the IPv6 sessions.
func TestToRIPv6TwoNodes(t *testing.T) {
	netnstest.Require(t)
	tor, tor6 := netip.MustParseAddr("198.51.100.246"), netip.MustParseAddr("2001:db8:100::246")
	all := []model.Node{mkNode(95, nil, ""), mkNode(96, nil, "")}
	for i := range all {
		all[i].BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", 95+i)))
	}
	ns := torNamespace6(t, addr4(all[0]), tor, all[0].BGPAddress.Get(ipfamily.IPv6), tor6)
	// The second node on the ToR's link too: a direct eBGP neighbour.
	if out, err := exec.Command("ip", "addr", "add", all[1].BGPAddress.Get(ipfamily.IPv6).String(), "dev", fmt.Sprintf("tor%d", os.Getpid()%100000), "nodad").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	birdc := birdToR{Addr: tor, AS: 65000, NodeAS: v1.DefaultASNumber, Addr6: tor6, Node6: addr6(all[0]), More: []netip.Addr{addr6(all[1])}}.start(t, ns)
	bgpPeers := []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor6"}, Spec: v1.BGPPeerSpec{PeerIP: tor6.String(), ASNumber: 65000}}}
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, func(b *Bird) {
			send(b, peerUpdates(bgpPeers...)...)
			send(b, poolUpdate(pool6))
			send(b, claims6(95, 96)...)
		}))
	}
	for i, proto := range []string{"node", "node2"} {
		tns[i].waitPeer(t, tor6, "established", 30*time.Second)
		own, other := block6Of(95+i), block6Of(96-i)
		waitBIRDRoute(t, birdc, proto, own, addr6(all[i]))
		waitBIRDRoute(t, birdc, proto, other, addr6(all[i]))
		// Each node sends its block and the other's, IPv6 only.
		if got, want := waitStatusFamilies(t, tns[i], tor6, "ipv6 up 0/0/2"), "ipv6 up 0/0/2"; got != want {
			t.Errorf("%s's session with the ToR: %q, want %q", all[i].Name, got, want)
		}
	}
	if out := birdc("show", "route", "table", "master4"); strings.Contains(out, "10.244.") {
		t.Errorf("IPv4 routes reached the ToR over IPv6 sessions:\n%s", out)
	}
}

// A BGPPeer with an IPv6 address on a node without an IPv6 BGP address opens no session and
// says why; the node's IPv4 sessions are untouched.
func TestIPv6PeerWithoutIPv6Address(t *testing.T) {
	netnstest.Require(t)
	n := mkNode(94, nil, "")
	a := startNode(t, n, []model.Node{n}, func(b *Bird) {
		send(b, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor6"}, Spec: v1.BGPPeerSpec{PeerIP: "2001:db8:100::247", ASNumber: 65000}})...)
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := a.bird.Status(context.Background())
		if err == nil && len(st.Peers) == 0 && strings.Contains(strings.Join(st.Problems, "\n"), "no IPv6 BGP address") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v: want no session and the reason", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIPv6OnlyMesh: nodes with no IPv4 BGP address (tabby-node --bgp-address=none) mesh over
// their IPv6 addresses, with router IDs derived from their names, and exchange their IPv6
// blocks; a dual-stack node in the same cluster peers with them over IPv6 too, and an IPv4-only
// node cannot (no family in common) and is left out without breaking the others.
func TestIPv6OnlyMesh(t *testing.T) {
	netnstest.Require(t)
	six := func(i int) model.Node {
		return withIPv6Address(model.Node{Name: fmt.Sprintf("node%d", i)}, netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", i)))
	}
	dual := mkNode(33, nil, "")
	dual.BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix("2001:db8:100::33/64"))
	all := []model.Node{six(31), six(32), dual, mkNode(34, nil, "")}
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, func(b *Bird) {
			send(b, poolUpdate(pool6))
			send(b, claims6(31, 32, 33)...)
		}))
	}
	for i, a := range tns[:3] {
		for j, b := range tns[:3] {
			if i != j {
				a.routes.waitRoute(t, block6Of(31+j), addr6(b.Node), 15*time.Second)
			}
		}
	}
	// The IPv6-only nodes' sessions are to IPv6 addresses only, and none to the IPv4-only node.
	st, err := tns[0].bird.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range st.Peers {
		got = append(got, p.Address+"/"+p.State)
	}
	if want := "2001:db8:100::32/established 2001:db8:100::33/established"; strings.Join(got, " ") != want {
		t.Errorf("node31's sessions %v, want %s", got, want)
	}
	// The dual-stack node keeps its IPv4 session with the IPv4-only one.
	tns[3].routes.waitRoute(t, blockOf(33), addr4(dual), 15*time.Second)
}

// TestIPv6OnlyRouteReflector: IPv6-only nodes with the mesh off and a route reflector: the
// clients peer with the reflector only, over IPv6, and learn each other's IPv6 blocks through it
// with the originating node's IPv6 address kept as next hop.
func TestIPv6OnlyRouteReflector(t *testing.T) {
	netnstest.Require(t)
	six := func(i int, labels map[string]string, cluster string) model.Node {
		return withIPv6Address(model.Node{Name: fmt.Sprintf("node%d", i), Labels: labels, RRClusterID: cluster}, netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", i)))
	}
	all := []model.Node{six(41, rrLabel, "244.0.0.9"), six(42, nil, ""), six(43, nil, "")}
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, func(b *Bird) {
			send(b, confUpdate(meshOff()))
			send(b, peerUpdates(calicoRRPeers()...)...)
			send(b, poolUpdate(pool6))
			send(b, claims6(41, 42, 43)...)
		}))
	}
	tns[1].routes.waitRoute(t, block6Of(43), addr6(all[2]), 15*time.Second)
	tns[2].routes.waitRoute(t, block6Of(42), addr6(all[1]), 15*time.Second)
	st, err := tns[1].bird.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 1 || st.Peers[0].Address != addr6(all[0]).String() || st.Peers[0].Type != "route-reflector" {
		t.Errorf("client's sessions %+v, want the reflector only, over IPv6", st.Peers)
	}
}
