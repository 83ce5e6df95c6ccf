package e2e

import (
	"os/exec"
	"slices"
	"strings"
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
	requireTraceroute(t, pods[0], pods[len(pods)-1])
}

// requireTraceroute: a traceroute from one pod to a pod on another node shows the real hops (no
// overlay): the source node, the destination node, the destination pod.
func requireTraceroute(t *testing.T, from, to *lab.Pod) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", from.NS, "traceroute", "-n", "-q", "1", "-w", "2", "-m", "5", to.IP.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("traceroute %s -> %s: %v\n%s", from.Name, to.Name, err, out)
	}
	var hops []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 2 {
			hops = append(hops, f[1])
		}
	}
	want := []string{from.Node.IP().String(), to.Node.IP().String(), to.IP.String()}
	if !slices.Equal(hops, want) {
		t.Fatalf("traceroute %s -> %s: hops %v, want %v\n%s", from.Name, to.Name, hops, want, out)
	}
	t.Logf("traceroute %s -> %s: %s", from.Name, to.Name, strings.Join(hops, " -> "))
}
