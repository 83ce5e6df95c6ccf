package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// TestNodeFailure: a node's link is cut (its switch port down): within 10 s no other node
// routes to it any more; the link restored, its routes come back and its pods are reachable.
func TestNodeFailure(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 4*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(3)...)
	pods := addPodsPerNode(t, ctx, l, nodes, 1)
	requireReach(t, ctx, "pod to pod", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
	requireRoutes(t, ctx, l, 10*time.Second)

	victim, others := nodes[2], nodes[:2]
	viaVictim := func(ctx context.Context, n *lab.Node) (int, error) {
		rs, err := n.TabbyRoutes(ctx)
		if err != nil {
			return 0, err
		}
		c := 0
		for _, r := range rs {
			if r.Gateway == victim.IP().String() {
				c++
			}
		}
		return c, nil
	}
	start := time.Now()
	if err := victim.CutLink(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range others {
		err := lab.Eventually(ctx, 10*time.Second-time.Since(start), func(ctx context.Context) error {
			c, err := viaVictim(ctx, n)
			if err != nil {
				return err
			}
			if c > 0 {
				rs, _ := n.TabbyRoutes(ctx)
				return fmt.Errorf("%s still routes %d prefixes via %s: %s", n.Name, c, victim.IP(), strings.Join(lab.RouteStrings(rs), "; "))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("link of %s cut: %v", victim.Name, err)
		}
	}
	t.Logf("routes via %s gone from every node %s after the cut", victim.Name, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	if err := victim.RestoreLink(ctx); err != nil {
		t.Fatal(err)
	}
	requireRoutes(t, ctx, l, 60*time.Second)
	t.Logf("routes back %s after the link was restored", time.Since(start).Round(time.Millisecond))
	requireReach(t, ctx, "pod to pod after restore", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
}
