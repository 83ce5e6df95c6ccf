package chart_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/lease"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/policystatus"
)

// With only what the chart grants tabby-node's service account, on an API server that
// enforces RBAC, the policy status writer takes its Lease and writes an AdminNetworkPolicy's
// conditions.
func TestNodeMayWritePolicyStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t, testenv.Options{SkipCRDs: true})
	ctx := context.Background()
	helm(t, "install", "tabby", ".", "--kubeconfig="+env.Kubeconfig, "--namespace", "tabby-system", "--create-namespace")

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:tabby-system:tabby-node"}
	sa, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AdminNetworkPolicies().Create(ctx, &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac"},
		Spec: anpv1alpha1.AdminNetworkPolicySpec{Priority: 3, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = lease.Run(runCtx, lease.Config{Client: sa, Namespace: "tabby-system", Name: "tabby-policy-status", Identity: "node-a", Logger: slog.Default()},
			func(ctx context.Context) {
				if err := policystatus.Run(ctx, policystatus.Config{Client: sa, Logger: slog.Default()}); err != nil {
					t.Errorf("policy status: %v", err)
				}
			})
	}()
	defer func() { stop(); <-done }()
	testwait.Until(t, "the AdminNetworkPolicy's conditions, written as tabby-node", time.Minute, func() bool {
		o, err := env.Client.AdminNetworkPolicies().Get(ctx, "rbac")
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(o.Status.Conditions, policy.ConditionAccepted)
		return c != nil && c.Status == metav1.ConditionTrue
	})
}
