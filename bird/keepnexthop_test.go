package bird

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// TestRouteReflectorKeepsNextHopToExternal is the multi-subnet design (hack/e2e
// TestMultiHopNative): the ToR learns every block from a route reflector over eBGP and must
// forward straight to the node that owns it. With keepOriginalNextHop the reflector passes on
// its own block, a client's block and a block reflected to it by the other reflector, each with
// its owner as next hop; without it, eBGP's next-hop-self applies to all of them. Switching the
// BGPPeer's keepOriginalNextHop on re-advertises with the owners' next hops.
func TestRouteReflectorKeepsNextHopToExternal(t *testing.T) {
	netnstest.Require(t)
	const rrKey = "tabby.dev/route-reflector"
	label := func(site string, rr bool) map[string]string {
		l := map[string]string{"site": site}
		if rr {
			l[rrKey] = "true"
		}
		return l
	}
	// rr1 and rr2 reflect for one cluster; client 113 peers with rr1 only, client 114 with rr2
	// only, so rr1 holds 114's block only as reflected by rr2.
	all := []model.Node{
		mkNode(111, label("a", true), "244.0.0.2"), mkNode(112, label("b", true), "244.0.0.2"),
		mkNode(113, label("a", false), ""), mkNode(114, label("b", false), ""),
	}
	rr1 := addr4(all[0])
	keepTor, plainTor := netip.MustParseAddr("198.51.100.241"), netip.MustParseAddr("198.51.100.242")
	peersWith := func(keepPlain bool) []v1.BGPPeer {
		return []v1.BGPPeer{
			{ObjectMeta: metav1.ObjectMeta{Name: "rr-mesh"}, Spec: v1.BGPPeerSpec{NodeSelector: "has(" + rrKey + ")", PeerSelector: "has(" + rrKey + ")"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "site-a"}, Spec: v1.BGPPeerSpec{NodeSelector: "site == 'a' && !has(" + rrKey + ")", PeerSelector: "site == 'a' && has(" + rrKey + ")"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "site-b"}, Spec: v1.BGPPeerSpec{NodeSelector: "site == 'b' && !has(" + rrKey + ")", PeerSelector: "site == 'b' && has(" + rrKey + ")"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "tor-keep"}, Spec: v1.BGPPeerSpec{Node: "node111", PeerIP: keepTor.String(), ASNumber: 65010, KeepOriginalNextHop: true}},
			{ObjectMeta: metav1.ObjectMeta{Name: "tor-plain"}, Spec: v1.BGPPeerSpec{Node: "node111", PeerIP: plainTor.String(), ASNumber: 65011, KeepOriginalNextHop: keepPlain}},
		}
	}
	// Passive: changing tor-plain's BGPPeer resets its session from rr1's side.
	keep := startRouterMode(t, keepTor, 65010, map[netip.Addr]uint32{rr1: v1.DefaultASNumber}, true)
	plain := startRouterMode(t, plainTor, 65011, map[netip.Addr]uint32{rr1: v1.DefaultASNumber}, true)
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, func(b *Bird) { send(b, confUpdate(meshOff())); send(b, peerUpdates(peersWith(false)...)...) }))
	}

	// The topology is what the test claims: rr1 has 114's block from rr2, not from 114.
	tns[0].routes.waitRoute(t, tns[3].block, addr4(tns[3].Node), 15*time.Second)
	for _, p := range tns[0].bird.Peers() {
		if p.Node == "node114" {
			t.Fatalf("rr1 peers with node114 (%s): the reflected-by-rr2 case is not covered", p.Address)
		}
	}

	for _, tn := range tns {
		owner := addr4(tn.Node)
		keep.waitReceived(t, rr1, tn.block, owner.String())
		plain.waitReceived(t, rr1, tn.block, rr1.String())
	}

	for _, tn := range tns {
		send(tn.bird, peerUpdates(peersWith(true)...)...)
	}
	for _, tn := range tns {
		plain.waitReceived(t, rr1, tn.block, addr4(tn.Node).String())
	}
	if got := keep.received(t, rr1); len(got) != len(tns) {
		t.Errorf("keep-next-hop ToR received %v, want the %d blocks only", got, len(tns))
	}
}
