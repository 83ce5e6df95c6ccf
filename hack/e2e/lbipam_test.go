package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/testwait"
)

// TestLoadBalancerIPAM: tabby-node processes assign LoadBalancer addresses, one at a time. The
// node holding the Lease gives a Service its address; killed (it hands nothing back), another
// node takes the Lease once it expires, rebuilds from the Services' status and gives a new
// Service another address, while the first keeps its own.
func TestLoadBalancerIPAM(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 4*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(2)...)
	if _, err := l.Client.IPPools().Create(ctx, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "lb-e2e"},
		Spec: v1.IPPoolSpec{CIDR: "203.0.113.240/29", AllowedUses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Client.IPPools().Delete(context.Background(), "lb-e2e", metav1.DeleteOptions{}) })
	createLB := func(name string) {
		t.Helper()
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
		if _, err := l.Client.Services("default").Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Client.Services("default").Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	ingress := func(name string) string {
		s, err := l.Client.Services("default").Get(ctx, name)
		if err != nil || len(s.Status.LoadBalancer.Ingress) != 1 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
	createLB("web")
	testwait.Until(t, "web to get 203.0.113.240", time.Minute, func() bool { return ingress("web") == "203.0.113.240" })

	lease, err := l.Client.Leases(lab.Namespace).Get(ctx, "tabby-lbipam")
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("Lease: %+v %v", lease, err)
	}
	var leader, other *lab.Node
	for _, n := range nodes {
		if n.Name == *lease.Spec.HolderIdentity {
			leader = n
		} else {
			other = n
		}
	}
	if leader == nil {
		t.Fatalf("the Lease is held by %q, no node of the lab", *lease.Spec.HolderIdentity)
	}
	// The gauges follow the reconcile that wrote the address (and its event): wait for them.
	var m string
	testwait.Until(t, "the leader's metrics to count the address", 30*time.Second, func() bool {
		m, err = leader.Metrics(ctx)
		return err == nil && strings.Contains(m, "tabby_lbipam_leader 1") && strings.Contains(m, `tabby_lbipam_addresses_in_use{pool="lb-e2e"} 1`)
	})
	start := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	createLB("web2")
	var got string
	testwait.Until(t, "web2 to get an address from the node left", 2*time.Minute, func() bool { got = ingress("web2"); return got != "" })
	t.Logf("%s killed; %s took over and assigned %s in %s", leader.Name, other.Name, got, time.Since(start).Round(time.Millisecond))
	if got == "203.0.113.240" || ingress("web") != "203.0.113.240" {
		t.Fatalf("after the takeover web has %q and web2 %q: an address handed out twice or lost", ingress("web"), got)
	}
	testwait.Until(t, other.Name+"'s metrics to say it leads", 30*time.Second, func() bool {
		m, err = other.Metrics(ctx)
		return err == nil && strings.Contains(m, "tabby_lbipam_leader 1")
	})
}
