package tabbyctl

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/tabbynet/tabby/felix/policy"
)

// The admin policies of a pod are listed with what their status conditions would say.
func TestAdminText(t *testing.T) {
	mk := func(name string, prio int32, domains bool) *policy.AdminPolicy {
		o := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
			Priority: prio, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}
		if domains {
			o.Spec.Egress = []anpv1alpha1.AdminNetworkPolicyEgressRule{{Action: "Allow",
				To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{DomainNames: []anpv1alpha1.DomainName{"example.com"}}}}}
		}
		return policy.FromANP(o)
	}
	in := policy.Input{Admin: map[policy.AdminKey]*policy.AdminPolicy{}}
	for _, p := range []*policy.AdminPolicy{mk("a", 1, false), mk("b", 2, true), mk("c", 2, false)} {
		in.Admin[p.Key()] = p
	}
	got := adminText(in, []policy.AdminKey{{Kind: policy.KindANP, Name: "a"}, {Kind: policy.KindANP, Name: "b"}, {Kind: policy.KindANP, Name: "c"}})
	want := "AdminNetworkPolicy/a (priority 1), then AdminNetworkPolicy/b (priority 2, not accepted: UnsupportedField, priority shared), then AdminNetworkPolicy/c (priority 2, priority shared)"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
