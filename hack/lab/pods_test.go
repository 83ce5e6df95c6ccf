package lab

import (
	"context"
	"maps"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStubLabPodsInNamespaces: pods in their own Kubernetes namespaces with labels and named
// container ports, as NetworkPolicy tests need them: the Pod objects carry what the spec says
// (and spec.nodeName), the namespace is made with its labels, relabels reach the API, the
// probe servers answer over TCP and UDP from the moment the CNI ADD returns, a closed port
// refuses, and deleting the pod closes its servers.
func TestStubLabPodsInNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and the control plane (skipped under -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := New(ctx, Options{Stub: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(l.Diagnostics(context.Background()))
		}
		_ = l.Close(context.Background())
	})
	if _, err := l.AddNodes(ctx, NodeSpec{Name: "node-1"}, NodeSpec{Name: "node-2"}); err != nil {
		t.Fatal(err)
	}
	if err := l.EnsureNamespace(ctx, "x", map[string]string{"ns": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := l.EnsureNamespace(ctx, "x", map[string]string{"env": "prod"}); err != nil {
		t.Fatal(err)
	}
	ports := []corev1.ContainerPort{
		{Name: "web", ContainerPort: 80, Protocol: corev1.ProtocolTCP},
		{Name: "dns", ContainerPort: 81, Protocol: corev1.ProtocolUDP},
		{Name: "sig", ContainerPort: 80, Protocol: corev1.ProtocolSCTP},
	}
	var reachedAt time.Duration
	onAdded := func(p *Pod) {
		// The server listens before the ADD: the first probe after it is answered.
		start := time.Now()
		if err := Probe(ctx, p.NS, netip.AddrPortFrom(p.IP, 80), corev1.ProtocolTCP, time.Second); err != nil {
			t.Errorf("probe of %s from itself the moment its ADD returned: %v", p.Key(), err)
		}
		reachedAt = time.Since(start)
	}
	pods, err := l.AddPods(ctx,
		PodSpec{Name: "a", Namespace: "x", Node: "node-1", Labels: map[string]string{"pod": "a"}, Ports: ports, Serve: true, OnAdded: onAdded},
		PodSpec{Name: "a", Namespace: "y", Node: "node-2", Labels: map[string]string{"pod": "a"}, Ports: ports, Serve: true},
		PodSpec{Name: "plain", Node: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	xa, ya, plain := pods[0], pods[1], pods[2]
	t.Logf("x/a answered its own probe %s after its ADD returned", reachedAt)
	if xa.Key() != "x/a" || ya.Key() != "y/a" || plain.Key() != "plain" || xa.NS == ya.NS {
		t.Fatalf("keys %s %s %s, netns %s %s", xa.Key(), ya.Key(), plain.Key(), xa.NS, ya.NS)
	}
	if l.Pod("x/a") != xa || l.Pod("plain") != plain {
		t.Fatal("Pod by key")
	}

	obj, err := l.Kube.CoreV1().Pods("x").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Spec.NodeName != "node-1" || obj.Labels["pod"] != "a" || len(obj.Spec.Containers[0].Ports) != 3 || obj.Spec.Containers[0].Ports[1].Name != "dns" || obj.Status.PodIP != xa.IP.String() {
		t.Errorf("Pod x/a: nodeName %q labels %v ports %v podIP %q", obj.Spec.NodeName, obj.Labels, obj.Spec.Containers[0].Ports, obj.Status.PodIP)
	}
	if obj, err := l.Kube.CoreV1().Pods(PodNamespace).Get(ctx, "plain", metav1.GetOptions{}); err != nil || obj.Labels["app"] != "tabby-lab" {
		t.Errorf("a pod without namespace or labels: %v, labels %v", err, obj.Labels)
	}
	nsl, err := l.NamespaceLabels(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if nsl["ns"] != "x" || nsl["env"] != "prod" || nsl["kubernetes.io/metadata.name"] != "x" {
		t.Errorf("namespace x labels %v: want ns=x, env=prod (merged) and the server's name label", nsl)
	}
	if _, err := l.NamespaceLabels(ctx, "y"); err != nil {
		t.Errorf("namespace y not made for its pod: %v", err)
	}

	if err := l.SetPodLabels(ctx, "x/a", map[string]string{"pod": "a", "tier": "web"}); err != nil {
		t.Fatal(err)
	}
	if obj, _ := l.Kube.CoreV1().Pods("x").Get(ctx, "a", metav1.GetOptions{}); obj.Labels["tier"] != "web" || xa.Labels()["tier"] != "web" {
		t.Errorf("relabel of x/a: object %v, lab %v", obj.Labels, xa.Labels())
	}
	if err := l.SetNamespaceLabels(ctx, "x", map[string]string{"ns": "x"}); err != nil {
		t.Fatal(err)
	}
	if nsl, _ := l.NamespaceLabels(ctx, "x"); !maps.Equal(nsl, map[string]string{"ns": "x", "kubernetes.io/metadata.name": "x"}) {
		t.Errorf("relabel of namespace x: %v", nsl)
	}

	mctx, mcancel := context.WithTimeout(ctx, 20*time.Second)
	defer mcancel()
	if m := PingMatrix(mctx, l.PodEndpoints(), l.PodEndpoints()); len(m.Failures()) > 0 {
		t.Fatalf("unreachable: %v\n%s", m.Failures(), m)
	}
	for _, c := range []struct {
		port  uint16
		proto corev1.Protocol
	}{{80, corev1.ProtocolTCP}, {81, corev1.ProtocolUDP}} {
		for i := range 3 {
			if err := Probe(ctx, xa.NS, netip.AddrPortFrom(ya.IP, c.port), c.proto, time.Second); err != nil {
				t.Errorf("probe %d x/a -> y/a %d/%s: %v", i, c.port, c.proto, err)
			}
		}
	}
	start := time.Now()
	if err := Probe(ctx, xa.NS, netip.AddrPortFrom(ya.IP, 81), corev1.ProtocolTCP, time.Second); err == nil || time.Since(start) > 500*time.Millisecond {
		t.Errorf("probe of a port nobody serves: %v after %s, want a quick refusal", err, time.Since(start))
	}
	if err := Probe(ctx, xa.NS, netip.AddrPortFrom(ya.IP, 80), corev1.ProtocolSCTP, time.Second); err == nil {
		t.Error("an SCTP probe succeeded: the lab has no SCTP client")
	}
	if ok, why := SCTPSupport(); ok || why == "" {
		t.Errorf("SCTPSupport() = %v, %q", ok, why)
	}

	if err := l.DeletePod(ctx, "y/a"); err != nil {
		t.Fatal(err)
	}
	ya.mu.Lock()
	open := ya.servers != nil
	ya.mu.Unlock()
	if open {
		t.Error("y/a's servers still open after DeletePod")
	}
	if err := l.DeletePod(ctx, "x/a"); err != nil {
		t.Fatal(err)
	}
}
