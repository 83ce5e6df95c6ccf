package app

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/netpol"
)

// podLabel names each demo pod, for the demo's NetworkPolicy to select.
const podLabel = "tabby.dev/demo-pod"

// denyInterval is how often the demo's denied and allowed pings go.
const denyInterval = 5 * time.Second

// startDenied gives the flow log something to show: a NetworkPolicy lets only the first pod
// reach the last, and every few seconds the second pod pings the last (denied) and the first
// does (allowed), until ctx ends. It prints what it does; it needs three pods.
func startDenied(ctx context.Context, w io.Writer, l *lab.Lab, pods []*lab.Pod) error {
	if len(pods) < 3 {
		return nil
	}
	allowed, denied, target := pods[0], pods[1], pods[len(pods)-1]
	name := fmt.Sprintf("%s-from-%s", target.Name, allowed.Name)
	np := netpol.Policy(target.Namespace, name, netpol.Labels(podLabel, target.Name)).
		Ingress(netpol.From(netpol.Pods(netpol.Labels(podLabel, allowed.Name)))).P()
	if _, err := l.Kube.NetworkingV1().NetworkPolicies(target.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the demo's NetworkPolicy %s/%s: %w", target.Namespace, name, err)
	}
	go func() {
		t := time.NewTicker(denyInterval)
		defer t.Stop()
		for {
			// The outcome is the point: each ping shows in the flow log with its verdict.
			_ = lab.Ping(ctx, denied.NS, target.IP)
			_ = lab.Ping(ctx, allowed.NS, target.IP)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	fmt.Fprintf(w, "\nNetworkPolicy %s/%s lets only %s reach %s: every %s, %s pings %s (denied) and %s does (allowed)\n",
		target.Namespace, name, allowed.Name, target.Name, denyInterval, denied.Name, target.Name, allowed.Name)
	return nil
}
