package chart_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/observe"
	"github.com/tabbynet/tabby/typha/auth"
)

// observe.enabled (the default): tabby-node serves the endpoint on its port with the chart's
// certificate, which verifies against the Secret's ca.crt for the name readers ask for; the
// Secret carries the label readers find it by. Off: no flag, no Secret, no role.
func TestTemplateObserve(t *testing.T) {
	objs := objects(t, helm(t, "template", "tabby", ".", "--namespace", "kube-system"))
	ds := decode[appsv1.DaemonSet](t, objs, "DaemonSet/tabby-node")
	c := ds.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--observe-addr=:9095", "--observe-tls-cert-file=/etc/tabby/observe-tls/tls.crt", "--observe-tls-key-file=/etc/tabby/observe-tls/tls.key"} {
		if !strings.Contains(args, want) {
			t.Errorf("tabby-node args lack %s: %s", want, args)
		}
	}
	sec := decode[corev1.Secret](t, objs, "Secret/tabby-node-observe-tls")
	if sel := observe.CASecretSelector; !strings.Contains(sel, "tabby.dev/info="+sec.Labels["tabby.dev/info"]) || sec.Labels["app.kubernetes.io/name"] != "tabby" {
		t.Errorf("Secret labels %v do not match the readers' selector %s", sec.Labels, sel)
	}
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(sec.Data["ca.crt"])
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: observe.ServerName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate against ca.crt: %v", err)
	}
	role := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/tabby-observer")
	if r := role.Rules[0]; r.APIGroups[0] != observe.FlowsResource.Group || strings.Join(r.Resources, ",") != observe.FlowsResource.Resource+","+observe.BGPResource.Resource || r.Verbs[0] != observe.Verb {
		t.Errorf("tabby-observer rules %+v", role.Rules)
	}
	off := helm(t, "template", "tabby", ".", "--namespace", "kube-system", "--set", "observe.enabled=false")
	if strings.Contains(off, "observe") {
		t.Errorf("observe.enabled=false renders the endpoint")
	}
}

// With only what the chart grants tabby-node, on an API server that enforces RBAC, the
// endpoint's reviewer lets a token bound to tabby-observer get flows and bgpstatuses, and
// refuses one that is not.
func TestObserverRBAC(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t, testenv.Options{SkipCRDs: true})
	ctx := context.Background()
	helm(t, "install", "tabby", ".", "--kubeconfig="+env.Kubeconfig, "--namespace", "tabby-system", "--create-namespace")
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		t.Helper()
		if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	viewer, other := token("viewer"), token("other")
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer-observes"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "tabby-observer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "viewer", Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:tabby-system:tabby-node"}
	r, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []struct{ name string }{{observe.FlowsResource.Resource}, {observe.BGPResource.Resource}} {
		gvr := observe.FlowsResource
		gvr.Resource = res.name
		if err := r.AuthorizeVerbs(ctx, viewer, gvr, observe.Verb); err != nil {
			t.Errorf("a tabby-observer token, %s: %v", res.name, err)
		}
		if err := r.AuthorizeVerbs(ctx, other, gvr, observe.Verb); !apierrors.IsForbidden(err) {
			t.Errorf("an unbound token, %s: %v, want forbidden", res.name, err)
		}
	}
	if err := r.AuthorizeVerbs(ctx, "not-a-token", observe.FlowsResource, observe.Verb); !apierrors.IsUnauthorized(err) {
		t.Errorf("a made-up token: %v, want unauthorized", err)
	}
}
