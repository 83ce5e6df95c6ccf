package felix

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/felix/policy"
)

// The benchmarks below add hack/bench/policy's admin tier to the cluster of benchManager: 100
// AdminNetworkPolicies, priorities spread, each selecting the app-(k%20) pods of a team's
// namespace with a Deny, an Allow on the named port and a Pass; then one more is created.

const benchAdmins = 100

// benchTeams selects every namespace of the bench cluster: all 1,000 pods.
var benchTeams = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}}

func benchAdmin(name string, priority int32, subject policy.AdminSubject, ingress ...policy.AdminRule) *policy.AdminPolicy {
	return &policy.AdminPolicy{Kind: policy.KindANP, Tier: policy.TierAdmin, Name: name, Priority: priority, ResourceVersion: "1", Subject: subject, Ingress: ingress}
}

func benchAdminManager(b *testing.B) (*policyManager, func()) {
	m, apply := benchManager(b)
	team := func(i int) *metav1.LabelSelector { return labelSel("team", "t"+strconv.Itoa(i%benchNamespaces)) }
	for k := range benchAdmins {
		subject := policy.AdminSubject{Pods: &policy.NamespacedPods{NamespaceSelector: *team(k), PodSelector: *labelSel("app", "app-"+strconv.Itoa(k%20))}}
		m.OnUpdate(AdminPolicyUpdate{Policy: benchAdmin("anp-"+strconv.Itoa(k), int32(10+9*k), subject,
			policy.AdminRule{Action: policy.ActionDeny, Peers: []policy.AdminPeer{{Namespaces: team(k + 2)}}, Ports: []policy.AdminPort{{Protocol: "TCP", Port: 22}}},
			policy.AdminRule{Action: policy.ActionAllow, Peers: []policy.AdminPeer{{Pods: &policy.NamespacedPods{NamespaceSelector: *benchTeams, PodSelector: *labelSel("tier", "db")}}}, Ports: []policy.AdminPort{{Name: "http"}}},
			policy.AdminRule{Action: policy.ActionPass, Peers: []policy.AdminPeer{{Namespaces: team(k + 1)}}, AllPorts: true},
		)})
	}
	apply()
	return m, apply
}

// benchAdminCreate creates an AdminNetworkPolicy of subject that lets team t1 in on port 80;
// it is removed again outside the measurement.
func benchAdminCreate(b *testing.B, subject policy.AdminSubject) {
	m, apply := benchAdminManager(b)
	for i := 0; b.Loop(); i++ {
		p := benchAdmin("measured-"+strconv.Itoa(i), 950, subject,
			policy.AdminRule{Action: policy.ActionAllow, Peers: []policy.AdminPeer{{Namespaces: labelSel("team", "t1")}}, Ports: []policy.AdminPort{{Protocol: "TCP", Port: 80}}})
		m.OnUpdate(AdminPolicyUpdate{Policy: p})
		apply()
		b.StopTimer()
		m.OnUpdate(AdminPolicyRemove{Key: p.Key()})
		apply()
		b.StartTimer()
	}
}

// An AdminNetworkPolicy selecting all 1,000 pods: every endpoint of this node gets new
// chains.
func BenchmarkAdminPolicyCreateAllPods(b *testing.B) {
	benchAdminCreate(b, policy.AdminSubject{Namespaces: benchTeams})
}

// An AdminNetworkPolicy selecting the 50 app-1 pods, 3 of them on this node.
func BenchmarkAdminPolicyCreateFewPods(b *testing.B) {
	benchAdminCreate(b, policy.AdminSubject{Pods: &policy.NamespacedPods{NamespaceSelector: *labelSel("team", "t1"), PodSelector: *labelSel("app", "app-1")}})
}
