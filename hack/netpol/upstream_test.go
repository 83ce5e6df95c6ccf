package netpol

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

// paperWorld is the truth-table cluster without a lab: the pods' addresses made up.
func paperWorld() *World {
	w := &World{Protocols: []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}, Ports: []int32{80, 81}}
	for i, ns := range Namespaces {
		for j, name := range PodNames {
			w.Pods = append(w.Pods, &lab.Pod{Name: name, Namespace: ns, IP: netip.AddrFrom4([4]byte{10, 244, byte(i), byte(10 + j)}), Ports: PodPorts(name)})
		}
	}
	return w
}

// reach is an upstream truth table (the Reachability of the e2e tests): every pair of the
// test's pods allowed unless an expectation says otherwise.
type reach struct {
	pods []string
	want map[[2]string]bool
}

func newReach(pods ...string) *reach { return &reach{pods: pods, want: map[[2]string]bool{}} }

// match is an upstream Peer: "x" a namespace, "x/a" a pod, "" anything.
func match(peer, pod string) bool {
	return peer == "" || peer == pod || (!strings.Contains(peer, "/") && strings.HasPrefix(pod, peer+"/"))
}

func (r *reach) peer(from, to string, v bool) *reach {
	for _, f := range r.pods {
		for _, t := range r.pods {
			if match(from, f) && match(to, t) {
				r.want[[2]string{f, t}] = v
			}
		}
	}
	return r
}

func (r *reach) allowed(from, to string) bool {
	v, ok := r.want[[2]string{from, to}]
	return !ok || v
}

// upstreamCheck is one ValidateOrFail of an upstream test: after step Step of case Case, the
// pods of the table on Port/Protocol connect as the table says.
type upstreamCheck struct {
	Case     string
	Step     int
	Port     int32
	Protocol corev1.Protocol
	Table    *reach
}

// TestCasesMatchUpstreamTables: the oracle, fed the upstream cases as written here, gives the
// verdicts the upstream tests expect, on the pods and port each upstream test probes. It
// proves both the translation of the tests into cases and the oracle's semantics against
// Kubernetes' own expectations. Where this world names a port differently (c's 80/TCP is
// "web", a's 81/TCP "dns"), the table leaves out the pods that would differ.
func TestCasesMatchUpstreamTables(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the oracle with the Go module proxy (skipped under -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o, err := BuildOracle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := paperWorld()
	r := NewRunner(w, o, nil, 0, t.Logf)
	cases := map[string]Case{}
	for _, c := range append(UpstreamCases(w), Baseline()) {
		cases[c.Name] = c
	}
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	checks := []upstreamCheck{
		{"no-policies", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "z/c")},
		{"default-deny-ingress", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "y/b").peer("", "x", false)},
		{"default-deny-all", 0, 80, tcp, newReach("x/a", "x/b", "y/a").peer("", "x", false).peer("x", "", false)},
		{"allow-from-pod-by-podselector", 0, 80, tcp, newReach("x/a", "x/b", "x/c", "y/a").peer("", "x/a", false).peer("x/b", "x/a", true)},
		{"allow-ingress-for-a-target", 0, 80, tcp, newReach("x/a", "x/b", "y/a").peer("", "x/a", true).peer("", "x/b", false)},
		{"allow-from-all-namespaces", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "z/a")},
		{"allow-only-from-namespace-y", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "z/a").peer("x", "x/a", false).peer("z", "x/a", false)},
		{"podselector-matchexpressions", 0, 80, tcp, newReach("x/a", "x/b", "y/a").peer("", "x/a", false).peer("x/b", "x/a", true)},
		{"namespaceselector-matchexpressions", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "z/a").peer("x", "x/a", false).peer("z", "x/a", false)},
		{"podselector-or-namespaceselector", 0, 80, tcp, newReach("x/a", "x/b", "x/c", "y/a").peer("x/c", "x/a", false)},
		{"podselector-and-namespaceselector", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "y/b", "z/b").peer("", "x/a", false).peer("y/b", "x/a", true).peer("z/b", "x/a", true)},
		{"multiple-podselectors-and-namespaceselectors", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "y/b", "y/c").peer("x", "x/a", false).peer("y/a", "x/a", false)},
		{"any-podselectors", 0, 80, tcp, newReach("x/a", "x/b", "x/c").peer("", "x/a", false).peer("x/b", "x/a", true).peer("x/c", "x/a", true)},
		{"pod-in-other-namespace", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "y/b", "z/a").peer("", "x/a", false).peer("y/a", "x/a", true)},
		{"ports", 0, 81, tcp, newReach("x/a", "x/b", "y/a", "y/b", "z/a").peer("x", "x/a", false).peer("y", "x/a", true).peer("z", "x/a", false)},
		{"stacked-policies", 0, 81, tcp, newReach("x/a", "x/b", "y/a", "y/b", "z/a").peer("x", "x/a", false).peer("y", "x/a", true).peer("z", "x/a", false)},
		{"stacked-policies", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "y/b", "z/a").peer("", "x/a", false)},
		{"stacked-policies", 1, 80, tcp, newReach("x/a", "x/b", "y/a", "y/b", "z/a").peer("x", "x/a", false).peer("y", "x/a", true).peer("z", "x/a", false)},
		{"allow-all", 0, 80, tcp, newReach("x/a", "x/b", "y/a")},
		{"allow-all", 0, 81, tcp, newReach("x/a", "x/b", "y/a")},
		// x/a names its 81/TCP "dns": upstream's x/a is x/c here.
		{"ingress-named-port", 0, 81, tcp, newReach("x/c", "x/b", "y/a")},
		{"ingress-named-port", 0, 80, tcp, newReach("x/c", "x/b", "y/a").peer("", "x", false)},
		{"ingress-named-port-from-namespace", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "z/a").peer("x", "x/a", false).peer("z", "x/a", false)},
		{"ingress-named-port-from-namespace", 0, 81, tcp, newReach("x/a", "x/b", "y/a", "z/a").peer("", "x/a", false)},
		{"egress-named-port", 0, 80, tcp, newReach("x/a", "y/a")},
		{"egress-named-port", 0, 81, tcp, newReach("x/a", "y/a").peer("x", "", false)},
		{"updated-policy", 0, 81, tcp, newReach("x/a", "y/a")},
		{"updated-policy", 1, 81, tcp, newReach("x/a", "y/a").peer("", "x", false)},
		{"updated-namespace-labels", 0, 80, tcp, newReach("x/a", "y/a").peer("", "x/a", false)},
		{"updated-namespace-labels", 1, 80, tcp, newReach("x/a", "y/a").peer("", "x/a", false).peer("y", "", true)},
		{"updated-pod-labels", 0, 80, tcp, newReach("x/a", "x/b").peer("", "x/a", false)},
		{"updated-pod-labels", 1, 80, tcp, newReach("x/a", "x/b").peer("", "x/a", false).peer("x/b", "x/a", true)},
		{"deny-ingress-from-other-namespaces", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "z/a").peer("y", "x", false).peer("z", "x", false)},
		{"deny-ingress-to-updated-pod", 0, 80, tcp, newReach("x/a", "y/a")},
		{"deny-ingress-to-updated-pod", 1, 80, tcp, newReach("x/a", "y/a").peer("", "x/a", false)},
		{"deny-egress-by-podselector", 0, 80, tcp, newReach("x/a", "x/b", "y/a").peer("x/a", "", false)},
		{"deny-egress-all-namespace", 0, 80, tcp, newReach("x/a", "x/b", "y/a").peer("x", "", false)},
		{"ingress-and-egress-together", 0, 80, tcp, newReach("x/a", "x/b", "x/c", "y/a").peer("", "x/a", false).peer("x/b", "x/a", true)},
		{"ingress-and-egress-together", 0, 81, tcp, newReach("x/a", "x/b", "x/c", "y/a").peer("", "x/a", false).peer("x/a", "", false).peer("x/b", "x/a", true)},
		{"egress-denied-client-side", 0, 80, tcp, newReach("x/a", "y/a", "y/b").peer("x/a", "", false).peer("", "y/a", false).peer("x/a", "y/a", true).peer("", "y/b", false)},
		{"egress-to-pod-in-other-namespace", 0, 80, tcp, newReach("x/a", "y/a", "y/b").peer("x/a", "", false).peer("x/a", "y/a", true)},
		{"ingress-any-port-by-protocol", 0, 80, tcp, newReach("x/a", "y/a")},
		{"ingress-any-port-by-protocol", 0, 80, udp, newReach("x/a", "y/a").peer("", "x/a", false)},
		{"ingress-allow-all-precedence", 0, 81, tcp, newReach("x/a", "y/a").peer("", "x", false)},
		{"ingress-allow-all-precedence", 1, 81, tcp, newReach("x/a", "y/a")},
		{"egress-allow-all-precedence", 0, 81, tcp, newReach("x/a", "y/a").peer("x", "", false)},
		{"egress-allow-all-precedence", 1, 81, tcp, newReach("x/a", "y/a")},
		{"stop-enforcing-after-delete", 0, 80, tcp, newReach("x/a", "y/a").peer("x", "", false).peer("", "x", false)},
		{"stop-enforcing-after-delete", 1, 80, tcp, newReach("x/a", "y/a")},
		{"egress-to-cidr", 0, 80, tcp, newReach("x/a", "y/a", "y/b").peer("x/a", "", false).peer("x/a", "y/b", true)},
		{"egress-cidr-except", 0, 80, tcp, newReach("x/a", "x/b", "x/c").peer("x/a", "x/b", false)},
		{"egress-cidr-except-then-replaced", 0, 80, tcp, newReach("x/a", "x/b", "x/c").peer("x/a", "x/b", false)},
		{"egress-cidr-except-then-replaced", 1, 80, tcp, newReach("x/a", "x/b", "x/c").peer("x/a", "", false).peer("x/a", "x/b", true)},
		{"independent-ingress-and-egress", 0, 80, tcp, newReach("x/a", "x/b", "y/a")},
		{"independent-ingress-and-egress", 1, 80, tcp, newReach("x/a", "x/b", "y/a").peer("", "x/a", false)},
		{"sctp-is-not-tcp", 0, 81, tcp, newReach("x/a", "y/a").peer("", "x", false)},
		{"sctp-only-policy-isolates", 0, 81, tcp, newReach("x/a", "y/a").peer("", "x/a", false)},
		{"udp-only-policy-is-not-tcp", 0, 81, tcp, newReach("x/a", "y/a").peer("", "x/a", false)},
		{"egress-namespaceselector-notin", 0, 80, tcp, newReach("x/a", "x/b", "y/a", "z/a").peer("x/a", "y", false)},
		{"udp-ports", 0, 81, udp, newReach("x/a", "x/b", "y/a", "z/a").peer("x", "x/a", false).peer("z", "x/a", false)},
		{"sctp-ports", 0, 81, sctp, newReach("x/a", "x/b", "y/a", "z/a").peer("x", "x/a", false).peer("z", "x/a", false)},
		{"sctp-ports", 0, 81, tcp, newReach("x/a", "x/b", "y/a", "z/a").peer("", "x/a", false)},
	}
	checked := map[string]bool{}
	pairs := 0
	for _, ck := range checks {
		c, ok := cases[ck.Case]
		if !ok {
			t.Errorf("no case %q", ck.Case)
			continue
		}
		checked[ck.Case] = true
		want, err := r.Expect(ctx, c, ck.Step)
		if err != nil {
			t.Fatal(err)
		}
		for _, from := range ck.Table.pods {
			for _, to := range ck.Table.pods {
				if from == to {
					continue // upstream ignores loopback too
				}
				pairs++
				p := Probe{From: from, To: to, Port: ck.Port, Protocol: ck.Protocol}
				v, ok := want[p]
				if !ok {
					t.Fatalf("no verdict for %s", p)
				}
				if exp := ck.Table.allowed(from, to); v.Allowed != exp {
					t.Errorf("%s step %d: %s: oracle says allowed=%v, upstream expects %v (%s)", ck.Case, ck.Step, p, v.Allowed, exp, v.Why)
				}
			}
		}
	}
	for name := range cases {
		if !checked[name] {
			t.Errorf("case %s has no upstream table here", name)
		}
	}
	t.Logf("%d upstream tables, %d pairs: the oracle agrees", len(checks), pairs)
}

// TestCasesAreValid: every case of every kind is accepted by the oracle on the paper world,
// and no two cases share a name (they are subtests).
func TestCasesAreValid(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the oracle with the Go module proxy (skipped under -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o, err := BuildOracle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := paperWorld()
	r := NewRunner(w, o, nil, 0, t.Logf)
	all := append(append(append(append([]Case{Baseline()}, UpstreamCases(w)...), MoreCases(w)...), GridCases(w)...), RandomCases(w, 1, 20)...)
	names := map[string]bool{}
	steps, allowed, total := 0, 0, 0
	for _, c := range all {
		if names[c.Name] {
			t.Errorf("case name %s twice", c.Name)
		}
		names[c.Name] = true
		for i := range c.Steps {
			want, err := r.Expect(ctx, c, i)
			if err != nil {
				t.Errorf("%s: %v", c.Name, err)
				continue
			}
			steps++
			for _, v := range want {
				total++
				if v.Allowed {
					allowed++
				}
			}
		}
	}
	t.Logf("%d cases, %d steps, %d verdicts (%d allowed)", len(all), steps, total, allowed)
	a, _ := json.Marshal(RandomCases(w, 7, 3))
	b, _ := json.Marshal(RandomCases(w, 7, 3))
	if string(a) != string(b) {
		t.Error("the same seed gave different random cases")
	}
}
