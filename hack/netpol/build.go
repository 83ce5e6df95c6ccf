package netpol

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Case is one scenario of the truth table: steps applied in order, each followed by a
// comparison of every probe with the oracle.
type Case struct {
	Name  string
	Steps []Step
}

// Step is the state of the cluster after it: the whole set of policies (the runner creates,
// updates and deletes to get there) and label changes that hold from this step to the end of
// the case (labels go back to the base ones before the next case).
type Step struct {
	Note            string
	Policies        []*networkingv1.NetworkPolicy
	PodLabels       map[string]map[string]string // pod key -> its whole label set
	NamespaceLabels map[string]map[string]string // namespace -> its whole label set
}

// One is a case of one step.
func One(name string, policies ...*networkingv1.NetworkPolicy) Case {
	return Case{Name: name, Steps: []Step{{Policies: policies}}}
}

// Pol builds a NetworkPolicy.
type Pol struct{ np networkingv1.NetworkPolicy }

// Policy starts a policy in namespace ns selecting the target pods (nil: every pod).
func Policy(ns, name string, target *metav1.LabelSelector) *Pol {
	p := &Pol{}
	p.np.Namespace, p.np.Name = ns, name
	if target != nil {
		p.np.Spec.PodSelector = *target
	}
	return p
}

// Ingress makes the policy police ingress and adds rules; none means deny all ingress.
func (p *Pol) Ingress(rules ...Rule) *Pol {
	if !p.has(networkingv1.PolicyTypeIngress) {
		p.np.Spec.PolicyTypes = append(p.np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	}
	for _, r := range rules {
		p.np.Spec.Ingress = append(p.np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: r.Peers, Ports: r.Ports})
	}
	return p
}

// Egress makes the policy police egress and adds rules; none means deny all egress.
func (p *Pol) Egress(rules ...Rule) *Pol {
	if !p.has(networkingv1.PolicyTypeEgress) {
		p.np.Spec.PolicyTypes = append(p.np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	for _, r := range rules {
		p.np.Spec.Egress = append(p.np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: r.Peers, Ports: r.Ports})
	}
	return p
}

func (p *Pol) has(t networkingv1.PolicyType) bool {
	for _, x := range p.np.Spec.PolicyTypes {
		if x == t {
			return true
		}
	}
	return false
}

// P is the built policy.
func (p *Pol) P() *networkingv1.NetworkPolicy { return p.np.DeepCopy() }

// Raw is a policy exactly as given: policyTypes left empty are the API server's to default.
func Raw(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

// Rule is an ingress or egress rule: peers (none: every peer) and ports (none: every port).
type Rule struct {
	Peers []networkingv1.NetworkPolicyPeer
	Ports []networkingv1.NetworkPolicyPort
}

// From is a rule for the given peers (To reads better for egress; the same thing).
func From(peers ...networkingv1.NetworkPolicyPeer) Rule { return Rule{Peers: peers} }

// To is From for egress rules.
func To(peers ...networkingv1.NetworkPolicyPeer) Rule { return From(peers...) }

// AnyPeer is a rule for every peer.
func AnyPeer() Rule { return Rule{} }

// On restricts the rule to ports.
func (r Rule) On(ports ...networkingv1.NetworkPolicyPort) Rule {
	r.Ports = append(append([]networkingv1.NetworkPolicyPort(nil), r.Ports...), ports...)
	return r
}

// Pods are the pods of the policy's namespace that sel selects.
func Pods(sel *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: sel}
}

// NamespacesOf are all pods of the namespaces sel selects.
func NamespacesOf(sel *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: sel}
}

// PodsIn are the pods pod selects in the namespaces ns selects.
func PodsIn(ns, pod *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: ns, PodSelector: pod}
}

// CIDR is an ipBlock.
func CIDR(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// Labels is a selector of matchLabels k1=v1, k2=v2, …; Labels() selects everything.
func Labels(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{}
	for i := 0; i+1 < len(kv); i += 2 {
		if s.MatchLabels == nil {
			s.MatchLabels = map[string]string{}
		}
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// Exprs is a selector of matchExpressions.
func Exprs(reqs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: reqs}
}

// Req is one matchExpressions requirement.
func Req(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

// Short names for the operators.
const (
	In           = metav1.LabelSelectorOpIn
	NotIn        = metav1.LabelSelectorOpNotIn
	Exists       = metav1.LabelSelectorOpExists
	DoesNotExist = metav1.LabelSelectorOpDoesNotExist
)

// MetadataName is the label the API server gives every namespace: its name.
const MetadataName = "kubernetes.io/metadata.name"

var (
	protoTCP  = corev1.ProtocolTCP
	protoUDP  = corev1.ProtocolUDP
	protoSCTP = corev1.ProtocolSCTP
)

func portOf(proto corev1.Protocol, port *intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
	var pp *corev1.Protocol
	if proto != "" {
		pp = &proto
	}
	return networkingv1.NetworkPolicyPort{Protocol: pp, Port: port, EndPort: end}
}

func num(p int32) *intstr.IntOrString { v := intstr.FromInt32(p); return &v }

// TCP, UDP and SCTP are numbered ports.
func TCP(p int32) networkingv1.NetworkPolicyPort  { return portOf(protoTCP, num(p), nil) }
func UDP(p int32) networkingv1.NetworkPolicyPort  { return portOf(protoUDP, num(p), nil) }
func SCTP(p int32) networkingv1.NetworkPolicyPort { return portOf(protoSCTP, num(p), nil) }

// Port is a numbered port with no protocol (the API's default, TCP).
func Port(p int32) networkingv1.NetworkPolicyPort { return portOf("", num(p), nil) }

// Named is a port by name with no protocol (TCP); NamedAs gives the protocol.
func Named(name string) networkingv1.NetworkPolicyPort { return NamedAs(name, "") }

// NamedAs is a port by name with a protocol.
func NamedAs(name string, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	v := intstr.FromString(name)
	return portOf(proto, &v, nil)
}

// Range is the ports from…to of a protocol (endPort).
func Range(from, to int32, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return portOf(proto, num(from), &to)
}

// AllOf is every port of a protocol.
func AllOf(proto corev1.Protocol) networkingv1.NetworkPolicyPort { return portOf(proto, nil, nil) }
