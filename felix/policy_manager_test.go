package felix

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/policy"
)

// policyCluster is a cluster as the policy manager's messages describe it: pods in three
// namespaces, some of them on this node, and policies that select them by label.
type policyCluster struct {
	pods  map[policy.Key]policy.Pod
	ips   map[policy.Key][]netip.Addr
	local []policy.Endpoint
	sent  []policy.Endpoint // the endpoints felix was last told of
}

// sendEndpoints tells felix of the local endpoints that came and went since the last call.
func (c *policyCluster) sendEndpoints(f *Felix) {
	for _, m := range endpointUpdates(c.sent, c.local) {
		f.OnUpdate(m)
	}
	c.sent = append([]policy.Endpoint(nil), c.local...)
}

func newPolicyCluster(pods, local int) *policyCluster {
	c := &policyCluster{pods: map[policy.Key]policy.Pod{}, ips: map[policy.Key][]netip.Addr{}}
	for i := range pods {
		c.add(i, i < local)
	}
	return c
}

func (c *policyCluster) add(i int, local bool) (policy.Pod, policy.Endpoint) {
	k := policy.Key{Namespace: fmt.Sprintf("ns-%d", i%3), Name: fmt.Sprintf("pod-%d", i)}
	p := policy.Pod{Key: k, Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%10), "tier": []string{"web", "db"}[i%2]},
		NamedPorts: []policy.NamedPort{{Name: "http", Protocol: "TCP", Port: 8080}}}
	c.pods[k] = p
	c.ips[k] = []netip.Addr{netip.AddrFrom4([4]byte{10, 244, byte(i / 250), byte(1 + i%250)})}
	ep := policy.Endpoint{Interface: fmt.Sprintf("cali%011d", i), Pod: k}
	if local {
		c.local = append(c.local, ep)
	}
	return p, ep
}

// send hands felix the whole cluster and policies, then PolicyInSync.
func (c *policyCluster) send(f *Felix, policies int) {
	for ns := range 3 {
		name := fmt.Sprintf("ns-%d", ns)
		f.OnUpdate(NamespaceUpdate{Namespace: policy.Namespace{Name: name, Labels: map[string]string{"team": name}}})
	}
	for _, p := range c.pods {
		f.OnUpdate(PodUpdate{Pod: &p})
	}
	c.sendEndpoints(f)
	c.sendIPs(f)
	for i := range policies {
		f.OnUpdate(NetworkPolicyUpdate{Policy: testPolicy(i)})
	}
	f.OnUpdate(PolicyInSync{})
}

func (c *policyCluster) sendIPs(f *Felix) {
	ips := make(map[policy.Key][]netip.Addr, len(c.ips))
	for k, v := range c.ips {
		ips[k] = v
	}
	f.OnUpdate(PodIPsUpdate{IPs: ips})
}

// testPolicy i: pods of app-(i%10) in ns-(i%3) take HTTP from one tier of ns-((i+1)%3) and
// from a CIDR; even ones also limit egress to the db tier on a named port.
func testPolicy(i int) *networkingv1.NetworkPolicy {
	tcp := networkingv1.NetworkPolicyPort{Port: &intstr.IntOrString{IntVal: int32(80 + i%5)}}
	named := networkingv1.NetworkPolicyPort{Port: &intstr.IntOrString{Type: intstr.String, StrVal: "http"}}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%3), Name: fmt.Sprintf("pol-%d", i), ResourceVersion: "1"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i%10)}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("ns-%d", (i+1)%3)}},
						PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": []string{"web", "db"}[i%2]}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("192.0.2.%d/32", i%250)}},
				},
				Ports: []networkingv1.NetworkPolicyPort{tcp},
			}},
		},
	}
	if i%2 == 0 {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}}},
			Ports: []networkingv1.NetworkPolicyPort{named},
		}}
	}
	return np
}

type writerCalls struct {
	restores, ipsets int
	restoreLines     int
	other            []string
}

func countWriterCalls(kern *fakekernel.Kernel) writerCalls {
	var w writerCalls
	for _, c := range kern.Calls() {
		switch {
		case strings.HasSuffix(c.Name, "-restore"):
			w.restores++
			w.restoreLines += strings.Count(c.Stdin, "\n")
		case c.Name == "ipset":
			w.ipsets++
		default:
			w.other = append(w.other, c.Name)
		}
	}
	return w
}

// With policies in force, what a pod changes is one small batch: a pod elsewhere in the
// cluster is set members only, a pod on this node its own two chains and the dispatch rules,
// never a rewrite of every chain; and nothing at all is written before PolicyInSync.
func TestPolicyChangesAreSmallBatches(t *testing.T) {
	const pods, local, policies = 600, 30, 100
	kern := fakekernel.New()
	f, _, _ := fullSyncedFelixOn(t, kern, nil, 1)
	c := newPolicyCluster(pods, local)

	// Everything but PolicyInSync: nothing of policy may reach the kernel.
	kern.ResetCalls()
	c.send(f, policies)
	f.updates.msgs = f.updates.msgs[:len(f.updates.msgs)-1] // hold PolicyInSync back
	f.mustApply(t)
	for name, rules := range kern.Chains("iptables-nft", "filter") {
		if strings.HasPrefix(name, policy.NamePrefix) || len(rules) > 0 {
			t.Fatalf("before PolicyInSync the filter table got %s %v", name, rules)
		}
	}
	f.OnUpdate(PolicyInSync{})
	f.mustApply(t)
	full := countWriterCalls(kern)
	chains := kern.Chains("iptables-nft", "filter")
	if len(chains[policy.ChainFromWorkload]) < local || full.restoreLines < 200 {
		t.Fatalf("full state: dispatch %v, %+v", chains[policy.ChainFromWorkload], full)
	}
	t.Logf("full state: %d iptables-restore (%d lines), %d ipset restores, %d chains", full.restores, full.restoreLines, full.ipsets, len(chains))

	step := func(what string, change func(), maxRestores, maxLines, maxIPSets int) {
		t.Helper()
		kern.ResetCalls()
		change()
		f.mustApply(t)
		got := countWriterCalls(kern)
		if got.restores > maxRestores || got.restoreLines > maxLines || got.ipsets > maxIPSets || len(got.other) > 0 {
			t.Fatalf("%s: %+v, want at most %d iptables-restore of %d lines and %d ipset restores\n%v", what, got, maxRestores, maxLines, maxIPSets, kern.Calls())
		}
		t.Logf("%s: %+v", what, got)
	}
	// A pod on another node joins selections: set members only.
	step("remote pod added", func() {
		p, _ := c.add(pods, false)
		f.OnUpdate(PodUpdate{Pod: &p})
		c.sendIPs(f)
	}, 0, 0, 1)
	// A pod on this node: its chains and the two dispatch chains, one restore per family (the
	// fake kernel has ip6tables too; the pod's IPv6 chains drop what it has no address for).
	step("local pod added", func() {
		p, _ := c.add(pods+1, true)
		f.OnUpdate(PodUpdate{Pod: &p})
		c.sendIPs(f)
		c.sendEndpoints(f)
	}, 2, 2*(2*(local+3)+20), 1)
	// A relabelled remote pod moves between sets: members only.
	step("remote pod relabelled", func() {
		p := c.pods[policy.Key{Namespace: "ns-0", Name: "pod-300"}]
		p.Labels = map[string]string{"app": "app-0", "tier": "db"}
		c.pods[p.Key] = p
		f.OnUpdate(PodUpdate{Pod: &p})
	}, 0, 0, 1)
	// The same snapshot again (tabby-node sends it on every datastore event): nothing.
	step("unchanged snapshot", func() {
		c.sendIPs(f)
		c.sendEndpoints(f)
	}, 0, 0, 0)
}

// With no NetworkPolicy in the cluster, pods coming and going cost the dataplane nothing.
func TestNoPolicyPodsCostNothing(t *testing.T) {
	kern := fakekernel.New()
	f, _, _ := fullSyncedFelixOn(t, kern, nil, 1)
	c := newPolicyCluster(200, 10)
	c.send(f, 0)
	f.mustApply(t)
	if got := kern.Chains("iptables-nft", "filter"); len(got[policy.ChainForward]) == 0 || len(got[policy.ChainFromWorkload]) != 0 {
		t.Fatalf("no policy: filter table %v", got)
	}
	kern.ResetCalls()
	p, _ := c.add(200, true)
	f.OnUpdate(PodUpdate{Pod: &p})
	c.sendIPs(f)
	c.sendEndpoints(f)
	f.mustApply(t)
	if calls := kern.Calls(); len(calls) != 0 {
		t.Fatalf("a pod with no policy anywhere ran %v", calls)
	}
}

// At a restart the policy informers may sync before the datastore's first pass: with the
// policies but not yet this node's endpoints and the pods' addresses, a rendering would drop
// every local pod as an unknown workload. Nothing is written until the first pass's
// PodIPsUpdate, which follows its WorkloadUpdates (this node's endpoints).
func TestPolicyWaitsForTheDatastore(t *testing.T) {
	kern := fakekernel.New()
	f, _, _ := fullSyncedFelixOn(t, kern, nil, 1)
	c := newPolicyCluster(50, 5)
	for ns := range 3 {
		name := fmt.Sprintf("ns-%d", ns)
		f.OnUpdate(NamespaceUpdate{Namespace: policy.Namespace{Name: name}})
	}
	for _, p := range c.pods {
		f.OnUpdate(PodUpdate{Pod: &p})
	}
	for i := range 10 {
		f.OnUpdate(NetworkPolicyUpdate{Policy: testPolicy(i)})
	}
	f.OnUpdate(PolicyInSync{})
	f.mustApply(t)
	if got := kern.Chains("iptables-nft", "filter")[policy.ChainFromWorkload]; got != nil {
		t.Fatalf("written before the datastore's first pass: %v", got)
	}
	c.sendEndpoints(f)
	f.mustApply(t)
	if got := kern.Chains("iptables-nft", "filter")[policy.ChainFromWorkload]; got != nil {
		t.Fatalf("written before the pods' addresses: %v", got)
	}
	c.sendIPs(f)
	f.mustApply(t)
	if got := kern.Chains("iptables-nft", "filter")[policy.ChainFromWorkload]; len(got) != len(c.local)+1 {
		t.Fatalf("dispatch after the first pass: %v, want the %d endpoints and the drop", got, len(c.local))
	}
	if np, anp := value(f.metrics.Policies.WithLabelValues("NetworkPolicy")), value(f.metrics.Policies.WithLabelValues(policy.KindANP)); np != 10 || anp != 0 {
		t.Fatalf("policies metric: %v NetworkPolicies, %v AdminNetworkPolicies; want 10, 0", np, anp)
	}
}
