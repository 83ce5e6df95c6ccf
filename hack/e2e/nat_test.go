package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

var listAll = metav1.ListOptions{}

// TestNATOutgoing: a pod of a natOutgoing pool reaches "the internet" (203.0.113.100, behind the
// router), which sees the node's address; with natOutgoing off it sees the pod's own address.
func TestNATOutgoing(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 4*time.Minute)
	pool, err := l.Client.IPPools().Get(ctx, lab.DefaultPoolName)
	if err != nil {
		t.Fatal(err)
	}
	if !pool.Spec.NATOutgoing {
		pool.Spec.NATOutgoing = true
		if _, err := l.Client.IPPools().Update(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	nodes := addNodes(t, ctx, l, nodeSpecs(2)...)
	pods := addPodsPerNode(t, ctx, l, nodes[:1], 1)
	pod, node := pods[0], nodes[0]

	inet := l.InternetEndpoint()
	echo, err := lab.StartEcho(inet.NS, netip.AddrPortFrom(inet.IP, 7777))
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	server := echo.Addr

	err = lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		seen, err := lab.SourceSeenBy(ctx, pod.NS, server)
		if err != nil {
			return fmt.Errorf("no answer from %s: %w", server, err)
		}
		if seen != node.IP() {
			return fmt.Errorf("the internet saw %s, want the node's %s", seen, node.IP())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("natOutgoing on: %v", err)
	}
	t.Logf("natOutgoing on: %s reached %s as %s", pod.Name, server, node.IP())

	pool, err = l.Client.IPPools().Get(ctx, lab.DefaultPoolName)
	if err != nil {
		t.Fatal(err)
	}
	pool.Spec.NATOutgoing = false
	if _, err := l.Client.IPPools().Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// Without NAT the internet cannot answer (nothing routes the pod range back), so the check is
	// what the server saw, not the reply.
	err = lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		_ = lab.SendUDP(pod.NS, server)
		if echo.Saw(pod.IP) {
			return nil
		}
		return fmt.Errorf("the internet has not seen %s yet (saw %v)", pod.IP, echo.Sources())
	})
	if err != nil {
		t.Fatalf("natOutgoing off: %v", err)
	}
	t.Logf("natOutgoing off: the internet saw the pod's own %s", pod.IP)
}
