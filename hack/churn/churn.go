// Package churn holds the disturbances the fault campaign (hack/chaos) and the soak
// (hack/soak) both inflict on a lab: tabby-node crashed or restarted, kube-apiserver stopped
// and started, a policy created and removed, pods replaced.
package churn

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

// RestartAgent restarts tabby-node on n: a crash (SIGKILL, down for down, then started) or a
// clean restart (SIGTERM, tabby-node's restart-style shutdown, then started at once). It
// returns the instant the agent was started again, and when it is ready.
func RestartAgent(ctx context.Context, n *lab.Node, crash bool, down time.Duration) (time.Time, error) {
	if crash {
		if err := n.Kill(); err != nil {
			return time.Time{}, err
		}
		if err := sleep(ctx, down); err != nil {
			return time.Time{}, err
		}
	} else if err := n.Stop(ctx); err != nil {
		return time.Time{}, err
	}
	started := time.Now()
	return started, n.Start(ctx)
}

// RestartAPIServer stops kube-apiserver with sig (SIGKILL: a crash), keeps it stopped for down
// and starts it on the same port and etcd. It returns the instant it was started again, and
// when it is ready.
func RestartAPIServer(ctx context.Context, l *lab.Lab, sig syscall.Signal, down time.Duration) (time.Time, error) {
	if l.Env == nil {
		return time.Time{}, fmt.Errorf("restart kube-apiserver: the lab uses an external API server")
	}
	if err := l.Env.StopAPIServer(sig); err != nil {
		return time.Time{}, err
	}
	if err := sleep(ctx, down); err != nil {
		return time.Time{}, err
	}
	started := time.Now()
	if err := l.Env.StartAPIServer(ctx); err != nil {
		return started, fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return started, nil
}

// TogglePolicy creates np, or deletes it if a policy of its name exists; it tells which.
func TogglePolicy(ctx context.Context, l *lab.Lab, np *networkingv1.NetworkPolicy) (created bool, err error) {
	nps := l.Kube.NetworkingV1().NetworkPolicies(np.Namespace)
	err = nps.Delete(ctx, np.Name, metav1.DeleteOptions{})
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete NetworkPolicy %s: %w", np.Name, err)
	}
	if _, err := nps.Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return false, fmt.Errorf("create NetworkPolicy %s: %w", np.Name, err)
	}
	return true, nil
}

// ReplacePods deletes (CNI DEL, then the object) every pod of the lab whose name starts with
// prefix and adds specs in their place.
func ReplacePods(ctx context.Context, l *lab.Lab, prefix string, specs []lab.PodSpec) error {
	for _, p := range l.Pods() {
		if strings.HasPrefix(p.Name, prefix) {
			if err := l.DeletePod(ctx, p.Key()); err != nil {
				return fmt.Errorf("delete pod %s: %w", p.Key(), err)
			}
		}
	}
	if _, err := l.AddPods(ctx, specs...); err != nil {
		return fmt.Errorf("add pods: %w", err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
