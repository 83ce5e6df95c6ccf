package policy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

func statusANP(name string, prio int32, edit func(*anpv1alpha1.AdminNetworkPolicySpec)) *AdminPolicy {
	spec := anpv1alpha1.AdminNetworkPolicySpec{Priority: prio, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: sel("team=a")},
		Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{{Name: "deny-b", Action: "Deny",
			From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel("team=b")}}}}}
	if edit != nil {
		edit(&spec)
	}
	return FromANP(&anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3}, Spec: spec})
}

func statusCNP(name string, tier cnpv1beta1.Tier, prio int32) *AdminPolicy {
	return FromCNP(&cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, Spec: cnpv1beta1.ClusterNetworkPolicySpec{
		Tier: tier, Priority: prio, Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: sel("team=a")}}})
}

func statusBANP() *AdminPolicy {
	return FromBANP(&anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: sel()}}})
}

func TestAdminConditions(t *testing.T) {
	ports := func(p ...anpv1alpha1.AdminNetworkPolicyPort) *[]anpv1alpha1.AdminNetworkPolicyPort { return &p }
	domains := func(s *anpv1alpha1.AdminNetworkPolicySpec) {
		s.Egress = []anpv1alpha1.AdminNetworkPolicyEgressRule{{Action: "Allow", To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{
			{Networks: []anpv1alpha1.CIDR{"203.0.113.0/24"}}, {DomainNames: []anpv1alpha1.DomainName{"*.example.com"}}}}}
	}
	badPort := func(s *anpv1alpha1.AdminNetworkPolicySpec) {
		s.Ingress[0].Ports = ports(anpv1alpha1.AdminNetworkPolicyPort{PortRange: &anpv1alpha1.PortRange{Protocol: "TCP", Start: 90, End: 80}})
	}
	for _, tc := range []struct {
		name   string
		p      *AdminPolicy
		others []*AdminPolicy
		// want: Accepted's status and reason, PriorityConflict's status, and strings each
		// message holds.
		accepted, reason string
		conflict         metav1.ConditionStatus
		acceptedSays     []string
		conflictSays     []string
	}{
		{name: "enforced as written", p: statusANP("a", 10, nil), others: []*AdminPolicy{statusANP("b", 11, nil), statusBANP()},
			accepted: "True", reason: ReasonAccepted, conflict: "False", conflictSays: []string{"no other admin policy has priority 10"}},
		{name: "domainNames peer", p: statusANP("a", 10, domains),
			accepted: "False", reason: ReasonUnsupported, conflict: "False",
			acceptedSays: []string{`spec.egress[0].to[1].domainNames ["*.example.com"]: not supported; the peer matches nothing`}},
		{name: "inverted port range", p: statusANP("a", 10, badPort),
			accepted: "False", reason: ReasonInvalid, conflict: "False",
			acceptedSays: []string{"spec.ingress[0].ports[0]: end 80: not in 90-65535; the port matches nothing"}},
		{name: "bad selector operator", p: statusANP("a", 10, func(s *anpv1alpha1.AdminNetworkPolicySpec) {
			s.Subject.Namespaces = expr("team", "Bogus", "a")
		}), accepted: "False", reason: ReasonInvalid, conflict: "False", acceptedSays: []string{"spec.subject.namespaces", "Bogus", "the policy selects no pod"}},
		{name: "unsupported and invalid: invalid", p: statusANP("a", 10, func(s *anpv1alpha1.AdminNetworkPolicySpec) { domains(s); badPort(s) }),
			accepted: "False", reason: ReasonInvalid, conflict: "False", acceptedSays: []string{"domainNames", "ports[0]"}},
		{name: "baseline Pass", p: FromBANP(&anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
			Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: sel()},
			Ingress: []anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: "Pass", From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel()}}}}}}),
			accepted: "False", reason: ReasonInvalid, conflict: "False", acceptedSays: []string{"spec.ingress[0].action: Pass is not a baseline action"}},
		{name: "two ANPs, one priority", p: statusANP("b", 10, nil), others: []*AdminPolicy{statusANP("a", 10, nil), statusANP("c", 20, nil)},
			accepted: "True", reason: ReasonAccepted, conflict: "True", conflictSays: []string{"AdminNetworkPolicy/a also has priority 10", "by kind, then name"}},
		{name: "itself in the list", p: statusANP("a", 10, nil), others: []*AdminPolicy{statusANP("a", 10, nil)},
			accepted: "True", reason: ReasonAccepted, conflict: "False"},
		{name: "ANP and admin CNP", p: statusANP("a", 7, nil), others: []*AdminPolicy{statusCNP("x", cnpv1beta1.AdminTier, 7), statusCNP("y", cnpv1beta1.AdminTier, 7)},
			accepted: "True", reason: ReasonAccepted, conflict: "True", conflictSays: []string{"ClusterNetworkPolicy/x, ClusterNetworkPolicy/y also have priority 7"}},
		{name: "tiers apart", p: statusCNP("x", cnpv1beta1.BaselineTier, 7), others: []*AdminPolicy{statusANP("a", 7, nil)},
			accepted: "True", reason: ReasonAccepted, conflict: "False", conflictSays: []string{"no other baseline policy has priority 7"}},
		{name: "baseline CNP beside the BANP", p: statusCNP("x", cnpv1beta1.BaselineTier, 0), others: []*AdminPolicy{statusBANP()},
			accepted: "True", reason: ReasonAccepted, conflict: "True", conflictSays: []string{"BaselineAdminNetworkPolicy/default also has priority 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := AdminConditions(tc.p, append(tc.others, tc.p))
			if len(conds) != 2 || conds[0].Type != ConditionAccepted || conds[1].Type != ConditionPriorityConflict {
				t.Fatalf("conditions: %+v", conds)
			}
			acc, cf := conds[0], conds[1]
			if string(acc.Status) != tc.accepted || acc.Reason != tc.reason {
				t.Errorf("Accepted: %s %s %q, want %s %s", acc.Status, acc.Reason, acc.Message, tc.accepted, tc.reason)
			}
			if cf.Status != tc.conflict {
				t.Errorf("PriorityConflict: %s %q, want %s", cf.Status, cf.Message, tc.conflict)
			}
			for _, c := range conds {
				if c.ObservedGeneration != tc.p.Generation {
					t.Errorf("%s: observedGeneration %d, want %d", c.Type, c.ObservedGeneration, tc.p.Generation)
				}
				if c.Reason == "" || c.Message == "" {
					t.Errorf("%s: no reason or message", c.Type)
				}
			}
			for _, s := range tc.acceptedSays {
				if !strings.Contains(acc.Message, s) {
					t.Errorf("Accepted's message %q does not say %q", acc.Message, s)
				}
			}
			for _, s := range tc.conflictSays {
				if !strings.Contains(cf.Message, s) {
					t.Errorf("PriorityConflict's message %q does not say %q", cf.Message, s)
				}
			}
			// Accepted agrees with what felix compiles: no problem exactly when accepted.
			c := NewCalculator(Input{Admin: map[AdminKey]*AdminPolicy{tc.p.Key(): tc.p}})
			if (len(c.Problems()) == 0) != (acc.Status == metav1.ConditionTrue) {
				t.Errorf("Accepted %s, but felix's problems are %q", acc.Status, c.Problems())
			}
		})
	}
}

// A message names at most maxListed problems, then how many more.
func TestAdminConditionsBounded(t *testing.T) {
	p := statusANP("many", 1, func(s *anpv1alpha1.AdminNetworkPolicySpec) {
		var peers []anpv1alpha1.AdminNetworkPolicyEgressPeer
		for range 25 {
			peers = append(peers, anpv1alpha1.AdminNetworkPolicyEgressPeer{DomainNames: []anpv1alpha1.DomainName{"example.com"}})
		}
		s.Egress = []anpv1alpha1.AdminNetworkPolicyEgressRule{{Action: "Deny", To: peers}}
	})
	msg := AdminConditions(p, nil)[0].Message
	if n := strings.Count(msg, "domainNames"); n != maxListed || !strings.HasSuffix(msg, "(and 15 more)") {
		t.Fatalf("message names %d problems: %q", n, msg)
	}
}
