package felix

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The benchmarks below are the policy manager's cost of one change (the message and the
// CompleteDeferredWork that follows it) in the cluster hack/bench/policy builds: 1,000 pods in
// five namespaces, 60 of them on this node, and 500 NetworkPolicies with peers of every kind.
// The writers do nothing, so only the manager's own work is measured.

const (
	policyBenchPods = 1000
	benchLocal      = 60
	benchPolicies   = 500
	benchNamespaces = 5
)

type benchChains struct{}

func (benchChains) UpdateChain(string, []string)  {}
func (benchChains) RemoveChain(string)            {}
func (benchChains) SetBaseJumps(string, []string) {}

type benchSets struct{}

func (benchSets) SetMembers(string, string, ipfamily.Family, []string) {}
func (benchSets) RemoveSet(string)                                     {}

func benchNS(i int) string { return "bench-" + strconv.Itoa(i%benchNamespaces) }

func benchPod(i int) *policy.Pod {
	l := map[string]string{"app": "app-" + strconv.Itoa(i%20), "tier": []string{"web", "db", "cache"}[i%3]}
	if i%50 == 3 {
		l["probe"] = "yes"
	}
	return &policy.Pod{Key: policy.Key{Namespace: benchNS(i), Name: "fake-" + strconv.Itoa(i)}, Labels: l,
		NamedPorts: []policy.NamedPort{{Name: "http", Protocol: "TCP", Port: 8080}}}
}

func benchAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 244, byte(64 + i/256), byte(i % 256)})
}

func labelSel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func tcpPort(p int32) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(p)
	return networkingv1.NetworkPolicyPort{Port: &v}
}

// benchPolicy i is hack/bench/policy's policy i: it selects app-(i%20) of its namespace and
// takes traffic from a tier, from the pods of a team's namespace on the named port, from a CIDR
// or from the probe pods; a third also limit egress to the db tier on the named port.
func benchPolicy(i int) *networkingv1.NetworkPolicy {
	http := intstr.FromString("http")
	var rule networkingv1.NetworkPolicyIngressRule
	switch i % 4 {
	case 0:
		rule.From = []networkingv1.NetworkPolicyPeer{{PodSelector: labelSel("tier", []string{"web", "db", "cache"}[i%3])}}
		rule.Ports = []networkingv1.NetworkPolicyPort{tcpPort(int32(80 + i%7))}
	case 1:
		rule.From = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: labelSel("team", "t"+strconv.Itoa((i+1)%benchNamespaces))}}
		rule.Ports = []networkingv1.NetworkPolicyPort{{Port: &http}}
	case 2:
		rule.From = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("198.18.%d.0/24", i%250), Except: []string{fmt.Sprintf("198.18.%d.128/25", i%250)}}}}
		end := int32(8100)
		p := tcpPort(8000)
		p.EndPort = &end
		rule.Ports = []networkingv1.NetworkPolicyPort{p}
	case 3:
		rule.From = []networkingv1.NetworkPolicyPeer{{PodSelector: labelSel("probe", "yes")}}
		rule.Ports = []networkingv1.NetworkPolicyPort{tcpPort(443)}
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS(i), Name: "p-" + strconv.Itoa(i), ResourceVersion: "1"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *labelSel("app", "app-"+strconv.Itoa(i%20)),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{rule},
		},
	}
	if i%3 == 0 {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: labelSel("tier", "db")}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptrTo(corev1.ProtocolTCP), Port: &http}},
		}}
	}
	return np
}

func ptrTo[T any](v T) *T { return &v }

// benchManager is a policy manager that has written the bench cluster's state once.
func benchManager(b *testing.B) (*policyManager, func()) {
	m := newPolicyManager(map[ipfamily.Family]ChainWriter{ipfamily.IPv4: benchChains{}, ipfamily.IPv6: benchChains{}}, benchSets{})
	for i := range benchNamespaces {
		m.OnUpdate(NamespaceUpdate{Namespace: policy.Namespace{Name: benchNS(i), Labels: map[string]string{"team": "t" + strconv.Itoa(i)}}})
	}
	ips := map[policy.Key][]netip.Addr{}
	var eps []policy.Endpoint
	for i := range policyBenchPods {
		p := benchPod(i)
		m.OnUpdate(PodUpdate{Pod: p})
		ips[p.Key] = []netip.Addr{benchAddr(i)}
		if i < benchLocal {
			eps = append(eps, policy.Endpoint{Interface: fmt.Sprintf("cali%011d", i), Pod: p.Key})
		}
	}
	m.OnUpdate(PodIPsUpdate{IPs: ips})
	for _, msg := range endpointUpdates(nil, eps) {
		m.OnUpdate(msg)
	}
	for i := range benchPolicies {
		m.OnUpdate(NetworkPolicyUpdate{Policy: benchPolicy(i)})
	}
	m.OnUpdate(PolicyInSync{})
	apply := func() {
		if err := m.CompleteDeferredWork(context.Background(), false); err != nil {
			b.Fatal(err)
		}
	}
	apply()
	return m, apply
}

// A pod on another node gains (and, every other time, loses) the one label a single pod
// selection of the 500 policies looks for.
func BenchmarkPolicyPodRelabel(b *testing.B) {
	m, apply := benchManager(b)
	plain := benchPod(benchLocal + 1) // bench-1, no probe label
	probe := *plain
	probe.Labels = map[string]string{"probe": "yes"}
	for k, v := range plain.Labels {
		probe.Labels[k] = v
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			m.OnUpdate(PodUpdate{Pod: &probe})
		} else {
			m.OnUpdate(PodUpdate{Pod: plain})
		}
		apply()
	}
}

// A NetworkPolicy selecting pods of this node is created; it is removed again outside the
// measurement.
func BenchmarkPolicyCreate(b *testing.B) {
	m, apply := benchManager(b)
	for i := 0; b.Loop(); i++ {
		np := benchPolicy(benchPolicies + 4*(i%1000)) // a new name, a tier peer
		m.OnUpdate(NetworkPolicyUpdate{Policy: np})
		apply()
		b.StopTimer()
		m.OnUpdate(NetworkPolicyRemove{Key: policy.Key{Namespace: np.Namespace, Name: np.Name}})
		apply()
		b.StartTimer()
	}
}

// A pod on another node, selected by peers and holding the named port, gets an IPv6 address;
// it goes again outside the measurement.
func BenchmarkPolicyPodAddressAdded(b *testing.B) {
	m, apply := benchManager(b)
	k := benchPod(benchLocal + 1).Key
	add := []policy.PodAddr{{Pod: k, IP: netip.MustParseAddr("fd00:10:244::99")}}
	for b.Loop() {
		m.OnUpdate(PodIPsDelta{Added: add})
		apply()
		b.StopTimer()
		m.OnUpdate(PodIPsDelta{Removed: add})
		apply()
		b.StartTimer()
	}
}
