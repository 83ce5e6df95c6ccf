package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/hack/lab"
)

// TestTypha: three tabby-nodes watch through two tabby-typha replicas. Pods are wired and reached
// and every node holds exactly its routes; every agent's watch of every cluster-wide kind is on a
// replica. One replica is killed: every watch moves to the other. The other is killed too: the
// agents watch the API server directly. One is started again: every watch returns to it within
// 90 s (the agents ask every 30 to 45 s), not when the direct watches time out. At each stage a
// pod added then is wired and reached, and a NetworkPolicy written then isolates it and, deleted,
// lets it be reached again: the watches work on whatever path the agents are on.
func TestTypha(t *testing.T) {
	l := startLab(t, lab.Options{Typha: 2})
	ctx := testCtx(t, 6*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(3)...)
	pods := addPodsPerNode(t, ctx, l, nodes, 1)
	requireReach(t, ctx, "pod to pod", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
	requireRoutes(t, ctx, l, 10*time.Second)
	requireTyphaWatches(t, ctx, l.Typhas, len(nodes), 20*time.Second)
	requireViaTypha(t, ctx, nodes, 1)

	l.Typhas[0].Stop()
	requireTyphaWatches(t, ctx, l.Typhas[1:], len(nodes), 20*time.Second)
	pods = append(pods, addPod(t, ctx, l, "after-one", nodes[2]))
	requireReach(t, ctx, "pod to pod, one replica left", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
	requireRoutes(t, ctx, l, 10*time.Second)
	requireIsolation(t, ctx, l, pods[0], pods[len(pods)-1])
	requireViaTypha(t, ctx, nodes, 1)

	l.Typhas[1].Stop()
	pods = append(pods, addPod(t, ctx, l, "after-both", nodes[1]))
	requireReach(t, ctx, "pod to pod, no replica left", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
	requireRoutes(t, ctx, l, 10*time.Second)
	requireIsolation(t, ctx, l, pods[0], pods[len(pods)-1])
	requireViaTypha(t, ctx, nodes, 0)

	if err := l.Typhas[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	requireTyphaWatches(t, ctx, l.Typhas[:1], len(nodes), 90*time.Second)
	requireViaTypha(t, ctx, nodes, 1)
	pods = append(pods, addPod(t, ctx, l, "after-return", nodes[0]))
	requireReach(t, ctx, "pod to pod, a replica back", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
	requireRoutes(t, ctx, l, 10*time.Second)
	requireIsolation(t, ctx, l, pods[0], pods[len(pods)-1])
}

// requireIsolation writes a NetworkPolicy that denies every ingress to pod to and waits until
// from no longer reaches it; then deletes it and waits until from reaches it again.
func requireIsolation(t *testing.T, ctx context.Context, l *lab.Lab, from, to *lab.Pod) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "isolate-" + to.Name, Namespace: lab.PodNamespace},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": to.Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := l.Kube.NetworkingV1().NetworkPolicies(lab.PodNamespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := lab.Eventually(ctx, 15*time.Second, func(ctx context.Context) error {
		if f := lab.PingMatrix(ctx, []lab.Endpoint{from.Endpoint()}, []lab.Endpoint{to.Endpoint()}).Failures(); len(f) == 0 {
			return fmt.Errorf("%s still reaches %s under %s", from.Name, to.Name, np.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Kube.NetworkingV1().NetworkPolicies(lab.PodNamespace).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	requireReach(t, ctx, "after "+np.Name+" went", []lab.Endpoint{from.Endpoint()}, []lab.Endpoint{to.Endpoint()}, 15*time.Second)
	t.Logf("%s isolated %s, and its deletion let it be reached again", np.Name, to.Name)
}

func addPod(t *testing.T, ctx context.Context, l *lab.Lab, name string, n *lab.Node) *lab.Pod {
	t.Helper()
	p, err := l.AddPod(ctx, lab.PodSpec{Name: name, Node: n.Name, Labels: map[string]string{"app": "tabby-lab", "stage": name}})
	if err != nil {
		t.Fatalf("add pod %s: %v", name, err)
	}
	return p
}

// requireTyphaWatches waits until the replicas serve, between them, agents watches of every kind
// tabby-typha serves: one per agent and kind.
func requireTyphaWatches(t *testing.T, ctx context.Context, replicas []*lab.Typha, agents int, within time.Duration) {
	t.Helper()
	start := time.Now()
	err := lab.Eventually(ctx, within, func(ctx context.Context) error {
		sum := map[string]float64{}
		for _, r := range replicas {
			w, err := r.Watches(ctx)
			if err != nil {
				return err
			}
			for res, n := range w {
				sum[res] += n
			}
		}
		var off []string
		for res := range client.FannedOut {
			if sum[res] != float64(agents) {
				off = append(off, fmt.Sprintf("%s: %v", res, sum[res]))
			}
		}
		if len(off) > 0 {
			return fmt.Errorf("watches on the replicas, want %d of each kind: %s", agents, strings.Join(off, ", "))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("every watch on %d replica(s) after %v", len(replicas), time.Since(start).Round(100*time.Millisecond))
}

// requireViaTypha waits until every agent reports tabby_datastore_via_typha = want.
func requireViaTypha(t *testing.T, ctx context.Context, nodes []*lab.Node, want int) {
	t.Helper()
	line := fmt.Sprintf("tabby_datastore_via_typha %d\n", want)
	for _, n := range nodes {
		err := lab.Eventually(ctx, 10*time.Second, func(ctx context.Context) error {
			m, err := n.Metrics(ctx)
			if err != nil {
				return err
			}
			if !strings.Contains(m, line) {
				return fmt.Errorf("node %s does not report %q", n.Name, strings.TrimSpace(line))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
