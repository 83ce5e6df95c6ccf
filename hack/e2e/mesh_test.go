package e2e

import (
	"testing"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// TestMesh: 4 nodes in the default node-to-node mesh, 3 pods each. Every pod reaches every
// other pod and every node, and each node's kernel holds exactly tabby's expected routes.
func TestMesh(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 4*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(4)...)
	pods := addPodsPerNode(t, ctx, l, nodes, 3)

	requireReach(t, ctx, "pod to pod", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
	requireReach(t, ctx, "pod to node", podEndpoints(pods), l.NodeEndpoints(), 10*time.Second)
	requireRoutes(t, ctx, l, 10*time.Second)
	for _, n := range nodes {
		if err := n.WaitPeers(ctx, 10*time.Second, peersExcept(nodes, n)...); err != nil {
			t.Error(err)
		}
	}
}
