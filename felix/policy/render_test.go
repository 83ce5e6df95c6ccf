package policy

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The cluster every feature case runs against. prod/web and prod/db are on this node, so is
// prod/agent, a host-network pod (never an endpoint, never a peer).
var (
	nsProd = mkNS("prod", "env=prod", "team=a")
	nsDev  = mkNS("dev", "env=dev", "team=b")
	nsOps  = mkNS("ops", "team=a")

	podWeb = mkPod("prod/web", "10.0.1.1 fd00::1:1", "app=web", "tier=fe").withPorts(
		NamedPort{Name: "http", Protocol: "TCP", Port: 8080},
		NamedPort{Name: "metrics", Port: 9090}) // no protocol: TCP
	podDB  = mkPod("prod/db", "10.0.1.2 fd00::1:2", "app=db", "tier=be").withPorts(NamedPort{Name: "pg", Protocol: "TCP", Port: 5432})
	podAPI = mkPod("prod/api", "10.0.1.3 fd00::1:3", "app=api", "tier=be").withPorts(
		NamedPort{Name: "http", Protocol: "TCP", Port: 80},
		NamedPort{Name: "http", Protocol: "UDP", Port: 443})
	podDevWeb = mkPod("dev/web", "10.0.2.1 fd00::2:1", "app=web").withPorts(NamedPort{Name: "http", Protocol: "TCP", Port: 8081})
	podTool   = mkPod("dev/tool", "10.0.2.2", "app=tool")
	podMon    = mkPod("ops/mon", "10.0.3.1 fd00::3:1", "app=mon")
	podAgent  = mkPod("prod/agent", "192.168.0.10", "app=web", "tier=fe").onHost().withPorts(NamedPort{Name: "http", Protocol: "TCP", Port: 10250})
)

func fixture(pols ...*networkingv1.NetworkPolicy) Input {
	return mkInput(
		[]*Namespace{nsProd, nsDev, nsOps},
		[]*Pod{podWeb, podDB, podAPI, podDevWeb, podTool, podMon, podAgent},
		pols,
		podWeb, podDB, podAgent)
}

type spec = networkingv1.NetworkPolicySpec
type ingressRule = networkingv1.NetworkPolicyIngressRule
type egressRule = networkingv1.NetworkPolicyEgressRule
type peers = []networkingv1.NetworkPolicyPeer
type ports = []networkingv1.NetworkPolicyPort

func TestRenderFeatures(t *testing.T) {
	webOnly := *sel("app=web")
	cases := []struct {
		name string
		pols []*networkingv1.NetworkPolicy
		// tw and fw are prod/web's ingress and egress chains with sets written as their
		// members; nil: no chain, the dispatch rule returns.
		tw, fw []string
	}{
		{
			name: "default deny ingress",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/deny", spec{PolicyTypes: ingressOnly()})},
			tw:   []string{"-j DROP"},
		},
		{
			name: "default deny egress",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/deny", spec{PolicyTypes: egressOnly()})},
			fw:   []string{"-j DROP"},
		},
		{
			name: "default deny both ways",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/deny", spec{PolicyTypes: bothTypes()})},
			tw:   []string{"-j DROP"},
			fw:   []string{"-j DROP"},
		},
		{
			name: "implied policyTypes: ingress rules only police ingress",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{PodSelector: webOnly,
				Ingress: []ingressRule{{From: peers{podPeer(sel("app=api"))}}}})},
			tw: []string{"-m set --match-set {10.0.1.3} src -j RETURN", "-j DROP"},
		},
		{
			name: "implied policyTypes: egress rules add egress, ingress is always implied",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{
				Egress: []egressRule{{To: peers{podPeer(sel("app=db"))}}}})},
			tw: []string{"-j DROP"},
			fw: []string{"-m set --match-set {10.0.1.2} dst -j RETURN", "-j DROP"},
		},
		{
			name: "explicit policyTypes Egress ignores ingress rules",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{PolicyTypes: egressOnly(),
				Ingress: []ingressRule{{}}, Egress: []egressRule{{}}})},
			fw: []string{"-j RETURN", "-j DROP"},
		},
		{
			name: "a rule with no from and no ports allows everything",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{PodSelector: webOnly, Ingress: []ingressRule{{}}})},
			tw:   []string{"-j RETURN", "-j DROP"},
		},
		{
			name: "podSelector {} as a peer: every pod-network pod of the policy's namespace",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{podPeer(sel())}}}})},
			tw:   []string{"-m set --match-set {10.0.1.1 | 10.0.1.2 | 10.0.1.3} src -j RETURN", "-j DROP"},
		},
		{
			name: "podSelector alone looks only in the policy's namespace",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{podPeer(sel("app=web"))}}}})},
			tw:   []string{"-m set --match-set {10.0.1.1} src -j RETURN", "-j DROP"},
		},
		{
			name: "namespaceSelector alone: every pod of the matching namespaces",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{nsPeer(sel("team=a"))}}}})},
			tw:   []string{"-m set --match-set {10.0.1.1 | 10.0.1.2 | 10.0.1.3 | 10.0.3.1} src -j RETURN", "-j DROP"},
		},
		{
			name: "namespaceSelector by the kubernetes.io/metadata.name label",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{nsPeer(sel("kubernetes.io/metadata.name=dev"))}}}})},
			tw:   []string{"-m set --match-set {10.0.2.1 | 10.0.2.2} src -j RETURN", "-j DROP"},
		},
		{
			name: "namespaceSelector and podSelector together: both must match",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{bothPeer(sel(), sel("app=web"))}}}})},
			tw:   []string{"-m set --match-set {10.0.1.1 | 10.0.2.1} src -j RETURN", "-j DROP"},
		},
		{
			name: "matchExpressions In",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{podPeer(expr("app", metav1.LabelSelectorOpIn, "api", "db"))}}}})},
			tw:   []string{"-m set --match-set {10.0.1.2 | 10.0.1.3} src -j RETURN", "-j DROP"},
		},
		{
			name: "matchExpressions NotIn",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{bothPeer(sel(), expr("app", metav1.LabelSelectorOpNotIn, "web", "tool"))}}}})},
			tw:   []string{"-m set --match-set {10.0.1.2 | 10.0.1.3 | 10.0.3.1} src -j RETURN", "-j DROP"},
		},
		{
			name: "matchExpressions Exists",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{bothPeer(sel(), expr("tier", metav1.LabelSelectorOpExists))}}}})},
			tw:   []string{"-m set --match-set {10.0.1.1 | 10.0.1.2 | 10.0.1.3} src -j RETURN", "-j DROP"},
		},
		{
			name: "matchExpressions DoesNotExist",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{bothPeer(sel(), expr("tier", metav1.LabelSelectorOpDoesNotExist))}}}})},
			tw:   []string{"-m set --match-set {10.0.2.1 | 10.0.2.2 | 10.0.3.1} src -j RETURN", "-j DROP"},
		},
		{
			name: "policy podSelector with matchExpressions",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{PodSelector: *expr("tier", metav1.LabelSelectorOpIn, "fe"), PolicyTypes: ingressOnly()})},
			tw:   []string{"-j DROP"},
		},
		{
			name: "ipBlock: except entries are nomatch, a host prefix is a bare address",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{blockPeer("10.0.0.0/16", "10.0.2.0/24", "10.0.1.1/32")}}}})},
			tw:   []string{"-m set --match-set {10.0.0.0/16 | 10.0.1.1 nomatch | 10.0.2.0/24 nomatch} src -j RETURN", "-j DROP"},
		},
		{
			name: "ipBlock 0.0.0.0/0 is two halves: hash:net holds no /0",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{blockPeer("0.0.0.0/0", "10.0.0.0/8")}}}})},
			tw:   []string{"-m set --match-set {0.0.0.0/1 | 10.0.0.0/8 nomatch | 128.0.0.0/1} src -j RETURN", "-j DROP"},
		},
		{
			name: "ipBlock /0 with an except covering one half keeps the other",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{blockPeer("0.0.0.0/0", "0.0.0.0/1")}}}})},
			tw:   []string{"-m set --match-set {128.0.0.0/1} src -j RETURN", "-j DROP"},
		},
		{
			name: "ipBlock cidr as older API servers stored it: leading zeros, host bits",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{blockPeer("010.000.1.7/24")}}}})},
			tw:   []string{"-m set --match-set {10.0.1.0/24} src -j RETURN", "-j DROP"},
		},
		{
			name: "ipBlock of the other family matches nothing here (not everything)",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{blockPeer("fd00::/8")}}}})},
			tw:   []string{"-j DROP"},
		},
		{
			name: "port by number, TCP by default",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{Ports: ports{port("", 80)}}}})},
			tw:   []string{"-p tcp -m tcp --dport 80 -j RETURN", "-j DROP"},
		},
		{
			name: "ports UDP and SCTP",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{Ports: ports{port("UDP", 53), port("SCTP", 7777)}}}})},
			tw:   []string{"-p udp -m udp --dport 53 -j RETURN", "-p sctp -m sctp --dport 7777 -j RETURN", "-j DROP"},
		},
		{
			name: "port range with endPort",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{Ports: ports{portSpan("", 8000, 8999)}}}})},
			tw:   []string{"-p tcp -m tcp --dport 8000:8999 -j RETURN", "-j DROP"},
		},
		{
			name: "a protocol without a port: all its ports",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{Ports: ports{allPortsOf("UDP")}}}})},
			tw:   []string{"-p udp -j RETURN", "-j DROP"},
		},
		{
			name: "ingress named port: the selected pod's own port, container protocol defaulting to TCP",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{Ports: ports{namedPort("", "http"), namedPort("TCP", "metrics")}}}})},
			tw:   []string{"-p tcp -m tcp --dport 8080 -j RETURN", "-p tcp -m tcp --dport 9090 -j RETURN", "-j DROP"},
		},
		{
			name: "ingress named port of another protocol does not resolve",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{Ports: ports{namedPort("UDP", "http")}}}})},
			tw:   []string{"-j DROP"},
		},
		{
			name: "egress named port: each destination's own port, intersected with the peers",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{PodSelector: webOnly, PolicyTypes: egressOnly(),
				Egress: []egressRule{{To: peers{podPeer(sel("tier=be"))}, Ports: ports{namedPort("", "http")}}}})},
			fw: []string{
				"-m set --match-set {10.0.1.2 | 10.0.1.3} dst -m set --match-set {10.0.1.1,tcp:8080 | 10.0.1.3,tcp:80 | 10.0.2.1,tcp:8081} dst,dst -j RETURN",
				"-j DROP",
			},
		},
		{
			name: "egress named port to anywhere: any pod with that port and protocol",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{PodSelector: webOnly, PolicyTypes: egressOnly(),
				Egress: []egressRule{{Ports: ports{namedPort("UDP", "http")}}}})},
			fw: []string{"-m set --match-set {10.0.1.3,udp:443} dst,dst -j RETURN", "-j DROP"},
		},
		{
			name: "egress to an ipBlock and ports",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{PolicyTypes: egressOnly(),
				Egress: []egressRule{{To: peers{blockPeer("192.0.2.0/24")}, Ports: ports{port("UDP", 53)}}}})},
			fw: []string{"-p udp -m set --match-set {192.0.2.0/24} dst -m udp --dport 53 -j RETURN", "-j DROP"},
		},
		{
			name: "peers times ports, peer by peer",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{
				From:  peers{podPeer(sel("app=api")), blockPeer("192.0.2.0/24")},
				Ports: ports{port("", 80), port("UDP", 53)}}}})},
			tw: []string{
				"-p tcp -m set --match-set {10.0.1.3} src -m tcp --dport 80 -j RETURN",
				"-p udp -m set --match-set {10.0.1.3} src -m udp --dport 53 -j RETURN",
				"-p tcp -m set --match-set {192.0.2.0/24} src -m tcp --dport 80 -j RETURN",
				"-p udp -m set --match-set {192.0.2.0/24} src -m udp --dport 53 -j RETURN",
				"-j DROP",
			},
		},
		{
			name: "several policies: their union, in name order, a rule two policies share once",
			pols: []*networkingv1.NetworkPolicy{
				mkPolicy("prod/b", spec{Ingress: []ingressRule{{From: peers{podPeer(sel("app=api"))}}, {Ports: ports{port("UDP", 53)}}}}),
				mkPolicy("prod/a", spec{PodSelector: webOnly, Ingress: []ingressRule{{Ports: ports{port("", 80)}}, {From: peers{podPeer(sel("app=api"))}}}}),
			},
			tw: []string{
				"-p tcp -m tcp --dport 80 -j RETURN",
				"-m set --match-set {10.0.1.3} src -j RETURN",
				"-p udp -m udp --dport 53 -j RETURN",
				"-j DROP",
			},
		},
		{
			name: "a policy of another namespace does not select",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("dev/deny", spec{PolicyTypes: bothTypes()})},
		},
		{
			name: "a policy whose podSelector does not match does not select",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/deny", spec{PodSelector: *sel("app=db"), PolicyTypes: bothTypes()})},
		},
		{
			name: "fails closed: a peer with nothing in it matches nothing",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{{}}}}})},
			tw:   []string{"-j DROP"},
		},
		{
			name: "fails closed: an unparsable cidr matches nothing",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{blockPeer("banana")}}}})},
			tw:   []string{"-j DROP"},
		},
		{
			name: "fails closed: an except covering the cidr leaves nothing",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{From: peers{blockPeer("10.0.0.0/24", "10.0.0.0/16")}}}})},
			tw:   []string{"-j DROP"},
		},
		{
			name: "fails closed: an unknown protocol, an endPort below port",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{Ingress: []ingressRule{{Ports: ports{port("ICMP", 8), portSpan("", 90, 80)}}}})},
			tw:   []string{"-j DROP"},
		},
		{
			name: "an invalid policy podSelector selects no pod",
			pols: []*networkingv1.NetworkPolicy{mkPolicy("prod/p", spec{PodSelector: *expr("app", "Bogus", "web"), PolicyTypes: bothTypes()})},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(fixture(tc.pols...), ipfamily.IPv4)
			newKernel(t, r, ipfamily.IPv4)
			w := iface(podWeb.Key)
			checkChain(t, r, ToWorkloadPrefix+w, "-o "+w, tc.tw)
			checkChain(t, r, FromWorkloadPrefix+w, "-i "+w, tc.fw)
			// The dispatch chains end with the default drop, and a host-network pod is no
			// endpoint even on this node.
			for chain, flag := range map[string]string{ChainToWorkload: "-o", ChainFromWorkload: "-i"} {
				d := r.Chains[chain]
				if len(d) != 3 || d[2] != flag+" cali+ -j DROP" {
					t.Errorf("%s = %q, want prod/db, prod/web, then the default drop", chain, d)
				}
			}
		})
	}
}

// checkChain checks one endpoint chain and the dispatch rule leading to it.
func checkChain(t *testing.T, r Rendered, chain, match string, want []string) {
	t.Helper()
	dispatch := ChainFromWorkload
	if strings.HasPrefix(match, "-o") {
		dispatch = ChainToWorkload
	}
	rule := match + " -j RETURN"
	if want != nil {
		rule = match + " -g " + chain
	}
	if !slices.Contains(r.Chains[dispatch], rule) {
		t.Errorf("%s = %q, want it to hold %q", dispatch, r.Chains[dispatch], rule)
	}
	got, ok := r.Chains[chain]
	if !ok && want == nil {
		return
	}
	if !slices.Equal(readable(r, got), want) {
		t.Errorf("%s:\n got  %q\n want %q", chain, readable(r, got), want)
	}
}
