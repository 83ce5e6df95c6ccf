package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// TestChurn: a node joins and its pods are reachable from everywhere with nothing restarted; a
// node leaves (agent stopped, Node deleted) and its routes vanish from every node; pods are
// deleted and their routes and addresses are gone, with no IPAM leak.
func TestChurn(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 5*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(3)...)
	addPodsPerNode(t, ctx, l, nodes, 2)
	requireReach(t, ctx, "pod to pod", l.PodEndpoints(), l.PodEndpoints(), 30*time.Second)

	// Join.
	start := time.Now()
	n4 := addNodes(t, ctx, l, lab.NodeSpec{Name: "node-4"})[0]
	addPodsPerNode(t, ctx, l, []*lab.Node{n4}, 2)
	requireReach(t, ctx, "pod to pod with node-4", l.PodEndpoints(), l.PodEndpoints(), 30*time.Second)
	requireRoutes(t, ctx, l, 15*time.Second)
	t.Logf("node-4 joined and reachable in %s", time.Since(start).Round(time.Millisecond))

	// Leave.
	gone := l.Node("node-2")
	goneIP := gone.IP()
	blocks, err := l.Blocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	goneBlocks := blocks[gone.Name]
	start = time.Now()
	if err := l.RemoveNode(ctx, gone.Name); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Nodes() {
		err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
			rs, err := n.TabbyRoutes(ctx)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if r.Gateway == goneIP.String() || inAny(r.Dst, goneBlocks) {
					return fmt.Errorf("%s still has %s of removed node-2", n.Name, r)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("node-2's routes gone from every node %s after it left", time.Since(start).Round(time.Millisecond))
	requireReach(t, ctx, "pod to pod without node-2", l.PodEndpoints(), l.PodEndpoints(), 30*time.Second)

	// Pods go.
	victims := []*lab.Pod{l.Pods()[0], l.Pods()[len(l.Pods())-1]}
	for _, p := range victims {
		if err := l.DeletePod(ctx, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range victims {
		err := lab.Eventually(ctx, 15*time.Second, func(ctx context.Context) error {
			rs, err := p.Node.TabbyRoutes(ctx)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if lab.Canon(r) == p.IP.String()+"/32 dev "+r.Dev {
					return fmt.Errorf("%s still routes deleted pod %s: %s", p.Node.Name, p.Name, r)
				}
			}
			return allocated(ctx, l, p.IP)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	requireRoutes(t, ctx, l, 15*time.Second)
	err = lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		out, err := l.Tabbyctl(ctx, "ipam", "check")
		if err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("tabbyctl ipam check: %v", err)
	}
}

func inAny(dst string, blocks []netip.Prefix) bool {
	if !strings.Contains(dst, "/") {
		dst += "/32"
	}
	p, err := netip.ParsePrefix(dst)
	if err != nil {
		return false
	}
	for _, b := range blocks {
		if b.Overlaps(p) {
			return true
		}
	}
	return false
}

// allocated fails while ip is still allocated in an IPAM block.
func allocated(ctx context.Context, l *lab.Lab, ip netip.Addr) error {
	list, err := l.Client.IPAMBlocks().List(ctx, listAll)
	if err != nil {
		return err
	}
	for _, b := range list.Items {
		p, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil || !p.Contains(ip) {
			continue
		}
		ord := 0
		for a := p.Addr(); a != ip; a = a.Next() {
			ord++
		}
		if al, ok := b.Spec.Allocations[fmt.Sprint(ord)]; ok {
			return fmt.Errorf("%s still allocated in block %s (%+v)", ip, b.Spec.CIDR, al)
		}
	}
	return nil
}
