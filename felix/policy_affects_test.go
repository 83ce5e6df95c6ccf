package felix

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

type nopChains struct{}

func (nopChains) UpdateChain(string, []string)                       {}
func (nopChains) RemoveChain(string)                                 {}
func (nopChains) SetBaseJumps(string, []string)                      {}
func (nopSets) SetMembers(string, string, ipfamily.Family, []string) {}
func (nopSets) RemoveSet(string)                                     {}

type nopSets struct{}

// The manager skips a calculation only when the change cannot alter the rendering: after every
// random change of pods, addresses (whole maps and deltas) and policies, what it last rendered
// equals a rendering of its whole input from scratch. And most changes of unselected pods are skipped.
func TestSkippedCalculationsRenderTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := newPolicyManager(map[ipfamily.Family]ChainWriter{ipfamily.IPv4: nopChains{}}, nopSets{})
	c := newPolicyCluster(120, 6)
	for k, p := range c.pods {
		if rng.IntN(3) > 0 { // most pods have no named port that an egress rule could name
			p.NamedPorts = nil
			c.pods[k] = p
		}
	}
	for ns := range 3 {
		name := fmt.Sprintf("ns-%d", ns)
		m.OnUpdate(NamespaceUpdate{Namespace: policy.Namespace{Name: name, Labels: map[string]string{"team": name}}})
	}
	for _, p := range c.pods {
		m.OnUpdate(PodUpdate{Pod: &p})
	}
	m.OnUpdate(PodIPsUpdate{IPs: clonedIPs(c.ips)})
	m.OnUpdate(EndpointsUpdate{Endpoints: c.local})
	for _, i := range []int{1, 3} { // ingress only: peers by tier, no named port
		m.OnUpdate(NetworkPolicyUpdate{Policy: testPolicy(i)})
	}
	m.OnUpdate(PolicyInSync{})
	apply := func(step string) {
		t.Helper()
		if err := m.CompleteDeferredWork(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		want := policy.NewCalculator(m.input()).Render(ipfamily.IPv4)
		if !reflect.DeepEqual(m.last[ipfamily.IPv4], want) {
			t.Fatalf("%s: the manager's rendering differs from one of its whole input", step)
		}
	}
	apply("start")
	keys := func() []policy.Key {
		var out []policy.Key
		for k := range c.pods {
			out = append(out, k)
		}
		return out
	}
	const steps = 400
	before := m.calcs
	next := 1000
	for step := range steps {
		if step == steps/2 {
			// An egress rule naming a port: every pod with that named port now counts.
			m.OnUpdate(NetworkPolicyUpdate{Policy: testPolicy(0)})
		}
		ks := keys()
		k := ks[rng.IntN(len(ks))]
		switch rng.IntN(4) {
		case 0: // new addresses, as a delta (the syncer's way after its first snapshot)
			old := c.ips[k]
			c.ips[k] = []netip.Addr{netip.AddrFrom4([4]byte{10, 245, byte(step / 250), byte(1 + step%250)})}
			m.OnUpdate(PodIPsDelta{Removed: podAddrs(k, old), Added: podAddrs(k, c.ips[k])})
		case 1: // relabelled
			p := c.pods[k]
			p.Labels = map[string]string{"app": fmt.Sprintf("app-%d", rng.IntN(10)), "tier": []string{"web", "db", "cache"}[rng.IntN(3)]}
			c.pods[k] = p
			m.OnUpdate(PodUpdate{Pod: &p})
		case 2: // a pod goes
			old := c.ips[k]
			delete(c.pods, k)
			delete(c.ips, k)
			m.OnUpdate(PodRemove{Key: k})
			m.OnUpdate(PodIPsDelta{Removed: podAddrs(k, old)})
		case 3: // a pod comes, its addresses first (IPAM before the informer), then its object
			p, _ := c.add(next, false)
			next++
			if rng.IntN(2) == 0 {
				p.NamedPorts = nil
				c.pods[p.Key] = p
			}
			m.OnUpdate(PodIPsUpdate{IPs: clonedIPs(c.ips)})
			m.OnUpdate(PodUpdate{Pod: &p})
		}
		apply(fmt.Sprintf("step %d", step))
	}
	if n := m.calcs - before; n > steps*3/4 {
		t.Errorf("%d calculations for %d changes: changes of unselected pods were not skipped", n, steps)
	}
	t.Logf("%d calculations for %d changes", m.calcs-before, steps)
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
