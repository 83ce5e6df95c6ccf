package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The chains rendered with AdminNetworkPolicies and a baseline decide every packet of the grid
// as Verdict does, for random clusters mixing the three tiers.
func TestRenderedAgreesWithVerdictAdmin(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261128, 37))
	stats := map[string]int{}
	for i := range 300 {
		g := &generator{rng: rng}
		in := g.input()
		g.admin(&in)
		c := NewCalculator(in)
		for _, fam := range ipfamily.All {
			k := newKernel(t, c.Render(fam), fam)
			if t.Failed() {
				t.Fatalf("cluster %d: %s", i, g.describe(in))
			}
			checkGrid(t, i, g, in, c, k, fam, stats)
			if t.Failed() {
				t.Fatalf("cluster %d %v: %s\nadmin: %s", i, fam, g.describe(in), describeAdmin(in))
			}
			for _, src := range g.addrs {
				for _, dst := range g.addrs {
					for _, side := range []Side{c.Verdict(Packet{Src: src, Dst: dst, Protocol: "TCP", Port: 80}).Egress, c.Verdict(Packet{Src: src, Dst: dst, Protocol: "TCP", Port: 80}).Ingress} {
						stats["tier:"+side.Tier]++
						if side.Passed != nil {
							stats["passed"]++
						}
					}
				}
			}
		}
	}
	t.Logf("outcomes: %v", stats)
	for _, want := range []string{"ACCEPT", "DROP", "tier:AdminNetworkPolicy", "tier:BaselineAdminNetworkPolicy", "tier:NetworkPolicy", "passed"} {
		if stats[want] < 50 {
			t.Errorf("only %d %s outcomes: the generator does not exercise enough", stats[want], want)
		}
	}
}

func describeAdmin(in Input) string {
	s := ""
	for k, p := range in.Admin {
		s += fmt.Sprintf("\n  %s prio %d subject %+v ingress %+v egress %+v", k, p.Priority, p.Subject, p.Ingress, p.Egress)
	}
	return s
}

// admin adds random AdminNetworkPolicies (through the API types and FromANP) and, sometimes,
// a baseline.
func (g *generator) admin(in *Input) {
	in.Admin = map[AdminKey]*AdminPolicy{}
	in.Nodes = map[string]*Node{
		"n1": {Name: "n1", Labels: kv("role=cp"), IPs: []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::1")}},
		"n2": {Name: "n2", Labels: kv("role=worker"), IPs: []netip.Addr{netip.MustParseAddr("8.8.8.8")}},
	}
	for i := range g.pick(4) {
		anp := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("anp%d", i)}}
		anp.Spec.Priority = oneOf[int32](g, 1, 5, 5, 10)
		anp.Spec.Subject = g.adminSubject()
		for range g.pick(3) {
			anp.Spec.Ingress = append(anp.Spec.Ingress, anpv1alpha1.AdminNetworkPolicyIngressRule{
				Action: oneOf(g, anpv1alpha1.AdminNetworkPolicyRuleActionAllow, anpv1alpha1.AdminNetworkPolicyRuleActionDeny, anpv1alpha1.AdminNetworkPolicyRuleActionPass),
				From:   g.adminIngressPeers(), Ports: g.adminPorts(),
			})
		}
		for range g.pick(3) {
			anp.Spec.Egress = append(anp.Spec.Egress, anpv1alpha1.AdminNetworkPolicyEgressRule{
				Action: oneOf(g, anpv1alpha1.AdminNetworkPolicyRuleActionAllow, anpv1alpha1.AdminNetworkPolicyRuleActionDeny, anpv1alpha1.AdminNetworkPolicyRuleActionPass),
				To:     g.adminEgressPeers(), Ports: g.adminPorts(),
			})
		}
		p := FromANP(anp)
		in.Admin[p.Key()] = p
	}
	for i := range g.pick(3) {
		p := FromCNP(g.cnp(fmt.Sprintf("cnp%d", i)))
		in.Admin[p.Key()] = p
	}
	if g.chance(0.5) {
		banp := &anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		banp.Spec.Subject = g.adminSubject()
		for range 1 + g.pick(2) {
			banp.Spec.Ingress = append(banp.Spec.Ingress, anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{
				Action: oneOf(g, anpv1alpha1.BaselineAdminNetworkPolicyRuleActionAllow, anpv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny),
				From:   g.adminIngressPeers(), Ports: g.adminPorts(),
			})
		}
		for range 1 + g.pick(2) {
			var to []anpv1alpha1.BaselineAdminNetworkPolicyEgressPeer
			for _, p := range g.adminEgressPeers() {
				to = append(to, anpv1alpha1.BaselineAdminNetworkPolicyEgressPeer{Namespaces: p.Namespaces, Pods: p.Pods, Nodes: p.Nodes, Networks: p.Networks})
			}
			banp.Spec.Egress = append(banp.Spec.Egress, anpv1alpha1.BaselineAdminNetworkPolicyEgressRule{
				Action: oneOf(g, anpv1alpha1.BaselineAdminNetworkPolicyRuleActionAllow, anpv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny),
				To:     to, Ports: g.adminPorts(),
			})
		}
		p := FromBANP(banp)
		in.Admin[p.Key()] = p
	}
}

// cnp is a random ClusterNetworkPolicy of either tier, from the same peers and ports.
func (g *generator) cnp(name string) *cnpv1beta1.ClusterNetworkPolicy {
	c := &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Spec.Tier = oneOf(g, cnpv1beta1.AdminTier, cnpv1beta1.BaselineTier)
	c.Spec.Priority = oneOf[int32](g, 1, 5, 5, 10)
	s := g.adminSubject()
	c.Spec.Subject.Namespaces = s.Namespaces
	if s.Pods != nil {
		c.Spec.Subject.Pods = &cnpv1beta1.NamespacedPod{NamespaceSelector: s.Pods.NamespaceSelector, PodSelector: s.Pods.PodSelector}
	}
	action := func() cnpv1beta1.ClusterNetworkPolicyRuleAction {
		return oneOf(g, cnpv1beta1.ClusterNetworkPolicyRuleActionAccept, cnpv1beta1.ClusterNetworkPolicyRuleActionDeny, cnpv1beta1.ClusterNetworkPolicyRuleActionPass)
	}
	for range g.pick(3) {
		r := cnpv1beta1.ClusterNetworkPolicyIngressRule{Action: action(), Protocols: g.cnpProtocols()}
		for _, p := range g.adminIngressPeers() {
			peer := cnpv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: p.Namespaces}
			if p.Pods != nil {
				peer.Pods = &cnpv1beta1.NamespacedPod{NamespaceSelector: p.Pods.NamespaceSelector, PodSelector: p.Pods.PodSelector}
			}
			r.From = append(r.From, peer)
		}
		c.Spec.Ingress = append(c.Spec.Ingress, r)
	}
	for range g.pick(3) {
		r := cnpv1beta1.ClusterNetworkPolicyEgressRule{Action: action(), Protocols: g.cnpProtocols()}
		for _, p := range g.adminEgressPeers() {
			peer := cnpv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: p.Namespaces, Nodes: p.Nodes}
			if p.Pods != nil {
				peer.Pods = &cnpv1beta1.NamespacedPod{NamespaceSelector: p.Pods.NamespaceSelector, PodSelector: p.Pods.PodSelector}
			}
			for _, n := range p.Networks {
				peer.Networks = append(peer.Networks, cnpv1beta1.CIDR(n))
			}
			r.To = append(r.To, peer)
		}
		c.Spec.Egress = append(c.Spec.Egress, r)
	}
	return c
}

func (g *generator) cnpProtocols() []cnpv1beta1.ClusterNetworkPolicyProtocol {
	var out []cnpv1beta1.ClusterNetworkPolicyProtocol
	for range g.pick(3) {
		var dp *cnpv1beta1.Port
		switch g.pick(3) {
		case 1:
			dp = &cnpv1beta1.Port{Number: oneOf[int32](g, 53, 80, 443)}
		case 2:
			dp = &cnpv1beta1.Port{Range: &cnpv1beta1.PortRange{Start: 80, End: oneOf[int32](g, 81, 9000)}}
		}
		switch g.pick(4) {
		case 0:
			out = append(out, cnpv1beta1.ClusterNetworkPolicyProtocol{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: dp}})
		case 1:
			out = append(out, cnpv1beta1.ClusterNetworkPolicyProtocol{UDP: &cnpv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: dp}})
		case 2:
			out = append(out, cnpv1beta1.ClusterNetworkPolicyProtocol{SCTP: &cnpv1beta1.ClusterNetworkPolicyProtocolSCTP{DestinationPort: dp}})
		default:
			out = append(out, cnpv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: oneOf(g, "http", "dns", "metrics")})
		}
	}
	return out
}

func (g *generator) adminSubject() anpv1alpha1.AdminNetworkPolicySubject {
	if g.chance(0.5) {
		return anpv1alpha1.AdminNetworkPolicySubject{Namespaces: g.selector(true)}
	}
	return anpv1alpha1.AdminNetworkPolicySubject{Pods: &anpv1alpha1.NamespacedPod{NamespaceSelector: *g.selector(true), PodSelector: *g.selector(false)}}
}

func (g *generator) adminIngressPeers() []anpv1alpha1.AdminNetworkPolicyIngressPeer {
	var out []anpv1alpha1.AdminNetworkPolicyIngressPeer
	for range 1 + g.pick(2) {
		if g.chance(0.5) {
			out = append(out, anpv1alpha1.AdminNetworkPolicyIngressPeer{Namespaces: g.selector(true)})
		} else {
			out = append(out, anpv1alpha1.AdminNetworkPolicyIngressPeer{Pods: &anpv1alpha1.NamespacedPod{NamespaceSelector: *g.selector(true), PodSelector: *g.selector(false)}})
		}
	}
	return out
}

func (g *generator) adminEgressPeers() []anpv1alpha1.AdminNetworkPolicyEgressPeer {
	var out []anpv1alpha1.AdminNetworkPolicyEgressPeer
	for range 1 + g.pick(2) {
		var p anpv1alpha1.AdminNetworkPolicyEgressPeer
		switch g.pick(5) {
		case 0:
			p.Namespaces = g.selector(true)
		case 1:
			p.Pods = &anpv1alpha1.NamespacedPod{NamespaceSelector: *g.selector(true), PodSelector: *g.selector(false)}
		case 2:
			p.Nodes = &metav1.LabelSelector{MatchLabels: kv("role=" + oneOf(g, "cp", "worker"))}
		default:
			p.Networks = []anpv1alpha1.CIDR{oneOf[anpv1alpha1.CIDR](g, "10.0.0.0/30", "0.0.0.0/0", "fd00::/120", "203.0.113.0/24", "10.0.0.5/32")}
		}
		out = append(out, p)
	}
	return out
}

func (g *generator) adminPorts() *[]anpv1alpha1.AdminNetworkPolicyPort {
	if g.chance(0.4) {
		return nil
	}
	out := []anpv1alpha1.AdminNetworkPolicyPort{}
	for range 1 + g.pick(2) {
		switch g.pick(3) {
		case 0:
			out = append(out, anpv1alpha1.AdminNetworkPolicyPort{PortNumber: &anpv1alpha1.Port{Protocol: oneOf(g, corev1.ProtocolTCP, corev1.ProtocolUDP), Port: oneOf[int32](g, 53, 80, 443)}})
		case 1:
			out = append(out, anpv1alpha1.AdminNetworkPolicyPort{PortRange: &anpv1alpha1.PortRange{Protocol: oneOf(g, corev1.ProtocolTCP, corev1.ProtocolUDP), Start: 80, End: oneOf[int32](g, 81, 9000)}})
		default:
			name := oneOf(g, "http", "dns", "metrics")
			out = append(out, anpv1alpha1.AdminNetworkPolicyPort{NamedPort: &name})
		}
	}
	return &out
}

// The evaluation order as the network-policy-api defines it, written from its documentation
// (AdminNetworkPolicy: "rules ... evaluated in order"; a lower priority value first; Pass skips
// the remaining AdminNetworkPolicy rules to NetworkPolicy; a BaselineAdminNetworkPolicy rule
// applies only to traffic no NetworkPolicy decided; what nothing decides is allowed), each row
// checked by Verdict and by the rendered chains in both families.
func TestAdminTruthTable(t *testing.T) {
	type anp struct {
		name   string
		prio   int32
		action Action
	}
	type cnp struct {
		name   string
		tier   cnpv1beta1.Tier
		prio   int32
		action cnpv1beta1.ClusterNetworkPolicyRuleAction
	}
	type row struct {
		name string
		anps []anp // each: its subject is the server, its one ingress rule matches the client
		// np: "" none; "allow": a NetworkPolicy selecting the server allows the client;
		// "isolate": one selects the server and allows nothing.
		np     string
		banp   Action // "": none; its one ingress rule matches the client
		cnps   []cnp  // ClusterNetworkPolicies: like anps, with a tier
		allow  bool
		tier   string
		policy string
	}
	rows := []row{
		{name: "nothing: open", allow: true},
		{name: "ANP Deny beats NP Allow", anps: []anp{{"deny", 10, ActionDeny}}, np: "allow", allow: false, tier: "AdminNetworkPolicy", policy: "deny"},
		{name: "ANP Allow beats NP isolation", anps: []anp{{"allow", 10, ActionAllow}}, np: "isolate", allow: true, tier: "AdminNetworkPolicy", policy: "allow"},
		{name: "ANP Allow beats BANP Deny", anps: []anp{{"allow", 10, ActionAllow}}, banp: ActionDeny, allow: true, tier: "AdminNetworkPolicy"},
		{name: "Pass to NP Allow", anps: []anp{{"pass", 10, ActionPass}}, np: "allow", allow: true, tier: "NetworkPolicy"},
		{name: "Pass to NP isolation", anps: []anp{{"pass", 10, ActionPass}}, np: "isolate", allow: false, tier: "NetworkPolicy"},
		{name: "Pass skips a later ANP Deny", anps: []anp{{"pass", 10, ActionPass}, {"deny", 20, ActionDeny}}, allow: true},
		{name: "Pass, no NP, to BANP Deny", anps: []anp{{"pass", 10, ActionPass}}, banp: ActionDeny, allow: false, tier: "BaselineAdminNetworkPolicy"},
		{name: "Pass, no NP, no BANP: open", anps: []anp{{"pass", 10, ActionPass}}, allow: true},
		{name: "lower priority first: Allow 10 before Deny 20", anps: []anp{{"b-allow", 10, ActionAllow}, {"a-deny", 20, ActionDeny}}, allow: true, policy: "b-allow", tier: "AdminNetworkPolicy"},
		{name: "lower priority first: Deny 10 before Allow 20", anps: []anp{{"b-deny", 10, ActionDeny}, {"a-allow", 20, ActionAllow}}, allow: false, policy: "b-deny", tier: "AdminNetworkPolicy"},
		{name: "Deny before Pass by priority", anps: []anp{{"deny", 1, ActionDeny}, {"pass", 2, ActionPass}}, np: "allow", allow: false, tier: "AdminNetworkPolicy"},
		{name: "same priority: decided the same way every time (by name)", anps: []anp{{"b-deny", 10, ActionDeny}, {"a-allow", 10, ActionAllow}}, allow: true, policy: "a-allow", tier: "AdminNetworkPolicy"},
		{name: "NP Allow beats BANP Deny", np: "allow", banp: ActionDeny, allow: true, tier: "NetworkPolicy"},
		{name: "NP isolation beats BANP Allow", np: "isolate", banp: ActionAllow, allow: false, tier: "NetworkPolicy"},
		{name: "BANP Deny where no NP selects", banp: ActionDeny, allow: false, tier: "BaselineAdminNetworkPolicy"},
		{name: "BANP Allow where no NP selects", banp: ActionAllow, allow: true, tier: "BaselineAdminNetworkPolicy"},
		// ClusterNetworkPolicy: the same tiers ("Accept" is Allow), and priorities within the
		// baseline too; a baseline Pass skips the remaining baseline rules: allowed.
		{name: "CNP Admin Deny beats NP Allow", cnps: []cnp{{"deny", "Admin", 10, "Deny"}}, np: "allow", allow: false, tier: "AdminNetworkPolicy", policy: "deny"},
		{name: "CNP Admin Accept beats NP isolation", cnps: []cnp{{"accept", "Admin", 10, "Accept"}}, np: "isolate", allow: true, tier: "AdminNetworkPolicy"},
		{name: "CNP Admin Pass to NP isolation", cnps: []cnp{{"pass", "Admin", 10, "Pass"}}, np: "isolate", allow: false, tier: "NetworkPolicy"},
		{name: "CNP Baseline Deny where no NP", cnps: []cnp{{"deny", "Baseline", 10, "Deny"}}, allow: false, tier: "BaselineAdminNetworkPolicy"},
		{name: "CNP Baseline Deny, NP Allow", cnps: []cnp{{"deny", "Baseline", 10, "Deny"}}, np: "allow", allow: true, tier: "NetworkPolicy"},
		{name: "CNP Baseline Pass before Deny", cnps: []cnp{{"z-pass", "Baseline", 1, "Pass"}, {"a-deny", "Baseline", 2, "Deny"}}, allow: true, tier: "BaselineAdminNetworkPolicy", policy: "z-pass"},
		{name: "CNP Baseline Deny before Accept", cnps: []cnp{{"z-deny", "Baseline", 1, "Deny"}, {"a-accept", "Baseline", 2, "Accept"}}, allow: false, tier: "BaselineAdminNetworkPolicy", policy: "z-deny"},
		{name: "CNP Admin tier before ANP of lower priority", cnps: []cnp{{"deny", "Admin", 5, "Deny"}}, anps: []anp{{"allow", 10, ActionAllow}}, allow: false, tier: "AdminNetworkPolicy", policy: "deny"},
		{name: "ANP Pass, then CNP Baseline Deny", anps: []anp{{"pass", 1, ActionPass}}, cnps: []cnp{{"deny", "Baseline", 10, "Deny"}}, allow: false, tier: "BaselineAdminNetworkPolicy"},
	}
	client := mkPod("cli/c", "10.244.1.1 fd00:10:244::1:1", "app=client")
	server := mkPod("srv/s", "10.244.2.1 fd00:10:244::2:1", "app=server")
	other := mkPod("srv/o", "10.244.2.2 fd00:10:244::2:2", "app=other")
	subject := anpv1alpha1.AdminNetworkPolicySubject{Pods: &anpv1alpha1.NamespacedPod{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: kv(corev1.LabelMetadataName + "=srv")}, PodSelector: *sel("app=server")}}
	from := []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel(corev1.LabelMetadataName + "=cli")}}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var pols []*networkingv1.NetworkPolicy
			switch r.np {
			case "allow":
				pols = append(pols, mkPolicy("srv/np", networkingv1.NetworkPolicySpec{PodSelector: *sel("app=server"),
					Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{nsPeer(sel(corev1.LabelMetadataName + "=cli"))}}}}))
			case "isolate":
				pols = append(pols, mkPolicy("srv/np", networkingv1.NetworkPolicySpec{PodSelector: *sel("app=server"), PolicyTypes: ingressOnly()}))
			}
			in := mkInput([]*Namespace{mkNS("cli"), mkNS("srv")}, []*Pod{client, server, other}, pols, client, server, other)
			in.Admin = map[AdminKey]*AdminPolicy{}
			for _, a := range r.anps {
				p := FromANP(&anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: a.name}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
					Priority: a.prio, Subject: subject,
					Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{{Name: "r", Action: anpv1alpha1.AdminNetworkPolicyRuleAction(a.action), From: from}}}})
				in.Admin[p.Key()] = p
			}
			for _, a := range r.cnps {
				p := FromCNP(&cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: a.name}, Spec: cnpv1beta1.ClusterNetworkPolicySpec{
					Tier: a.tier, Priority: a.prio,
					Subject: cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: subject.Pods.NamespaceSelector, PodSelector: subject.Pods.PodSelector}},
					Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{{Name: "r", Action: a.action, From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: from[0].Namespaces}}}}}})
				in.Admin[p.Key()] = p
			}
			if r.banp != "" {
				p := FromBANP(&anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
					Subject: subject,
					Ingress: []anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: anpv1alpha1.BaselineAdminNetworkPolicyRuleAction(r.banp), From: from}}}})
				in.Admin[p.Key()] = p
			}
			c := NewCalculator(in)
			for _, fam := range ipfamily.All {
				src, dst := client.IPs[0], server.IPs[0]
				if fam == ipfamily.IPv6 {
					src, dst = client.IPs[1], server.IPs[1]
				}
				d := c.Verdict(Packet{Src: src, Dst: dst, Protocol: "TCP", Port: 80})
				if d.Allowed != r.allow || d.Ingress.Tier != r.tier {
					t.Errorf("%v: allowed %v tier %q (%s), want %v tier %q", fam, d.Allowed, d.Ingress.Tier, d.Reason, r.allow, r.tier)
				}
				if r.policy != "" && (d.Ingress.DecidedBy == nil || d.Ingress.DecidedBy.Policy.Name != r.policy) {
					t.Errorf("%v: decided by %+v, want %s", fam, d.Ingress.DecidedBy, r.policy)
				}
				want := "DROP"
				if r.allow {
					want = "ACCEPT"
				}
				k := newKernel(t, c.Render(fam), fam)
				if got := k.forward(testPacket{in: iface(client.Key), out: iface(server.Key), src: src, dst: dst, proto: "tcp", port: 80}); got != want {
					t.Errorf("%v: rendered %s, want %s", fam, got, want)
				}
				// The admin policies select only the server: the other pod of its namespace is
				// policed by the NetworkPolicy alone (which does not select it): open.
				o := other.IPs[0]
				if fam == ipfamily.IPv6 {
					o = other.IPs[1]
				}
				if got := k.forward(testPacket{in: iface(client.Key), out: iface(other.Key), src: src, dst: o, proto: "tcp", port: 80}); got != "ACCEPT" {
					t.Errorf("%v: to a pod no policy selects: %s", fam, got)
				}
			}
		})
	}
}

// An egress domainNames peer is reported, not silently ignored, and matches nothing.
func TestAdminUnsupportedReported(t *testing.T) {
	anp := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fqdn"}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: 1, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{{Action: "Deny", To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{DomainNames: []anpv1alpha1.DomainName{"example.com"}}}}}}}
	p := FromANP(anp)
	if len(p.Unsupported) != 1 || p.Unsupported[0] != `spec.egress[0].to[0].domainNames ["example.com"]: not supported; the peer matches nothing` {
		t.Fatalf("unsupported: %q", p.Unsupported)
	}
	c := NewCalculator(Input{Admin: map[AdminKey]*AdminPolicy{p.Key(): p}})
	if probs := c.Problems(); len(probs) == 0 {
		t.Fatalf("no problem reported")
	}
}

// A peer with no field (a newer API's, unknown here) fails closed as the API says: a Deny or
// Pass rule denies everything, an Allow rule matches nothing.
func TestAdminUnknownPeerFailsClosed(t *testing.T) {
	client := mkPod("cli/c", "10.244.1.1", "app=client")
	server := mkPod("srv/s", "10.244.2.1", "app=server")
	for _, tc := range []struct {
		action Action
		allow  bool
	}{{ActionDeny, false}, {ActionPass, false}, {ActionAllow, true}} {
		p := &AdminPolicy{Kind: KindANP, Tier: TierAdmin, Name: "x", Priority: 1,
			Subject: AdminSubject{Namespaces: sel(corev1.LabelMetadataName + "=srv")},
			Ingress: []AdminRule{{Action: tc.action, Peers: []AdminPeer{{}}, AllPorts: true}}}
		in := mkInput([]*Namespace{mkNS("cli"), mkNS("srv")}, []*Pod{client, server}, nil, client, server)
		in.Admin = map[AdminKey]*AdminPolicy{p.Key(): p}
		c := NewCalculator(in)
		d := c.Verdict(Packet{Src: client.IPs[0], Dst: server.IPs[0], Protocol: "TCP", Port: 80})
		if d.Allowed != tc.allow {
			t.Errorf("%s with an empty peer: allowed %v (%s), want %v", tc.action, d.Allowed, d.Reason, tc.allow)
		}
		want := "DROP"
		if tc.allow {
			want = "ACCEPT"
		}
		k := newKernel(t, c.Render(ipfamily.IPv4), ipfamily.IPv4)
		if got := k.forward(testPacket{in: iface(client.Key), out: iface(server.Key), src: client.IPs[0], dst: server.IPs[0], proto: "tcp", port: 80}); got != want {
			t.Errorf("%s with an empty peer: rendered %s, want %s", tc.action, got, want)
		}
		if len(c.Problems()) == 0 {
			t.Errorf("%s with an empty peer: not reported", tc.action)
		}
	}
}

// A pod's traffic to its own node (INPUT) is policed by the admin tiers alone: an admin egress
// rule renders in its host chain; NetworkPolicy, which always allows it, keeps the baseline
// away; a pod no admin or baseline policy selects has no host chain.
func TestAdminHostChains(t *testing.T) {
	client := mkPod("cli/c", "10.244.1.1", "app=client")
	other := mkPod("cli/o", "10.244.1.2", "app=other")
	nodes := map[string]*Node{"n1": {Name: "n1", Labels: kv("role=worker"), IPs: []netip.Addr{netip.MustParseAddr("198.51.100.11")}}}
	toNodes := []anpv1alpha1.AdminNetworkPolicyEgressPeer{{Nodes: sel("role=worker")}}
	subject := anpv1alpha1.AdminNetworkPolicySubject{Pods: &anpv1alpha1.NamespacedPod{PodSelector: *sel("app=client")}}
	anp := FromANP(&anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-node"}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: 1, Subject: subject, Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{{Action: "Deny", To: toNodes}}}})
	banp := FromBANP(&anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Egress:  []anpv1alpha1.BaselineAdminNetworkPolicyEgressRule{{Action: "Deny", To: []anpv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Nodes: sel("role=worker")}}}}}})
	np := mkPolicy("cli/np", networkingv1.NetworkPolicySpec{PodSelector: *sel("app=other"), PolicyTypes: egressOnly()})
	in := mkInput([]*Namespace{mkNS("cli")}, []*Pod{client, other}, []*networkingv1.NetworkPolicy{np}, client, other)
	in.Nodes = nodes
	in.Admin = map[AdminKey]*AdminPolicy{anp.Key(): anp, banp.Key(): banp}
	r := Compute(in, ipfamily.IPv4)
	nodeSet := setName(setKindNodes, ipfamily.IPv4, `nodes="role=worker"`)
	ci, oi := iface(client.Key), iface(other.Key)
	if got, want := r.Chains[ChainToHost], []string{"-i " + ci + " -g " + ToHostPrefix + ci}; !slices.Equal(got, want) {
		t.Errorf("host dispatch %q, want %q (the other pod: NetworkPolicy selects it, the baseline does not reach it)", got, want)
	}
	// The client: the admin Deny, then (no NetworkPolicy selects it) the baseline's Deny.
	if got, want := r.Chains[ToHostPrefix+ci], []string{"-m set --match-set " + nodeSet + " dst -j DROP", "-g " + ToHostPassPrefix + ci}; !slices.Equal(got, want) {
		t.Errorf("client host chain %q, want %q", got, want)
	}
	if got, want := r.Chains[ToHostPassPrefix+ci], []string{"-m set --match-set " + nodeSet + " dst -j DROP"}; !slices.Equal(got, want) {
		t.Errorf("client host pass chain %q, want %q", got, want)
	}
	if _, ok := r.Chains[ToHostPrefix+oi]; ok {
		t.Errorf("the other pod has a host chain: %q", r.Chains[ToHostPrefix+oi])
	}
	if got := r.IPSets[nodeSet].Members; !slices.Equal(got, []string{"198.51.100.11"}) {
		t.Errorf("node set %q", got)
	}
}
