package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// TestRenderedAgreesWithVerdict is the cross-check: for many random clusters and policy
// sets, the rendered chains and sets, walked by the kernel model, decide every packet of a
// grid exactly as Verdict does from the NetworkPolicy semantics.
func TestRenderedAgreesWithVerdict(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261124, 7))
	stats := map[string]int{}
	const clusters = 300
	for i := range clusters {
		g := &generator{rng: rng}
		in := g.input()
		c := NewCalculator(in)
		for _, fam := range ipfamily.All {
			r := c.Render(fam)
			k := newKernel(t, r, fam)
			if t.Failed() {
				t.Fatalf("cluster %d: %s", i, g.describe(in))
			}
			checkGrid(t, i, g, in, c, k, fam, stats)
			if t.Failed() {
				t.Fatalf("cluster %d %v: %s", i, fam, g.describe(in))
			}
		}
	}
	t.Logf("outcomes: %v", stats)
	// Without both outcomes in both directions the grid would prove little.
	for _, want := range []string{"ACCEPT", "DROP", "FALLTHROUGH", "egress-deny", "ingress-deny", "named-allow", "unknown-endpoint-drop"} {
		if stats[want] < 50 {
			t.Errorf("only %d %s outcomes: the generator does not exercise enough", stats[want], want)
		}
	}
}

func checkGrid(t *testing.T, n int, g *generator, in Input, c *Calculator, k *kernel, fam ipfamily.Family, stats map[string]int) {
	t.Helper()
	local := map[netip.Addr]string{} // pod address → interface, for this node's pod-network pods
	for _, ep := range in.Endpoints {
		p := in.Pods[ep.Pod]
		if p == nil || p.HostNetwork {
			continue
		}
		for _, ip := range p.IPs {
			local[ip] = ep.Interface
		}
	}
	var addrs []netip.Addr
	for _, a := range g.addrs {
		if ipfamily.OfAddr(a) == fam {
			addrs = append(addrs, a)
		}
	}
	type probe struct {
		proto Protocol
		port  uint16
	}
	var probes []probe
	for _, pr := range []Protocol{"TCP", "UDP", "SCTP"} {
		for _, port := range []uint16{53, 80, 81, 443, 5432, 7777, 8080, 9090} {
			probes = append(probes, probe{pr, port})
		}
	}
	probes = append(probes, probe{"ICMP", 0})
	policies := len(in.Policies) > 0 || len(in.Admin) > 0
	for _, src := range addrs {
		for _, dst := range addrs {
			if src == dst {
				continue // a pod talking to itself never leaves its namespace
			}
			inIf, srcLocal := local[src]
			outIf, dstLocal := local[dst]
			if !srcLocal {
				inIf = "eth0"
			}
			if !dstLocal {
				outIf = "eth0"
			}
			for _, pr := range probes {
				pkt := testPacket{in: inIf, out: outIf, src: src, dst: dst, proto: lower(pr.proto), port: pr.port}
				got := k.forward(pkt)
				d := c.Verdict(Packet{Src: src, Dst: dst, Protocol: pr.proto, Port: pr.port})
				want := "ACCEPT"
				switch {
				case !srcLocal && !dstLocal:
					want = "FALLTHROUGH" // not tabby's to police here
				case srcLocal && !d.Egress.Allowed, dstLocal && !d.Ingress.Allowed:
					want = "DROP"
				}
				stats[got]++
				if srcLocal && !d.Egress.Allowed {
					stats["egress-deny"]++
				}
				if dstLocal && !d.Ingress.Allowed {
					stats["ingress-deny"]++
				}
				if got == "ACCEPT" && (allowedByNamed(c, d.Egress) || allowedByNamed(c, d.Ingress)) {
					stats["named-allow"]++
				}
				if got != want {
					t.Errorf("cluster %d %v: %s: rendered %s, Verdict wants %s (%s)", n, fam, pkt, got, want, d.Reason)
					return
				}
			}
			// A workload felix does not know: dropped as soon as any policy exists.
			pkt := testPacket{in: "cali-unknown", out: outIf, src: src, dst: dst, proto: "tcp", port: 80}
			want := "ACCEPT"
			if policies {
				want = "DROP"
				stats["unknown-endpoint-drop"]++
			}
			if got := k.forward(pkt); got != want {
				t.Errorf("cluster %d %v: %s: rendered %s, want %s for an unknown workload", n, fam, pkt, got, want)
				return
			}
		}
	}
}

func lower(p Protocol) string {
	s, ok := iptablesProtocol(p)
	if !ok {
		return "icmp"
	}
	return s
}

// allowedByNamed tells whether the rule that allowed a side has a named port.
func allowedByNamed(c *Calculator, s Side) bool {
	if s.AllowedBy == nil {
		return false
	}
	for _, p := range c.policies {
		if p.key != s.AllowedBy.Policy {
			continue
		}
		for _, d := range []direction{ingress, egress} {
			rules := p.rules[d]
			if s.AllowedBy.Rule < len(rules) {
				for _, ps := range rules[s.AllowedBy.Rule].ports {
					if ps.kind == portNamed {
						return true
					}
				}
			}
		}
	}
	return false
}

// generator builds small random clusters that use every feature, invalid objects included.
type generator struct {
	rng   *rand.Rand
	addrs []netip.Addr // every address of the grid
}

func (g *generator) pick(n int) int        { return g.rng.IntN(n) }
func (g *generator) chance(p float64) bool { return g.rng.Float64() < p }

func oneOf[T any](g *generator, xs ...T) T { return xs[g.pick(len(xs))] }

var (
	genNamespaces = []string{"a", "b", "c", "d"} // "d" has no Namespace object
	genNamedPorts = []NamedPort{
		{Name: "http", Protocol: "TCP", Port: 80}, {Name: "http", Protocol: "TCP", Port: 8080},
		{Name: "dns", Protocol: "UDP", Port: 53}, {Name: "dns", Protocol: "TCP", Port: 53},
		{Name: "metrics", Port: 9090}, {Name: "sig", Protocol: "SCTP", Port: 7777},
		{Name: "http", Protocol: "UDP", Port: 443},
	}
)

func (g *generator) input() Input {
	in := Input{Pods: map[Key]*Pod{}, Namespaces: map[string]*Namespace{}, Policies: map[Key]*networkingv1.NetworkPolicy{}}
	for _, ns := range genNamespaces[:3] {
		l := map[string]string{}
		if g.chance(0.6) {
			l["team"] = oneOf(g, "x", "y")
		}
		if g.chance(0.5) {
			l["env"] = oneOf(g, "prod", "dev")
		}
		in.Namespaces[ns] = &Namespace{Name: ns, Labels: l}
	}
	n := 4 + g.pick(6)
	for i := range n {
		p := &Pod{Key: Key{Namespace: oneOf(g, genNamespaces...), Name: fmt.Sprintf("p%d", i)}, Labels: map[string]string{}}
		if g.chance(0.8) {
			p.Labels["app"] = oneOf(g, "web", "db", "api")
		}
		if g.chance(0.5) {
			p.Labels["tier"] = oneOf(g, "fe", "be")
		}
		if g.chance(0.1) {
			p.HostNetwork = true
			p.IPs = []netip.Addr{netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("fd01::1")}
		} else {
			p.IPs = []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})}
			if g.chance(0.8) {
				p.IPs = append(p.IPs, netip.MustParseAddr(fmt.Sprintf("fd00::%x", i+1)))
			}
			g.addrs = append(g.addrs, p.IPs...)
		}
		for range g.pick(4) {
			p.NamedPorts = append(p.NamedPorts, oneOf(g, genNamedPorts...))
		}
		in.Pods[p.Key] = p
		if g.chance(0.7) {
			in.Endpoints = append(in.Endpoints, Endpoint{Interface: iface(p.Key), Pod: p.Key})
		}
	}
	for _, a := range []string{"192.168.0.1", "fd01::1", "203.0.113.7", "8.8.8.8", "2001:db8::1", "10.0.0.200"} {
		g.addrs = append(g.addrs, netip.MustParseAddr(a))
	}
	if g.chance(0.1) {
		return in // no policy at all
	}
	for i := range 1 + g.pick(4) {
		np := g.policy(fmt.Sprintf("np%d", i))
		in.Policies[Key{Namespace: np.Namespace, Name: np.Name}] = np
	}
	return in
}

func (g *generator) policy(name string) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: oneOf(g, genNamespaces...), Name: name}}
	np.Spec.PodSelector = *g.selector(false)
	switch g.pick(4) {
	case 1:
		np.Spec.PolicyTypes = ingressOnly()
	case 2:
		np.Spec.PolicyTypes = egressOnly()
	case 3:
		np.Spec.PolicyTypes = bothTypes()
	}
	for range g.pick(3) {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: g.peers(), Ports: g.ports()})
	}
	for range g.pick(3) {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: g.peers(), Ports: g.ports()})
	}
	return np
}

func (g *generator) selector(forNamespace bool) *metav1.LabelSelector {
	keys, values := []string{"app", "tier"}, []string{"web", "db", "api", "fe", "be"}
	if forNamespace {
		keys, values = []string{"team", "env", corev1.LabelMetadataName}, []string{"x", "y", "prod", "dev", "a", "b", "d"}
	}
	switch g.pick(8) {
	case 0, 1:
		return &metav1.LabelSelector{}
	case 2, 3:
		return &metav1.LabelSelector{MatchLabels: map[string]string{oneOf(g, keys...): oneOf(g, values...)}}
	case 7:
		if g.chance(0.3) {
			return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
		}
	}
	s := &metav1.LabelSelector{}
	for range 1 + g.pick(2) {
		op := oneOf(g, metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist)
		req := metav1.LabelSelectorRequirement{Key: oneOf(g, keys...), Operator: op}
		if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
			req.Values = []string{oneOf(g, values...), oneOf(g, values...)}
		}
		s.MatchExpressions = append(s.MatchExpressions, req)
	}
	return s
}

var genBlocks = []networkingv1.IPBlock{
	{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.0/30"}},
	{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.4/30", "10.0.0.8/32"}},
	{CIDR: "0.0.0.0/0"},
	{CIDR: "0.0.0.0/0", Except: []string{"0.0.0.0/1"}},
	{CIDR: "10.0.0.5/32"},
	{CIDR: "203.0.113.0/24"},
	{CIDR: "10.0.0.0/29", Except: []string{"10.0.0.0/28"}}, // covers it all: nothing
	{CIDR: "fd00::/64", Except: []string{"fd00::/126"}},
	{CIDR: "::/0", Except: []string{"fd00::4/126"}},
	{CIDR: "fd00::5/128"},
	{CIDR: "010.0.0.0/28"},
	{CIDR: "banana"},
}

func (g *generator) peers() []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for range g.pick(3) {
		var p networkingv1.NetworkPolicyPeer
		switch g.pick(9) {
		case 0, 1:
			p.PodSelector = g.selector(false)
		case 2, 3:
			p.NamespaceSelector = g.selector(true)
		case 4, 5:
			p.PodSelector, p.NamespaceSelector = g.selector(false), g.selector(true)
		case 6, 7:
			b := oneOf(g, genBlocks...)
			p.IPBlock = &b
		case 8:
			// Invalid: empty, or an ipBlock with a selector.
			if g.chance(0.5) {
				b := genBlocks[0]
				p.IPBlock, p.PodSelector = &b, &metav1.LabelSelector{}
			}
		}
		out = append(out, p)
	}
	return out
}

func (g *generator) ports() []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for range g.pick(3) {
		var p networkingv1.NetworkPolicyPort
		if g.chance(0.7) {
			p.Protocol = proto(oneOf(g, "TCP", "UDP", "SCTP", "TCP", "UDP", "SCTP", "ICMP"))
		}
		switch g.pick(7) {
		case 0:
		case 1, 2:
			pp := intstr.FromInt32(oneOf[int32](g, 53, 80, 443, 7777, 8080, 9090))
			p.Port = &pp
		case 3:
			pp := intstr.FromInt32(80)
			end := oneOf[int32](g, 81, 9000, 79)
			p.Port, p.EndPort = &pp, &end
		default:
			pp := intstr.FromString(oneOf(g, "http", "dns", "metrics", "sig", "nope"))
			p.Port = &pp
		}
		out = append(out, p)
	}
	return out
}

func (g *generator) describe(in Input) string {
	s := ""
	for _, p := range in.Pods {
		s += fmt.Sprintf("\npod %s %v %v host=%v ports=%v", p.Key, p.Labels, p.IPs, p.HostNetwork, p.NamedPorts)
	}
	for _, ns := range in.Namespaces {
		s += fmt.Sprintf("\nns %s %v", ns.Name, ns.Labels)
	}
	for _, ep := range in.Endpoints {
		s += fmt.Sprintf("\nendpoint %s %s", ep.Interface, ep.Pod)
	}
	for _, np := range in.Policies {
		s += fmt.Sprintf("\npolicy %s/%s %+v", np.Namespace, np.Name, np.Spec)
	}
	return s
}
