package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
)

// TestMultiHopNative: nodes on two subnets, ipipMode Never, the router between them is the ToR
// (FRR with zebra) peering with a route reflector on each subnet. Pod traffic crosses the router
// natively because it learned the pod routes by BGP.
func TestMultiHopNative(t *testing.T) {
	l := startLab(t, lab.Options{TwoSubnets: true})
	ctx := testCtx(t, 5*time.Minute)
	pool, err := l.Client.IPPools().Get(ctx, lab.DefaultPoolName)
	if err != nil {
		t.Fatal(err)
	}
	if pool.Spec.IPIPMode != v1.IPIPModeNever {
		pool.Spec.IPIPMode = v1.IPIPModeNever
		if _, err := l.Client.IPPools().Update(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.UseRouteReflectors(ctx); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]v1.BGPPeerSpec{
		"tor-a": {Node: "rr-a", PeerIP: lab.RouterA.String(), ASNumber: lab.DefaultToRASN, KeepOriginalNextHop: true},
		"tor-b": {Node: "rr-b", PeerIP: lab.RouterB.String(), ASNumber: lab.DefaultToRASN, KeepOriginalNextHop: true},
	} {
		if _, err := l.Client.BGPPeers().Create(ctx, &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: p}); err != nil {
			t.Fatal(err)
		}
	}
	nodes := addNodes(t, ctx, l,
		lab.NodeSpec{Name: "rr-a", Subnet: lab.A, RouteReflectorClusterID: rrClusterID},
		lab.NodeSpec{Name: "rr-b", Subnet: lab.B, RouteReflectorClusterID: rrClusterID},
		lab.NodeSpec{Name: "a-1", Subnet: lab.A},
		lab.NodeSpec{Name: "b-1", Subnet: lab.B},
	)
	if err := l.Router().StartFRR(ctx, lab.FRROptions{Zebra: true, Neighbors: []lab.BGPNeighbor{
		{Addr: nodes[0].IP(), ASN: v1.DefaultASNumber}, {Addr: nodes[1].IP(), ASN: v1.DefaultASNumber},
	}}); err != nil {
		t.Fatal(err)
	}
	pods := addPodsPerNode(t, ctx, l, nodes, 1)

	// The router forwards pod traffic because its kernel holds every node's blocks (zebra
	// installed what bgpd learned).
	err = lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		blocks, err := l.Blocks(ctx)
		if err != nil {
			return err
		}
		rs, err := l.Router().Routes(ctx)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, r := range rs {
			have[r.Dst] = true
		}
		for node, bs := range blocks {
			for _, b := range bs {
				if !have[b.String()] {
					return fmt.Errorf("router has no route to %s of %s", b, node)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	requireReach(t, ctx, "pod to pod across the router", podEndpoints(pods), podEndpoints(pods), 45*time.Second)
	// No encapsulation anywhere: no route of tabby's uses a tunnel device.
	for _, n := range nodes {
		rs, err := n.TabbyRoutes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Dev == "tunl0" {
				t.Errorf("%s: %s uses tunl0 with ipipMode Never", n.Name, r)
			}
		}
	}
	_ = netip.Addr{}
}
