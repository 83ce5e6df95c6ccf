package gc_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/gc"
)

// TestRealDeletedNode: against a real API server, a deleted node's addresses, tunnel address,
// blocks and affinities are released by the first live node's collector; a pod still bound to it
// keeps its address (in a block without affinity) until it goes too. Ends with a clean check.
func TestRealDeletedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server")
	}
	env := testenv.Start(t)
	ctx := context.Background()
	store := ipam.NewKubeStore(env.Client)
	for _, n := range []string{"gc-a", "gc-b"} {
		if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.1/24"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pool := &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "gc"}, Spec: v1.IPPoolSpec{CIDR: "10.244.40.0/24", BlockSize: 28, IPIPMode: v1.IPIPModeAlways}}
	if _, err := env.Client.IPPools().Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pod := func(name, node string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		if _, err := env.Kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	delPod := func(name string) {
		t.Helper()
		zero := int64(0)
		if err := env.Kube.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	// node-b's agent: its pods, and its tunnel address.
	allocB := ipam.New(store, ipam.Config{})
	var podIPs []netip.Addr
	for i, name := range []string{"b-1", "b-2", "b-stays"} {
		pod(name, "gc-b")
		as, err := allocB.Assign(ctx, ipam.Request{Handle: fmt.Sprintf("net.c%d", i), Node: "gc-b", Namespace: "default", Pod: name})
		if err != nil {
			t.Fatal(err)
		}
		podIPs = append(podIPs, as.IP)
	}
	tunnel, needed, err := allocB.EnsureTunnelAddress(ctx, ipam.IPIPTunnel, "gc-b")
	if err != nil || !needed {
		t.Fatal(needed, err)
	}
	if r, err := ipam.Check(ctx, store); err != nil || r.Problems() != 0 {
		t.Fatalf("before: %+v %v", r, err)
	}

	// node-b leaves: agent gone, Node deleted, its pods deleted except one (not yet).
	if err := env.Kube.CoreV1().Nodes().Delete(ctx, "gc-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	delPod("b-1")
	delPod("b-2")
	r, err := ipam.Check(ctx, store)
	if err != nil || len(r.BlocksOfDeletedNodes) != 1 || len(r.AffinitiesOfDeletedNodes) != 1 || len(r.TunnelsOfDeletedNodes) != 1 || len(r.WithoutPod) != 2 {
		t.Fatalf("check must report node-b's leftovers: %+v %v", r, err)
	}

	c := gc.New(store, ipam.New(store, ipam.Config{}), gc.Config{Node: "gc-a", GracePeriod: 300 * time.Millisecond})
	poll := func(what string, done func(ipam.CheckReport) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := c.RunOnce(ctx); err != nil {
				t.Logf("gc round: %v", err) // a lost compare-and-swap is retried next round
			}
			r, err := ipam.Check(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			if done(r) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached: %+v", what, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	poll("node-b released", func(r ipam.CheckReport) bool { return r.Problems() == 0 })
	for _, ip := range []netip.Addr{podIPs[0], podIPs[1], tunnel} {
		if o, err := ipam.WhoHas(ctx, store, ip); err == nil {
			t.Errorf("%s still held: %+v", ip, o)
		}
	}
	o, err := ipam.WhoHas(ctx, store, podIPs[2])
	if err != nil || o.Pod != "b-stays" || o.BlockNode != "" {
		t.Fatalf("the remaining pod's address must stay, in a block without affinity: %+v %v", o, err)
	}
	affs, _ := env.Client.BlockAffinities().List(ctx, metav1.ListOptions{})
	for _, a := range affs.Items {
		if a.Spec.Node == "gc-b" {
			t.Errorf("affinity %s left", a.Name)
		}
	}
	hs, _ := env.Client.IPAMHandles().List(ctx, metav1.ListOptions{})
	for _, h := range hs.Items {
		if h.Spec.HandleID == names.TunnelHandle("gc-b") || strings.HasPrefix(h.Spec.HandleID, "net.c0") || strings.HasPrefix(h.Spec.HandleID, "net.c1") {
			t.Errorf("handle %s left", h.Spec.HandleID)
		}
	}

	// The last pod goes: its address and then the empty block without affinity.
	delPod("b-stays")
	poll("last pod's address and block released", func(r ipam.CheckReport) bool {
		bl, err := env.Client.IPAMBlocks().List(ctx, metav1.ListOptions{})
		return err == nil && len(bl.Items) == 0 && r.Problems() == 0
	})
}
