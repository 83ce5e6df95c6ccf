package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/trim"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/testenv"
)

type recorder struct {
	mu   sync.Mutex
	msgs []any
}

func (r *recorder) send(msg any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
}

// waitFor returns the first message (after those already seen) for which match is true.
func (r *recorder) waitFor(t *testing.T, what string, match func(any) bool) any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		i := slices.IndexFunc(r.msgs, match)
		var m any
		if i >= 0 {
			m = r.msgs[i]
		}
		r.mu.Unlock()
		if i >= 0 {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Fatalf("no %s within 20s; messages: %v", what, r.msgs)
	return nil
}

// The watcher turns the real API server's Pods, Namespaces and NetworkPolicies into felix
// messages: what policy needs of each (labels, named ports, host network), the removals, and
// PolicyInSync only once the objects that existed at start have all been sent.
func TestPolicyWatcher(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := env.Kube
	mustNS := func(name string, labels map[string]string) {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustNS("prod", map[string]string{"team": "a"})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"big": "dropped"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x", Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 9000},
		}}}},
	}
	if _, err := kube.CoreV1().Pods("prod").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: "prod"}, Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := kube.NetworkingV1().NetworkPolicies("prod").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	m := NewMetrics(prometheus.NewRegistry())
	w := NewPolicyWatcher(env.Client, rec.send, slog.Default(), m)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	rec.waitFor(t, "PolicyInSync", func(m any) bool { _, ok := m.(felix.PolicyInSync); return ok })
	rec.mu.Lock()
	before := slices.Clone(rec.msgs)
	rec.mu.Unlock()
	var sawPod, sawNS, sawPolicy bool
	for _, m := range before {
		switch u := m.(type) {
		case felix.PodUpdate:
			if u.Pod.Key == (policy.Key{Namespace: "prod", Name: "web"}) {
				sawPod = true
				want := []policy.NamedPort{{Name: "http", Protocol: "TCP", Port: 8080}, {Name: "dns", Protocol: "UDP", Port: 53}}
				if !slices.Equal(u.Pod.NamedPorts, want) || u.Pod.Labels["app"] != "web" {
					t.Errorf("pod message %+v, want named ports %v (the unnamed one dropped) and its labels", u.Pod, want)
				}
			}
		case felix.NamespaceUpdate:
			sawNS = sawNS || (u.Namespace.Name == "prod" && u.Namespace.Labels["team"] == "a")
		case felix.NetworkPolicyUpdate:
			sawPolicy = sawPolicy || u.Policy.Name == "deny"
		}
	}
	if !sawPod || !sawNS || !sawPolicy {
		t.Fatalf("before PolicyInSync: pod %v namespace %v policy %v; messages %v", sawPod, sawNS, sawPolicy, before)
	}

	// Relabel, then delete: each is one message.
	pod.Labels = map[string]string{"app": "api"}
	got, err := kube.CoreV1().Pods("prod").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Labels = pod.Labels
	if _, err := kube.CoreV1().Pods("prod").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "relabelled pod", func(m any) bool {
		u, ok := m.(felix.PodUpdate)
		return ok && u.Pod.Labels["app"] == "api"
	})
	if err := kube.NetworkingV1().NetworkPolicies("prod").Delete(ctx, "deny", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "policy removal", func(m any) bool {
		u, ok := m.(felix.NetworkPolicyRemove)
		return ok && u.Key == policy.Key{Namespace: "prod", Name: "deny"}
	})
	zero := int64(0)
	if err := kube.CoreV1().Pods("prod").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "pod removal", func(m any) bool {
		u, ok := m.(felix.PodRemove)
		return ok && u.Key == policy.Key{Namespace: "prod", Name: "web"}
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(fmt.Errorf("watcher: %w", err))
	}
	// Every event the watcher turned into a message is counted: the pod's add, update and
	// delete at least (other tests' pods may add to it), the policy's add and delete.
	if n := testutil.ToFloat64(m.events.WithLabelValues("pods")); n < 3 {
		t.Errorf("pod events counted: %v, want at least 3", n)
	}
	if n := testutil.ToFloat64(m.events.WithLabelValues("networkpolicies")); n < 2 {
		t.Errorf("policy events counted: %v, want at least 2", n)
	}
}

// What tabby-typha sends of a pod (trim.Pod) is all NetworkPolicy reads of it: the policy view of
// the compact pod is the full pod's.
func TestCompactPodKeepsWhatPolicyReads(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{NodeName: "n1", HostNetwork: true, Containers: []corev1.Container{
			{Name: "c", Image: "web:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}},
			{Name: "side", Image: "side:1"}}},
		Status: corev1.PodStatus{PodIP: "10.244.0.7"},
	}
	if got, want := PolicyPod(trim.Pod(p)), PolicyPod(p); !reflect.DeepEqual(got, want) {
		t.Errorf("compact pod reads as %+v, want %+v", got, want)
	}
}
