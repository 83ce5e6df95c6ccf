package chart_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/lease"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/node/installcni"
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

// The CNI plugins' kubeconfig, written by install-cni with only what the chart grants, still
// authenticates after the tabby-node pod whose token wrote it is deleted: a rolling upgrade
// deletes the old pod before the new one writes a kubeconfig, and pods started in that gap go
// to the API server with it.
func TestCNIKubeconfigOutlivesThePod(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t, testenv.Options{SkipCRDs: true})
	ctx := context.Background()
	const ns, sa = "tabby-system", "tabby-node"
	helm(t, "install", "tabby", ".", "--kubeconfig="+env.Kubeconfig, "--namespace", ns, "--create-namespace")

	// The pod's projected token, as kubelet would mount it: bound to the pod.
	pod, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tabby-node-old"},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: sa, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "tabby-node", Image: "tabby"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	saDir, netDir := filepath.Join(dir, "sa"), filepath.Join(dir, "net.d")
	for _, d := range []string{saDir, netDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := os.ReadFile(env.ServingCert)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(saDir, "token"), []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(saDir, "ca.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	o := installcni.Defaults()
	o.NodeName, o.APIServer, o.ServiceAccountDir, o.HostNetDir = "node-a", env.URL, saDir, netDir
	if err := installcni.WriteKubeconfig(ctx, o); err != nil {
		t.Fatal(err)
	}
	whoami := func(cfg *rest.Config) (string, error) {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return "", err
		}
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return r.Status.UserInfo.Username, nil
	}
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	// What the kubeconfig must not hold: the pod's token is refused once the pod is gone.
	podCfg := &rest.Config{Host: env.URL, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	testwait.Until(t, "the deleted pod's token refused", 30*time.Second, func() bool {
		_, err := whoami(podCfg)
		return apierrors.IsUnauthorized(err)
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(netDir, o.KubeconfigName))
	if err != nil {
		t.Fatal(err)
	}
	user, err := whoami(cfg)
	if want := "system:serviceaccount:" + ns + ":" + sa; err != nil || user != want {
		t.Fatalf("the CNI kubeconfig after its pod was deleted: user %q, %v; want %s", user, err, want)
	}
}
