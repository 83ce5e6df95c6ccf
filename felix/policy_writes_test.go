package felix

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// recordingWriters is the filter table of each family and the ipsets as a writer holds them,
// and it fails the test at any call that changes nothing.
type recordingWriters struct {
	t      *testing.T
	step   string
	resync bool // a resync states everything again
	chains map[ipfamily.Family]map[string][]string
	sets   map[string]policy.IPSet
	calls  int
}

type recordingChains struct {
	w   *recordingWriters
	fam ipfamily.Family
}

func newRecordingWriters(t *testing.T) *recordingWriters {
	return &recordingWriters{t: t, chains: map[ipfamily.Family]map[string][]string{ipfamily.IPv4: {}, ipfamily.IPv6: {}}, sets: map[string]policy.IPSet{}}
}

func (w *recordingWriters) filter() map[ipfamily.Family]ChainWriter {
	return map[ipfamily.Family]ChainWriter{ipfamily.IPv4: recordingChains{w, ipfamily.IPv4}, ipfamily.IPv6: recordingChains{w, ipfamily.IPv6}}
}

func (c recordingChains) UpdateChain(name string, rules []string) {
	c.w.calls++
	if old, ok := c.w.chains[c.fam][name]; ok && slices.Equal(old, rules) && !c.w.resync {
		c.w.t.Errorf("%s: %v chain %s written unchanged", c.w.step, c.fam, name)
	}
	c.w.chains[c.fam][name] = slices.Clone(rules)
}

func (c recordingChains) RemoveChain(name string) {
	c.w.calls++
	if _, ok := c.w.chains[c.fam][name]; !ok {
		c.w.t.Errorf("%s: %v chain %s removed, never written", c.w.step, c.fam, name)
	}
	delete(c.w.chains[c.fam], name)
}

func (c recordingChains) SetBaseJumps(base string, rules []string) {
	ok := base == policy.ParentChain && slices.Equal(rules, []string{policy.JumpRule}) ||
		base == policy.InputParentChain && slices.Equal(rules, []string{policy.InputJumpRule})
	if !ok {
		c.w.t.Errorf("%s: base jumps %s %q", c.w.step, base, rules)
	}
}

func (w *recordingWriters) SetMembers(name, typ string, fam ipfamily.Family, members []string) {
	w.calls++
	s := policy.IPSet{Type: typ, Family: fam, Members: slices.Clone(members)}
	if old, ok := w.sets[name]; ok && reflect.DeepEqual(old, s) && !w.resync {
		w.t.Errorf("%s: set %s written unchanged", w.step, name)
	}
	w.sets[name] = s
}

func (w *recordingWriters) RemoveSet(name string) {
	w.calls++
	if _, ok := w.sets[name]; !ok {
		w.t.Errorf("%s: set %s removed, never written", w.step, name)
	}
	delete(w.sets, name)
}

// check compares what the writers hold with a rendering of in from scratch.
func (w *recordingWriters) check(in policy.Input) {
	w.t.Helper()
	for fam, chains := range w.chains {
		want := policy.Compute(in, fam)
		if !maps.EqualFunc(chains, want.Chains, slices.Equal) {
			w.t.Fatalf("%s: %v chains differ from a rendering of the whole input:\n%q\nwant\n%q", w.step, fam, chains, want.Chains)
		}
		for name, s := range want.IPSets {
			if !reflect.DeepEqual(w.sets[name], s) {
				w.t.Fatalf("%s: set %s is %v, want %v", w.step, name, w.sets[name], s)
			}
		}
	}
	n := 0
	for _, fam := range ipfamily.All {
		n += len(policy.Compute(in, fam).IPSets)
	}
	if n != len(w.sets) {
		w.t.Fatalf("%s: the writers hold %d sets, the rendering %d", w.step, len(w.sets), n)
	}
}

// The manager's writers see only differences, and after every pass hold what a rendering of
// the whole input gives: random changes of pods, addresses (whole maps and deltas), namespaces,
// policies and this node's workloads (as the model's WorkloadUpdate/WorkloadRemove and as whole
// EndpointsUpdate lists), and now and then a resync, which states everything again.
func TestPolicyManagerWritesOnlyDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := newRecordingWriters(t)
	m := newPolicyManager(w.filter(), w)
	c := newPolicyCluster(120, 6)
	nss := map[string]*policy.Namespace{}
	for ns := range 3 {
		name := fmt.Sprintf("ns-%d", ns)
		nss[name] = &policy.Namespace{Name: name, Labels: map[string]string{"team": name}}
		m.OnUpdate(NamespaceUpdate{Namespace: *nss[name]})
	}
	for _, p := range c.pods {
		m.OnUpdate(PodUpdate{Pod: &p})
	}
	m.OnUpdate(PodIPsUpdate{IPs: clonedIPs(c.ips)})
	for _, ep := range c.local {
		m.OnUpdate(model.WorkloadUpdate{Workload: model.Workload{Pod: ep.Pod, Interface: ep.Interface}})
	}
	m.OnUpdate(model.InSync{})
	pols := map[policy.Key]int{}
	for _, i := range []int{0, 1, 3} {
		m.OnUpdate(NetworkPolicyUpdate{Policy: testPolicy(i)})
		pols[policy.Key{Namespace: fmt.Sprintf("ns-%d", i%3), Name: fmt.Sprintf("pol-%d", i)}] = i
	}
	m.OnUpdate(PolicyInSync{})
	claims := map[string]policy.Key{}
	for _, ep := range c.local {
		claims[ep.Interface] = ep.Pod
	}
	input := func() policy.Input {
		in := policy.Input{Pods: map[policy.Key]*policy.Pod{}, IPs: c.ips, Namespaces: nss, Policies: map[policy.Key]*networkingv1.NetworkPolicy{}}
		for k, p := range c.pods {
			in.Pods[k] = &p
		}
		for k, i := range pols {
			in.Policies[k] = testPolicyVersion(i, k)
		}
		for _, iface := range slices.Sorted(maps.Keys(claims)) {
			in.Endpoints = append(in.Endpoints, policy.Endpoint{Interface: iface, Pod: claims[iface]})
		}
		return in
	}
	apply := func(step string, resync bool) {
		t.Helper()
		w.step, w.resync = step, resync
		if err := m.CompleteDeferredWork(context.Background(), resync); err != nil {
			t.Fatal(err)
		}
		w.check(input())
	}
	apply("start", false)
	keys := func() []policy.Key { return slices.SortedFunc(maps.Keys(c.pods), compareKey) }
	next, version := 1000, 0
	for step := range 400 {
		ks := keys()
		k := ks[rng.IntN(len(ks))]
		what := ""
		switch rng.IntN(9) {
		case 0: // new addresses, as a delta
			what = "addresses"
			old := c.ips[k]
			c.ips[k] = []netip.Addr{netip.AddrFrom4([4]byte{10, 245, byte(step / 250), byte(1 + step%250)})}
			m.OnUpdate(PodIPsDelta{Removed: podAddrs(k, old), Added: podAddrs(k, c.ips[k])})
		case 1: // relabelled
			what = "relabel"
			p := c.pods[k]
			p.Labels = map[string]string{"app": fmt.Sprintf("app-%d", rng.IntN(10)), "tier": []string{"web", "db", "cache"}[rng.IntN(3)]}
			c.pods[k] = p
			m.OnUpdate(PodUpdate{Pod: &p})
		case 2: // a pod goes
			what = "pod removed"
			old := c.ips[k]
			delete(c.pods, k)
			delete(c.ips, k)
			m.OnUpdate(PodRemove{Key: k})
			m.OnUpdate(PodIPsDelta{Removed: podAddrs(k, old)})
		case 3: // a pod comes, its addresses first (IPAM before the informer), then its object
			what = "pod added"
			p, _ := c.add(next, false)
			next++
			m.OnUpdate(PodIPsUpdate{IPs: clonedIPs(c.ips)})
			m.OnUpdate(PodUpdate{Pod: &p})
		case 4: // a namespace relabelled
			what = "namespace"
			name := fmt.Sprintf("ns-%d", rng.IntN(3))
			nss[name] = &policy.Namespace{Name: name, Labels: map[string]string{"team": fmt.Sprintf("ns-%d", rng.IntN(3))}}
			m.OnUpdate(NamespaceUpdate{Namespace: *nss[name]})
		case 5: // a policy comes, changes or goes
			i := rng.IntN(12)
			pk := policy.Key{Namespace: fmt.Sprintf("ns-%d", i%3), Name: fmt.Sprintf("pol-%d", i)}
			if _, ok := pols[pk]; ok && rng.IntN(2) == 0 {
				what = "policy removed"
				delete(pols, pk)
				m.OnUpdate(NetworkPolicyRemove{Key: pk})
				break
			}
			what = "policy"
			version++
			pols[pk] = i
			policyVersions[pk] = version
			m.OnUpdate(NetworkPolicyUpdate{Policy: testPolicyVersion(i, pk)})
		case 6: // a workload on this node comes or goes
			if rng.IntN(2) == 0 && len(claims) > 0 {
				what = "workload removed"
				iface := slices.Sorted(maps.Keys(claims))[rng.IntN(len(claims))]
				delete(claims, iface)
				m.OnUpdate(model.WorkloadRemove{Interface: iface})
				break
			}
			what = "workload"
			iface := fmt.Sprintf("cali%011d", rng.IntN(200))
			claims[iface] = k
			m.OnUpdate(model.WorkloadUpdate{Workload: model.Workload{Pod: k, Interface: iface}})
		case 7: // the whole list, as tabby-node's snapshots send it
			what = "endpoints"
			var eps, prev []policy.Endpoint
			for iface, pk := range claims {
				prev = append(prev, policy.Endpoint{Interface: iface, Pod: pk})
				if rng.IntN(5) > 0 {
					eps = append(eps, policy.Endpoint{Interface: iface, Pod: pk})
				}
			}
			clear(claims)
			for _, ep := range eps {
				claims[ep.Interface] = ep.Pod
			}
			for _, msg := range endpointUpdates(prev, eps) {
				m.OnUpdate(msg)
			}
		case 8: // the same state again: nothing to write
			what = "unchanged"
			m.OnUpdate(PodIPsUpdate{IPs: clonedIPs(c.ips)})
			p := c.pods[k]
			m.OnUpdate(PodUpdate{Pod: &p})
			w.calls = 0
			w.step = "unchanged"
			if err := m.CompleteDeferredWork(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			if w.calls != 0 {
				t.Fatalf("step %d: an unchanged state made %d writer calls", step, w.calls)
			}
		}
		apply(fmt.Sprintf("step %d (%s)", step, what), rng.IntN(40) == 0)
	}
}

// policyVersions: each test policy's resourceVersion, so a changed one is not taken for the
// one felix has.
var policyVersions = map[policy.Key]int{}

// testPolicyVersion is testPolicy i with its version; odd versions take a second CIDR, so a
// new version also renders differently.
func testPolicyVersion(i int, k policy.Key) *networkingv1.NetworkPolicy {
	np := testPolicy(i)
	v := policyVersions[k]
	np.ResourceVersion = fmt.Sprint(1 + v)
	if v%2 == 1 {
		np.Spec.Ingress[0].From = append(np.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}})
	}
	return np
}

func compareKey(a, b policy.Key) int {
	if a.Namespace != b.Namespace {
		return strings.Compare(a.Namespace, b.Namespace)
	}
	return strings.Compare(a.Name, b.Name)
}

func clonedIPs(in map[policy.Key][]netip.Addr) map[policy.Key][]netip.Addr {
	out := make(map[policy.Key][]netip.Addr, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// podAddrs pairs a pod with each of its addresses.
func podAddrs(k policy.Key, ips []netip.Addr) []policy.PodAddr {
	var out []policy.PodAddr
	for _, ip := range ips {
		out = append(out, policy.PodAddr{Pod: k, IP: ip})
	}
	return out
}
