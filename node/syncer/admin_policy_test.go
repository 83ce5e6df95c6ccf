package syncer

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/testenv"
)

// The network-policy-api CRDs install on a real API server, which refuses an
// AdminNetworkPolicy or ClusterNetworkPolicy out of range naming the field; the watcher turns AdminNetworkPolicies and
// the BaselineAdminNetworkPolicy and ClusterNetworkPolicies into felix messages, parsed, with their changes and removals,
// and sends PolicyInSync only after those that existed at its start.
func TestPolicyWatcherAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	anps, banps := env.Client.AdminNetworkPolicies(), env.Client.BaselineAdminNetworkPolicies()

	bad := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "too-low"}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: 1001, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}
	_, err := anps.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.priority") {
		t.Fatalf("priority 1001: %v, want Invalid naming spec.priority", err)
	}

	ports := []anpv1alpha1.AdminNetworkPolicyPort{{PortNumber: &anpv1alpha1.Port{Protocol: "TCP", Port: 80}}}
	anp := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "guard"}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: 10, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
		Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{{Name: "no-b", Action: "Deny", Ports: &ports,
			From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "b"}}}}}},
		Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{{Name: "fqdn", Action: "Allow",
			To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{DomainNames: []anpv1alpha1.DomainName{"example.com"}}}}},
	}}
	if _, err := anps.Create(ctx, anp); err != nil {
		t.Fatal(err)
	}
	banp := &anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Egress: []anpv1alpha1.BaselineAdminNetworkPolicyEgressRule{{Action: "Deny",
			To: []anpv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Networks: []anpv1alpha1.CIDR{"203.0.113.0/24"}}}}},
	}}
	if _, err := banps.Create(ctx, banp); err != nil {
		t.Fatal(err)
	}

	cnps := env.Client.ClusterNetworkPolicies()
	badCNP := &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: cnpv1beta1.ClusterNetworkPolicySpec{
		Tier: "Admin", Priority: 1001, Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}
	if _, err := cnps.Create(ctx, badCNP); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.priority") {
		t.Fatalf("ClusterNetworkPolicy priority 1001: %v, want Invalid naming spec.priority", err)
	}
	cnp := &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dns"}, Spec: cnpv1beta1.ClusterNetworkPolicySpec{
		Tier: "Baseline", Priority: 3, Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Egress: []cnpv1beta1.ClusterNetworkPolicyEgressRule{{Action: "Accept",
			To:        []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{Namespaces: &metav1.LabelSelector{}}},
			Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{{UDP: &cnpv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnpv1beta1.Port{Range: &cnpv1beta1.PortRange{Start: 53, End: 54}}}}}}}}}
	if _, err := cnps.Create(ctx, cnp); err != nil {
		t.Fatal(err)
	}

	// A list at resourceVersion 0 (an informer's first) is served from the API server's watch
	// cache, which may not have seen a create yet: wait until it has all three, so that they
	// are what existed when the watcher started.
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, errA := anps.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		b, errB := banps.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		c, errC := cnps.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err := errors.Join(errA, errB, errC); err != nil {
			t.Fatal(err)
		}
		if len(a.Items) == 1 && len(b.Items) == 1 && len(c.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch cache lists %d ANPs, %d BANPs, %d CNPs after 30s, want 1 each", len(a.Items), len(b.Items), len(c.Items))
		}
		time.Sleep(50 * time.Millisecond)
	}

	rec := &recorder{}
	w := NewPolicyWatcher(env.Client, rec.send, slog.Default(), NewMetrics(prometheus.NewRegistry()))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	isAdmin := func(k policy.AdminKey, check func(*policy.AdminPolicy) bool) func(any) bool {
		return func(m any) bool {
			u, ok := m.(felix.AdminPolicyUpdate)
			return ok && u.Policy.Key() == k && check(u.Policy)
		}
	}
	guard := policy.AdminKey{Kind: policy.KindANP, Name: "guard"}
	base := policy.AdminKey{Kind: policy.KindBANP, Name: "default"}
	rec.waitFor(t, "PolicyInSync", func(m any) bool { _, ok := m.(felix.PolicyInSync); return ok })
	rec.mu.Lock()
	var before []any
	for _, m := range rec.msgs {
		if _, ok := m.(felix.PolicyInSync); ok {
			break
		}
		before = append(before, m)
	}
	rec.mu.Unlock()
	var sawANP, sawBANP, sawCNP bool
	for _, m := range before {
		if u, ok := m.(felix.AdminPolicyUpdate); ok {
			p := u.Policy
			switch p.Key() {
			case guard:
				sawANP = true
				if p.Priority != 10 || len(p.Ingress) != 1 || p.Ingress[0].Action != policy.ActionDeny || len(p.Ingress[0].Ports) != 1 || p.Ingress[0].Ports[0].Port != 80 {
					t.Errorf("ANP parsed as %+v", p)
				}
				if len(p.Unsupported) != 1 || !strings.HasPrefix(p.Unsupported[0], "spec.egress[0].to[0].domainNames") {
					t.Errorf("unsupported: %q, want the domainNames peer named", p.Unsupported)
				}
			case policy.AdminKey{Kind: policy.KindCNP, Name: "dns"}:
				sawCNP = true
				if p.Tier != policy.TierBaseline || p.Priority != 3 || len(p.Egress) != 1 || p.Egress[0].Action != policy.ActionAllow ||
					len(p.Egress[0].Ports) != 1 || p.Egress[0].Ports[0] != (policy.AdminPort{Protocol: "UDP", Port: 53, EndPort: 54}) {
					t.Errorf("CNP parsed as %+v", p)
				}
			case base:
				sawBANP = true
				if len(p.Egress) != 1 || len(p.Egress[0].Peers) != 1 || p.Egress[0].Peers[0].Networks[0] != "203.0.113.0/24" {
					t.Errorf("BANP parsed as %+v", p)
				}
			}
		}
	}
	if !sawANP || !sawBANP || !sawCNP {
		t.Fatalf("before PolicyInSync: ANP %v BANP %v CNP %v; messages %v", sawANP, sawBANP, sawCNP, before)
	}

	got, err := anps.Get(ctx, "guard")
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Priority = 20
	if _, err := anps.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "ANP at its new priority", isAdmin(guard, func(p *policy.AdminPolicy) bool { return p.Priority == 20 }))
	if err := anps.Delete(ctx, "guard", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "ANP removal", func(m any) bool { u, ok := m.(felix.AdminPolicyRemove); return ok && u.Key == guard })
	if err := banps.Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "BANP removal", func(m any) bool { u, ok := m.(felix.AdminPolicyRemove); return ok && u.Key == base })
	if err := cnps.Delete(ctx, "dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "CNP removal", func(m any) bool {
		u, ok := m.(felix.AdminPolicyRemove)
		return ok && u.Key == policy.AdminKey{Kind: policy.KindCNP, Name: "dns"}
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watcher: %v", err)
	}
}

// tabbyctl's input reads the admin policies with the rest, and a cluster without the
// network-policy-api CRDs simply has none.
func TestReadPolicyInputAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t)
	ctx := context.Background()
	anp := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "guard"}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: 10, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}
	if _, err := env.Client.AdminNetworkPolicies().Create(ctx, anp); err != nil {
		t.Fatal(err)
	}
	in, err := ReadPolicyInput(ctx, env.Client, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if p := in.Admin[policy.AdminKey{Kind: policy.KindANP, Name: "guard"}]; p == nil || p.Priority != 10 {
		t.Fatalf("admin input %v, want the ANP guard at priority 10", in.Admin)
	}
	ext, err := apiext.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range []string{"adminnetworkpolicies", "baselineadminnetworkpolicies", "clusternetworkpolicies"} {
		if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd+".policy.networking.k8s.io", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		in, err = ReadPolicyInput(ctx, env.Client, "n1")
		if err == nil && len(in.Admin) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("without the CRDs: %v, admin input %v; want no error and none", err, in.Admin)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
