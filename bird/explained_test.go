package bird

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// TestExternalImportFollowsBlocks: what an external router may announce inside a pool follows
// the blocks as they come and go, each change on its own (the speaker's sets are patched in
// place, not rebuilt): a block IPAM newly explains is accepted and one released is dropped; a
// block of this node is never accepted, and is once the node has given it up.
func TestExternalImportFollowsBlocks(t *testing.T) {
	t.Run("explained", func(t *testing.T) {
		claimed := netip.MustParsePrefix("10.244.240.64/26") // not among testBlocks
		c := startHijackCluster(t, birdToR{AS: 65000, Announce: []netip.Prefix{claimed, otherRack}}, false)
		c.rr.routes.waitRoute(t, otherRack, c.tor, 15*time.Second)
		if nh, ok := c.rr.routes.get(claimed); ok {
			t.Fatalf("unexplained %s accepted via %s", claimed, nh)
		}
		send(c.rr.bird, claim(claimed, "node240"))
		c.rr.routes.waitRoute(t, claimed, c.tor, 5*time.Second)
		send(c.rr.bird, release(claimed))
		c.rr.routes.waitGone(t, claimed, 5*time.Second)
	})
	// Without an external router the explained prefixes are not given to the speaker at all
	// (nothing they filter can arrive); the first router to come gets every one of them.
	t.Run("explained while no router", func(t *testing.T) {
		claimed := netip.MustParsePrefix("10.244.240.64/26")
		c := startHijackCluster(t, birdToR{AS: 65000, Announce: []netip.Prefix{claimed, otherRack}}, false)
		c.rr.routes.waitRoute(t, otherRack, c.tor, 15*time.Second)
		send(c.rr.bird, model.BGPPeerRemove{Name: "tor"})
		c.rr.routes.waitGone(t, otherRack, 10*time.Second)
		send(c.rr.bird, claim(claimed, "node240"))
		send(c.rr.bird, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"},
			Spec: v1.BGPPeerSpec{Node: "node201", PeerIP: c.tor.String(), ASNumber: 65000}})...)
		c.rr.routes.waitRoute(t, claimed, c.tor, 30*time.Second)
	})
	t.Run("local", func(t *testing.T) {
		own := blockOf(201) // the reflector's, which peers with the ToR
		c := startHijackCluster(t, birdToR{AS: 65000, Announce: []netip.Prefix{own, otherRack}}, false)
		c.rr.routes.waitRoute(t, otherRack, c.tor, 15*time.Second)
		c.bystander.routes.waitRoute(t, own, addr4(c.rr.Node), 5*time.Second)
		// The reflector's node lets the block go; IPAM still has it, for no node.
		send(c.rr.bird, claim(own, ""))
		c.rr.routes.waitRoute(t, own, c.tor, 5*time.Second)
		send(c.rr.bird, claim(own, c.rr.Name))
		c.rr.routes.waitGone(t, own, 5*time.Second)
		c.bystander.routes.waitRoute(t, own, addr4(c.rr.Node), 5*time.Second)
	})
}
