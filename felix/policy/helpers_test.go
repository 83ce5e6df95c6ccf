package policy

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/apis/names"
)

// kv turns "k=v" pairs into a label map.
func kv(pairs ...string) map[string]string {
	m := map[string]string{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
	}
	return m
}

func mkPod(key string, ips string, labels ...string) *Pod {
	ns, name, _ := strings.Cut(key, "/")
	p := &Pod{Key: Key{Namespace: ns, Name: name}, Labels: kv(labels...)}
	for _, ip := range strings.Fields(ips) {
		p.IPs = append(p.IPs, netip.MustParseAddr(ip))
	}
	return p
}

func (p *Pod) withPorts(ports ...NamedPort) *Pod {
	p.NamedPorts = append(p.NamedPorts, ports...)
	return p
}

func (p *Pod) onHost() *Pod {
	p.HostNetwork = true
	return p
}

func mkNS(name string, labels ...string) *Namespace {
	return &Namespace{Name: name, Labels: kv(labels...)}
}

func mkPolicy(key string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	ns, name, _ := strings.Cut(key, "/")
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func sel(labels ...string) *metav1.LabelSelector {
	if len(labels) == 0 {
		return &metav1.LabelSelector{}
	}
	return &metav1.LabelSelector{MatchLabels: kv(labels...)}
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func podPeer(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: s}
}

func nsPeer(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: s}
}

func bothPeer(ns, pods *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: ns, PodSelector: pods}
}

func blockPeer(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func proto(p string) *corev1.Protocol {
	pr := corev1.Protocol(p)
	return &pr
}

// port is a numeric port; p == "" leaves the protocol out (TCP by default).
func port(p string, n int32) networkingv1.NetworkPolicyPort {
	pp := intstr.FromInt32(n)
	out := networkingv1.NetworkPolicyPort{Port: &pp}
	if p != "" {
		out.Protocol = proto(p)
	}
	return out
}

func portSpan(p string, from, to int32) networkingv1.NetworkPolicyPort {
	out := port(p, from)
	out.EndPort = &to
	return out
}

func namedPort(p, name string) networkingv1.NetworkPolicyPort {
	pp := intstr.FromString(name)
	out := networkingv1.NetworkPolicyPort{Port: &pp}
	if p != "" {
		out.Protocol = proto(p)
	}
	return out
}

func allPortsOf(p string) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: proto(p)}
}

func ingressOnly() []networkingv1.PolicyType {
	return []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
}

func egressOnly() []networkingv1.PolicyType {
	return []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
}

func bothTypes() []networkingv1.PolicyType {
	return []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
}

func iface(k Key) string { return names.HostVethName(k.Namespace, k.Name, "") }

// mkInput makes an Input; local pods become endpoints of this node.
func mkInput(nss []*Namespace, pods []*Pod, pols []*networkingv1.NetworkPolicy, local ...*Pod) Input {
	in := Input{Pods: map[Key]*Pod{}, Namespaces: map[string]*Namespace{}, Policies: map[Key]*networkingv1.NetworkPolicy{}}
	for _, n := range nss {
		in.Namespaces[n.Name] = n
	}
	for _, p := range pods {
		in.Pods[p.Key] = p
	}
	for _, p := range pols {
		in.Policies[Key{Namespace: p.Namespace, Name: p.Name}] = p
	}
	for _, p := range local {
		in.Endpoints = append(in.Endpoints, Endpoint{Interface: iface(p.Key), Pod: p.Key})
	}
	return in
}

// readable rewrites every set name in rules as "{members}" so expectations say what a rule
// matches instead of a hash. Members are joined with " | ".
func readable(r Rendered, rules []string) []string {
	if rules == nil {
		return nil
	}
	out := make([]string, len(rules))
	for i, rule := range rules {
		f := strings.Fields(rule)
		for j := range f {
			if s, ok := r.IPSets[f[j]]; ok {
				f[j] = "{" + strings.Join(s.Members, " | ") + "}"
			}
		}
		out[i] = strings.Join(f, " ")
	}
	return out
}

// endpointChains lists the rendered endpoint chains.
func endpointChains(r Rendered) []string {
	var out []string
	for name := range r.Chains {
		if strings.HasPrefix(name, FromWorkloadPrefix) || strings.HasPrefix(name, ToWorkloadPrefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
