package netpol

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type namedPeers struct {
	name  string
	peers []networkingv1.NetworkPolicyPeer
}

type namedPorts struct {
	name  string
	ports []networkingv1.NetworkPolicyPort
}

// GridCases combine every kind of peer with every kind of port, once each: ingress into x's
// tiered pods (a, b) or egress out of y's a and c, alternating so that each peer and each
// port is seen in both directions.
func GridCases(w *World) []Case {
	podCIDR := netip.PrefixFrom(w.IP("x/a"), 16).Masked().String()
	peers := []namedPeers{
		{"any-peer", nil},
		{"pods-b", []networkingv1.NetworkPolicyPeer{Pods(Labels("pod", "b"))}},
		{"ns-dev", []networkingv1.NetworkPolicyPeer{NamespacesOf(Labels("env", "dev"))}},
		{"tiered-outside-x", []networkingv1.NetworkPolicyPeer{PodsIn(Exprs(Req(MetadataName, NotIn, "x")), Exprs(Req("tier", Exists)))}},
		{"cidr-except", []networkingv1.NetworkPolicyPeer{CIDR(podCIDR, host(w, "x/b"), host(w, "y/c"))}},
	}
	ports := []namedPorts{
		{"all-ports", nil},
		{"tcp-80", []networkingv1.NetworkPolicyPort{TCP(80)}},
		{"named-serve-81-tcp", []networkingv1.NetworkPolicyPort{Named("serve-81-tcp")}},
		{"all-udp", []networkingv1.NetworkPolicyPort{AllOf(protoUDP)}},
		{"tcp-81-82", []networkingv1.NetworkPolicyPort{Range(81, 82, protoTCP)}},
	}
	var cs []Case
	for i, pe := range peers {
		for j, po := range ports {
			r := Rule{Peers: pe.peers, Ports: po.ports}
			var p *networkingv1.NetworkPolicy
			dir := "ingress"
			if (i+j)%2 == 0 {
				p = Policy("x", "grid", Exprs(Req("tier", Exists))).Ingress(r).P()
			} else {
				dir = "egress"
				p = Policy("y", "grid", Exprs(Req("pod", In, "a", "c"))).Egress(r).P()
			}
			cs = append(cs, One(fmt.Sprintf("grid-%s-%s-%s", dir, pe.name, po.name), p))
		}
	}
	return cs
}

// RandomCases are n cases of one to three random policies each, from a seeded generator: the
// same seed gives the same cases (on the same pod addresses).
func RandomCases(w *World, seed uint64, n int) []Case {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), w: w}
	var cs []Case
	for i := range n {
		var ps []*networkingv1.NetworkPolicy
		for k := range 1 + g.r.IntN(3) {
			ps = append(ps, g.policy(fmt.Sprintf("random-%d", k)))
		}
		cs = append(cs, One(fmt.Sprintf("random-%d-%d", seed, i), ps...))
	}
	return cs
}

type gen struct {
	r *rand.Rand
	w *World
}

func (g *gen) pick(n int) int { return g.r.IntN(n) }

func (g *gen) podSelector() *metav1.LabelSelector {
	return []*metav1.LabelSelector{
		Labels(),
		Labels("pod", "a"),
		Exprs(Req("pod", In, "b", "c")),
		Exprs(Req("tier", Exists)),
		Exprs(Req("tier", NotIn, "backend")),
		Exprs(Req("tier", DoesNotExist)),
		Labels("pod", "b", "tier", "backend"),
	}[g.pick(7)]
}

func (g *gen) nsSelector() *metav1.LabelSelector {
	return []*metav1.LabelSelector{
		Labels(),
		Labels("ns", "y"),
		Labels("env", "prod"),
		Exprs(Req("env", NotIn, "prod")),
		Exprs(Req(MetadataName, In, "x", "z")),
	}[g.pick(5)]
}

func (g *gen) peer() networkingv1.NetworkPolicyPeer {
	pods := g.w.Pods
	switch g.pick(5) {
	case 0:
		return Pods(g.podSelector())
	case 1:
		return NamespacesOf(g.nsSelector())
	case 2:
		return PodsIn(g.nsSelector(), g.podSelector())
	case 3:
		return CIDR(netip.PrefixFrom(pods[g.pick(len(pods))].IP, 32).String())
	default:
		cidr := netip.PrefixFrom(pods[0].IP, 16).Masked().String()
		return CIDR(cidr, netip.PrefixFrom(pods[g.pick(len(pods))].IP, 32).String())
	}
}

func (g *gen) port() networkingv1.NetworkPolicyPort {
	return []networkingv1.NetworkPolicyPort{
		TCP(80), TCP(81), UDP(80), UDP(81), Port(81),
		Named("serve-80-tcp"), Named("dns"), NamedAs("dns", protoUDP), Named("web"),
		Range(80, 81, protoUDP), Range(81, 1000, protoTCP), AllOf(protoUDP), SCTP(80),
	}[g.pick(13)]
}

func (g *gen) rule() Rule {
	var r Rule
	for range g.pick(3) {
		r.Peers = append(r.Peers, g.peer())
	}
	for range g.pick(3) {
		r.Ports = append(r.Ports, g.port())
	}
	return r
}

func (g *gen) rules() []Rule {
	rs := make([]Rule, g.pick(3))
	for i := range rs {
		rs[i] = g.rule()
	}
	return rs
}

func (g *gen) policy(name string) *networkingv1.NetworkPolicy {
	p := Policy(Namespaces[g.pick(len(Namespaces))], name, g.podSelector())
	switch g.pick(3) {
	case 0:
		p.Ingress(g.rules()...)
	case 1:
		p.Egress(g.rules()...)
	default:
		p.Ingress(g.rules()...).Egress(g.rules()...)
	}
	return p.P()
}

func host(w *World, key string) string { return netip.PrefixFrom(w.IP(key), 32).String() }
