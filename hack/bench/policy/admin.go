package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/netpol"
)

const (
	adminPolicies = 100
	// Every tenth of the 100 selects web (webAdmins of them): its client's connections walk
	// their rules before NetworkPolicy decides.
	webAdmins = adminPolicies / 10
	// wideAdmins of the 100 select every pod of the real pods' namespaces, both directions.
	wideAdmins = 3
	// measuredPriority is the create → enforced policy's: after every one of the 100, so a
	// connection it allows has walked theirs first.
	measuredPriority = 950
)

// anyTeam selects the bench's namespaces, which hold the 1,000 pods (and nothing else does).
var anyTeam = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}}

// benchAdmins are the 100 AdminNetworkPolicies, priorities spread over 10-901. None changes
// what the real pods' connections get: web's rules do not match its client until the last
// one, a Pass (NetworkPolicy lets it in); the wide ones deny and pass peers no real pod is;
// the rest select made-up pods by app label with peers and ports of every kind.
func benchAdmins() []*anpv1alpha1.AdminNetworkPolicy {
	var out []*anpv1alpha1.AdminNetworkPolicy
	webSeen := 0
	for k := range adminPolicies {
		anp := &anpv1alpha1.AdminNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "anp-" + strconv.Itoa(k)},
			Spec:       anpv1alpha1.AdminNetworkPolicySpec{Priority: int32(10 + 9*k)},
		}
		team := func(i int) *metav1.LabelSelector { return netpol.Labels("team", "t"+strconv.Itoa(i%namespaces)) }
		switch {
		case isWebAdmin(k):
			webSeen++
			passPort := int32(2000 + k)
			if webSeen == webAdmins {
				passPort = 80
			}
			anp.Spec.Subject.Pods = &anpv1alpha1.NamespacedPod{NamespaceSelector: *team(0), PodSelector: *netpol.Labels("app", "web")}
			anp.Spec.Ingress = []anpv1alpha1.AdminNetworkPolicyIngressRule{
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionDeny, ports(tcp(int32(3000+k))), nsPeer(team(3))),
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionAllow, ports(tcp(int32(8080+k))), podPeer(team(2), netpol.Labels("tier", "cache"))),
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionDeny, ports(portRange(9000, int32(9100+k))), podPeer(anyTeam, netpol.Labels("probe", "yes"))),
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionPass, ports(tcp(passPort)), nsPeer(team(1))),
			}
		case isWideAdmin(k):
			anp.Spec.Subject.Namespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"t0", "t1"}}}}
			anp.Spec.Ingress = []anpv1alpha1.AdminNetworkPolicyIngressRule{
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionDeny, ports(tcp(int32(80+k/30))), podPeer(anyTeam, netpol.Labels("probe", "yes"))),
			}
			anp.Spec.Egress = []anpv1alpha1.AdminNetworkPolicyEgressRule{
				egress(anpv1alpha1.AdminNetworkPolicyRuleActionDeny, nil, anpv1alpha1.AdminNetworkPolicyEgressPeer{Networks: []anpv1alpha1.CIDR{anpv1alpha1.CIDR(fmt.Sprintf("198.18.%d.0/24", k))}}),
				egress(anpv1alpha1.AdminNetworkPolicyRuleActionPass, ports(tcp(int32(443+k/30))), anpv1alpha1.AdminNetworkPolicyEgressPeer{Namespaces: team(4)}),
			}
		default:
			anp.Spec.Subject.Pods = &anpv1alpha1.NamespacedPod{NamespaceSelector: *team(k), PodSelector: *netpol.Labels("app", "app-"+strconv.Itoa(k%20))}
			http := "http"
			anp.Spec.Ingress = []anpv1alpha1.AdminNetworkPolicyIngressRule{
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionDeny, ports(tcp(22)), nsPeer(team(k+2))),
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionAllow, ports(anpv1alpha1.AdminNetworkPolicyPort{NamedPort: &http}), podPeer(anyTeam, netpol.Labels("tier", "db"))),
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionPass, nil, nsPeer(team(k+1))),
			}
			if k%2 == 0 {
				anp.Spec.Egress = []anpv1alpha1.AdminNetworkPolicyEgressRule{
					egress(anpv1alpha1.AdminNetworkPolicyRuleActionDeny, nil, anpv1alpha1.AdminNetworkPolicyEgressPeer{Networks: []anpv1alpha1.CIDR{anpv1alpha1.CIDR(fmt.Sprintf("198.18.%d.0/24", k%250))}}),
					egress(anpv1alpha1.AdminNetworkPolicyRuleActionAllow, nil, anpv1alpha1.AdminNetworkPolicyEgressPeer{Nodes: netpol.Labels("kubernetes.io/hostname", "node-"+strconv.Itoa(1+k%3))}),
					egress(anpv1alpha1.AdminNetworkPolicyRuleActionPass, ports(portRange(8000, 8100)), anpv1alpha1.AdminNetworkPolicyEgressPeer{Pods: &anpv1alpha1.NamespacedPod{NamespaceSelector: *anyTeam, PodSelector: *netpol.Labels("probe", "yes")}}),
				}
			}
		}
		out = append(out, anp)
	}
	return out
}

// apiAllowANP is the create → enforced policy of sample i: every pod of the bench's
// namespaces (the 1,000) lets the client's namespace in on port 80, so api, which
// NetworkPolicy isolates, answers the client.
func apiAllowANP(i int) *anpv1alpha1.AdminNetworkPolicy {
	return &anpv1alpha1.AdminNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "all-pods-allow-client-" + strconv.Itoa(i)},
		Spec: anpv1alpha1.AdminNetworkPolicySpec{
			Priority: measuredPriority,
			Subject:  anpv1alpha1.AdminNetworkPolicySubject{Namespaces: anyTeam},
			Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{
				ingress(anpv1alpha1.AdminNetworkPolicyRuleActionAllow, ports(tcp(80)), nsPeer(netpol.Labels("team", "t1"))),
			},
		},
	}
}

func isWebAdmin(k int) bool  { return k%10 == 0 }
func isWideAdmin(k int) bool { return k%30 == 5 && k/30 < wideAdmins }

// onPath tells whether admin policy k of the 100 selects web or the client: only those put
// rules on the chains the measured connections go through.
func onPath(k int) bool { return isWebAdmin(k) || isWideAdmin(k) }

// addAdmins writes the 100 and waits until both nodes enforce exactly what they and the
// NetworkPolicies call for; it returns how long node-1 took from the first write.
func (w *world) addAdmins(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := w.writeAdmins(ctx, benchAdmins(), true); err != nil {
		return 0, err
	}
	if err := w.waitEnforced(ctx); err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, w.waitMatches(ctx, w.client.Node)
}

// deleteAdmins takes the 100 out again and waits until node-1 enforces the NetworkPolicies
// alone, so what is measured next is the NetworkPolicy world.
func (w *world) deleteAdmins(ctx context.Context) error {
	if err := w.writeAdmins(ctx, benchAdmins(), false); err != nil {
		return err
	}
	return w.waitEnforced(ctx)
}

// writeAdmins creates (or deletes) anps, 8 at a time.
func (w *world) writeAdmins(ctx context.Context, anps []*anpv1alpha1.AdminNetworkPolicy, create bool) error {
	var objs []func(context.Context) error
	for _, anp := range anps {
		objs = append(objs, func(ctx context.Context) error {
			if create {
				_, err := w.l.Client.AdminNetworkPolicies().Create(ctx, anp)
				return err
			}
			return w.l.Client.AdminNetworkPolicies().Delete(ctx, anp.Name, metav1.DeleteOptions{})
		})
	}
	if err := parallel(ctx, 8, objs); err != nil {
		return fmt.Errorf("write AdminNetworkPolicies (create %v): %w", create, err)
	}
	return nil
}

// adminPathRates counts new connections a second from client to web with the 100 in place and
// with those on the path (onPath) taken out, which leaves the chains the connections go
// through as the 500 alone make them: window by window in turn, so that the machine's load
// drifts over both alike; the best window of each. The 100 are in place when it returns.
func (w *world) adminPathRates(ctx context.Context) (with, without float64, err error) {
	var path []*anpv1alpha1.AdminNetworkPolicy
	for k, anp := range benchAdmins() {
		if onPath(k) {
			path = append(path, anp)
		}
	}
	write := func(create bool) error {
		if err := w.writeAdmins(ctx, path, create); err != nil {
			return err
		}
		for _, n := range []*lab.Node{w.n1, w.client.Node} {
			if err := w.waitMatches(ctx, n); err != nil {
				return err
			}
		}
		return nil
	}
	return w.alternatingRates(ctx, write)
}

// createAPIAllowANP is createToEnforced's writer for AdminNetworkPolicy.
func (w *world) createAPIAllowANP(ctx context.Context, i int) (string, func(context.Context) error, error) {
	anp := apiAllowANP(i)
	if _, err := w.l.Client.AdminNetworkPolicies().Create(ctx, anp); err != nil {
		return "", nil, err
	}
	return "AdminNetworkPolicy " + anp.Name, func(ctx context.Context) error {
		return w.l.Client.AdminNetworkPolicies().Delete(ctx, anp.Name, metav1.DeleteOptions{})
	}, nil
}

func ingress(a anpv1alpha1.AdminNetworkPolicyRuleAction, p *[]anpv1alpha1.AdminNetworkPolicyPort, from ...anpv1alpha1.AdminNetworkPolicyIngressPeer) anpv1alpha1.AdminNetworkPolicyIngressRule {
	return anpv1alpha1.AdminNetworkPolicyIngressRule{Action: a, Ports: p, From: from}
}

func egress(a anpv1alpha1.AdminNetworkPolicyRuleAction, p *[]anpv1alpha1.AdminNetworkPolicyPort, to ...anpv1alpha1.AdminNetworkPolicyEgressPeer) anpv1alpha1.AdminNetworkPolicyEgressRule {
	return anpv1alpha1.AdminNetworkPolicyEgressRule{Action: a, Ports: p, To: to}
}

func nsPeer(sel *metav1.LabelSelector) anpv1alpha1.AdminNetworkPolicyIngressPeer {
	return anpv1alpha1.AdminNetworkPolicyIngressPeer{Namespaces: sel}
}

func podPeer(ns, pods *metav1.LabelSelector) anpv1alpha1.AdminNetworkPolicyIngressPeer {
	return anpv1alpha1.AdminNetworkPolicyIngressPeer{Pods: &anpv1alpha1.NamespacedPod{NamespaceSelector: *ns, PodSelector: *pods}}
}

func ports(p ...anpv1alpha1.AdminNetworkPolicyPort) *[]anpv1alpha1.AdminNetworkPolicyPort { return &p }

func tcp(port int32) anpv1alpha1.AdminNetworkPolicyPort {
	return anpv1alpha1.AdminNetworkPolicyPort{PortNumber: &anpv1alpha1.Port{Protocol: corev1.ProtocolTCP, Port: port}}
}

func portRange(start, end int32) anpv1alpha1.AdminNetworkPolicyPort {
	return anpv1alpha1.AdminNetworkPolicyPort{PortRange: &anpv1alpha1.PortRange{Protocol: corev1.ProtocolTCP, Start: start, End: end}}
}
