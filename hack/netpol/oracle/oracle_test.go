package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The cluster the tests judge: x/a (tier=web), x/b (tier=db), y/a (no tier), one address
// outside. Every pod serves 80 and 81 on TCP and UDP, and 80/SCTP; x/b names its 81/TCP "db"
// and its 81/UDP "dns", the others "serve-81-tcp" and "serve-81-udp".
func cluster(policies ...networkingv1.NetworkPolicy) Input {
	ports := func(tcp81, udp81 string) []Port {
		return []Port{
			{Name: "serve-80-tcp", Port: 80, Protocol: corev1.ProtocolTCP},
			{Name: tcp81, Port: 81, Protocol: corev1.ProtocolTCP},
			{Name: "serve-80-udp", Port: 80, Protocol: corev1.ProtocolUDP},
			{Name: udp81, Port: 81, Protocol: corev1.ProtocolUDP},
			{Name: "serve-80-sctp", Port: 80, Protocol: corev1.ProtocolSCTP},
		}
	}
	return Input{
		Policies: policies,
		Namespaces: map[string]map[string]string{
			"x": {"kubernetes.io/metadata.name": "x", "env": "prod"},
			"y": {"kubernetes.io/metadata.name": "y"},
		},
		Pods: []Pod{
			{Namespace: "x", Name: "a", Labels: map[string]string{"pod": "a", "tier": "web"}, IP: "10.244.1.1", Ports: ports("serve-81-tcp", "serve-81-udp")},
			{Namespace: "x", Name: "b", Labels: map[string]string{"pod": "b", "tier": "db"}, IP: "10.244.2.1", Ports: ports("db", "dns")},
			{Namespace: "y", Name: "a", Labels: map[string]string{"pod": "a"}, IP: "10.244.3.1", Ports: ports("serve-81-tcp", "serve-81-udp")},
		},
	}
}

func policy(ns, name string, spec networkingv1.NetworkPolicySpec) networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func proto(p corev1.Protocol) *corev1.Protocol { return &p }
func port(i int) *intstr.IntOrString           { v := intstr.FromInt32(int32(i)); return &v }
func named(s string) *intstr.IntOrString       { v := intstr.FromString(s); return &v }
func i32(i int32) *int32                       { return &i }

type want struct {
	from, to string
	port     int
	proto    corev1.Protocol
	allowed  bool
}

func judge(t *testing.T, in Input, wants []want) {
	t.Helper()
	for _, w := range wants {
		in.Probes = append(in.Probes, Probe{From: w.from, To: w.to, Port: w.port, Protocol: w.proto})
	}
	out, err := Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range wants {
		v := out.Verdicts[i]
		if v.Allowed != w.allowed {
			t.Errorf("%s -> %s %d/%s: allowed=%v, want %v (%s)", w.from, w.to, w.port, w.proto, v.Allowed, w.allowed, v.Why)
		}
	}
}

const tcp, udp, sctp = corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP

func TestNoPolicyAllowsAll(t *testing.T) {
	judge(t, cluster(), []want{
		{"x/a", "x/b", 80, tcp, true}, {"y/a", "x/a", 81, udp, true}, {"203.0.113.9", "x/a", 80, sctp, true},
	})
}

func TestDefaultDenyIngress(t *testing.T) {
	// policyTypes left empty: the API server's defaulting (Ingress) applies.
	judge(t, cluster(policy("x", "deny", networkingv1.NetworkPolicySpec{})), []want{
		{"x/a", "x/b", 80, tcp, false}, {"y/a", "x/a", 81, udp, false}, {"203.0.113.9", "x/a", 80, tcp, false},
		{"x/a", "y/a", 80, tcp, true}, // egress is not policed
	})
}

// A peer with only a podSelector means pods of the policy's namespace; with only a
// namespaceSelector, every pod of the selected namespaces; with both, the intersection.
func TestPeerSelectors(t *testing.T) {
	in := cluster(
		policy("x", "from-pod-a", networkingv1.NetworkPolicySpec{
			PodSelector: *sel("pod", "b"),
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "a")}}}},
		}),
	)
	judge(t, in, []want{{"x/a", "x/b", 80, tcp, true}, {"y/a", "x/b", 80, tcp, false}})

	in = cluster(policy("x", "from-ns-without-env", networkingv1.NetworkPolicySpec{
		PodSelector: *sel("pod", "b"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpDoesNotExist}}},
			PodSelector:       sel("pod", "a"),
		}}}},
	}))
	judge(t, in, []want{{"x/a", "x/b", 80, tcp, false}, {"y/a", "x/b", 80, tcp, true}})
}

// `tier NotIn (web)` selects pods without a tier label too (Kubernetes semantics); cyclonus's
// own selector code would not, which is what selectors.go works around.
func TestNotInSelectsPodsWithoutTheKey(t *testing.T) {
	notWeb := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}}
	in := cluster(policy("y", "isolate-non-web", networkingv1.NetworkPolicySpec{PodSelector: *notWeb}))
	judge(t, in, []want{{"x/a", "y/a", 80, tcp, false}})
	in = cluster(policy("x", "from-non-web", networkingv1.NetworkPolicySpec{
		PodSelector: *sel("pod", "a"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: notWeb, NamespaceSelector: &metav1.LabelSelector{},
		}}}},
	}))
	judge(t, in, []want{{"y/a", "x/a", 80, tcp, true}, {"x/b", "x/a", 80, tcp, true}})
}

// The deviation the shim exists for: if this fails, cyclonus changed and the shim may go.
func TestCyclonusNotInDeviation(t *testing.T) {
	s := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}}
	if kube.IsLabelsMatchLabelSelector(map[string]string{"pod": "a"}, s) {
		t.Fatal("cyclonus now matches NotIn on an absent key as Kubernetes does: the selector shim is no longer needed")
	}
}

func TestPorts(t *testing.T) {
	in := cluster(policy("x", "ports", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			{Port: port(80)}, // protocol defaults to TCP
			{Protocol: proto(udp), Port: named("dns")},
			{Protocol: proto(sctp), Port: port(81)},
		}}},
	}))
	judge(t, in, []want{
		{"y/a", "x/a", 80, tcp, true}, {"y/a", "x/a", 80, udp, false}, {"y/a", "x/a", 81, tcp, false},
		// "dns" is x/b's 81/UDP only; x/a has no port of that name.
		{"y/a", "x/b", 81, udp, true}, {"y/a", "x/a", 81, udp, false}, {"y/a", "x/b", 81, tcp, false},
		{"y/a", "x/a", 80, sctp, false},
	})
}

// A named port resolves against the destination pod, and only with the rule's protocol.
func TestNamedPortProtocol(t *testing.T) {
	in := cluster(policy("x", "db", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: named("db")}, {Protocol: proto(tcp), Port: named("dns")}}}},
	}))
	judge(t, in, []want{
		{"y/a", "x/b", 81, tcp, true},  // db is x/b's 81/TCP
		{"y/a", "x/a", 81, tcp, false}, // x/a has no "db"
		{"y/a", "x/b", 81, udp, false}, // "dns" is UDP, the rule TCP
	})
}

func TestEndPort(t *testing.T) {
	in := cluster(policy("x", "range", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: proto(udp), Port: port(81), EndPort: i32(90)}}}},
	}))
	judge(t, in, []want{{"y/a", "x/a", 81, udp, true}, {"y/a", "x/a", 80, udp, false}, {"y/a", "x/a", 81, tcp, false}})
}

// ipBlock matches pod addresses as well as external ones (as the upstream e2e tests expect),
// and except carves addresses out.
func TestIPBlock(t *testing.T) {
	in := cluster(
		policy("x", "egress-cidr", networkingv1.NetworkPolicySpec{
			PodSelector: *sel("pod", "a"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{
				IPBlock: &networkingv1.IPBlock{CIDR: "10.244.0.0/16", Except: []string{"10.244.2.1/32"}},
			}}}},
		}),
		policy("y", "ingress-cidr", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}}}},
		}),
	)
	judge(t, in, []want{
		{"x/a", "x/b", 80, tcp, false}, // excepted
		{"x/b", "x/a", 80, tcp, true},  // x/b's egress is not policed
		{"x/a", "y/a", 80, tcp, false}, // egress fine, but y's ingress admits only 203.0.113.0/24
		{"203.0.113.9", "y/a", 80, tcp, true},
		{"198.51.100.1", "y/a", 80, tcp, false},
	})
}

// Policies add up: a second policy selecting the same pod can only allow more.
func TestUnion(t *testing.T) {
	in := cluster(
		policy("x", "deny", networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}),
		policy("x", "allow-80", networkingv1.NetworkPolicySpec{
			PodSelector: *sel("pod", "a"),
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: port(80)}}}},
		}),
	)
	judge(t, in, []want{
		{"y/a", "x/a", 80, tcp, true}, {"y/a", "x/a", 81, tcp, false}, {"y/a", "x/b", 80, tcp, false},
		{"x/a", "y/a", 80, tcp, false}, // x/a's egress is denied by "deny"
	})
}

func TestRunRejectsUnknownKeysAndBadInput(t *testing.T) {
	var out bytes.Buffer
	if err := run(strings.NewReader(`{"probe": []}`), &out); err == nil || !strings.Contains(err.Error(), `"probe"`) {
		t.Errorf("misspelt key: err=%v", err)
	}
	in := cluster()
	in.Probes = []Probe{{From: "x/nope", To: "x/a", Port: 80, Protocol: tcp}}
	b, _ := json.Marshal(in)
	if err := run(bytes.NewReader(b), &out); err == nil || !strings.Contains(err.Error(), "x/nope") {
		t.Errorf("unknown source pod: err=%v", err)
	}
	// A port range that starts with a name (the API server refuses it; cyclonus panics).
	in = cluster(policy("x", "bad", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Port: named("db"), EndPort: i32(90)}},
	}}}))
	in.Probes = []Probe{{From: "x/a", To: "x/b", Port: 80, Protocol: tcp}}
	b, _ = json.Marshal(in)
	if err := run(bytes.NewReader(b), &out); err == nil || !strings.Contains(err.Error(), "cyclonus rejected") {
		t.Errorf("named port range: err=%v", err)
	}
}

func TestRunWritesVerdicts(t *testing.T) {
	in := cluster(policy("x", "deny", networkingv1.NetworkPolicySpec{}))
	in.Probes = []Probe{{From: "y/a", To: "x/a", Port: 80, Protocol: tcp}, {From: "x/a", To: "y/a", Port: 80, Protocol: tcp}}
	b, _ := json.Marshal(in)
	var out bytes.Buffer
	if err := run(bytes.NewReader(b), &out); err != nil {
		t.Fatal(err)
	}
	var got Output
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Verdicts) != 2 || got.Verdicts[0].Allowed || !got.Verdicts[1].Allowed || got.Verdicts[0].Ingress || !got.Verdicts[0].Egress {
		t.Fatalf("verdicts %+v", got.Verdicts)
	}
	if !strings.Contains(got.Verdicts[0].Why, "x/deny") {
		t.Errorf("why %q does not name the policy", got.Verdicts[0].Why)
	}
}
