package felix

import (
	"context"
	"maps"
	"net/netip"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// ChainWriter is what a manager needs of one iptables table (*iptables.Table).
type ChainWriter interface {
	UpdateChain(name string, rules []string)
	RemoveChain(name string)
	SetBaseJumps(base string, rules []string)
}

// SetWriter is what a manager needs of the ipsets (*ipsets.IPSets).
type SetWriter interface {
	SetMembers(name, typ string, fam ipfamily.Family, members []string)
	RemoveSet(name string)
}

// forwardJump sends forwarded traffic through tabby's policy first.
var forwardJump = []string{policy.JumpRule}

// policyManager enforces NetworkPolicy: it keeps the cluster's pods, namespaces and policies
// as messages describe them, and on CompleteDeferredWork renders the filter chains and sets of
// each family (policy.Compute, a pure function) and hands the writers what differs from the
// last rendering: a pod joining a selection is one set's members, not a rewrite.
type policyManager struct {
	filter map[ipfamily.Family]ChainWriter
	sets   SetWriter

	pods       map[policy.Key]*policy.Pod // labels and ports, from the Pod objects
	ips        map[policy.Key][]netip.Addr
	namespaces map[string]*policy.Namespace
	policies   map[policy.Key]*networkingv1.NetworkPolicy
	endpoints  []policy.Endpoint

	// inSync: every Pod, Namespace and NetworkPolicy has been sent (PolicyInSync); haveIPs and
	// haveEndpoints: IPAM's view has arrived (the datastore's first snapshot). Until all
	// three, nothing is written: policies without this node's endpoints would drop every
	// local pod as an unknown workload, and without pod addresses every allowed peer.
	inSync, haveIPs, haveEndpoints bool
	dirty                          bool
	last                           map[ipfamily.Family]policy.Rendered
	// calc is the last calculation: it judges whether a pod's change can alter the rendering
	// (policy.Calculator.Affects); nil until the first.
	calc *policy.Calculator
	// calcs counts calculations (tests).
	calcs int
}

func newPolicyManager(filter map[ipfamily.Family]ChainWriter, sets SetWriter) *policyManager {
	return &policyManager{
		filter: filter, sets: sets,
		pods: map[policy.Key]*policy.Pod{}, ips: map[policy.Key][]netip.Addr{},
		namespaces: map[string]*policy.Namespace{}, policies: map[policy.Key]*networkingv1.NetworkPolicy{},
		last: map[ipfamily.Family]policy.Rendered{},
	}
}

func (m *policyManager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case PodUpdate:
		p := u.Pod
		old, ok := m.pods[p.Key]
		if ok && samePodMeta(old, p) {
			return
		}
		m.pods[p.Key] = p
		if !m.affects(old, p) {
			return
		}
	case PodRemove:
		old, ok := m.pods[u.Key]
		if !ok {
			return
		}
		delete(m.pods, u.Key)
		if !m.affects(old) {
			return
		}
	case NamespaceUpdate:
		ns := u.Namespace
		if old, ok := m.namespaces[ns.Name]; ok && maps.Equal(old.Labels, ns.Labels) {
			return
		}
		m.namespaces[ns.Name] = &ns
	case NamespaceRemove:
		if _, ok := m.namespaces[u.Name]; !ok {
			return
		}
		delete(m.namespaces, u.Name)
	case NetworkPolicyUpdate:
		k := policy.Key{Namespace: u.Policy.Namespace, Name: u.Policy.Name}
		if old, ok := m.policies[k]; ok && old.ResourceVersion != "" && old.ResourceVersion == u.Policy.ResourceVersion {
			return
		}
		m.policies[k] = u.Policy
	case NetworkPolicyRemove:
		if _, ok := m.policies[u.Key]; !ok {
			return
		}
		delete(m.policies, u.Key)
	case PodIPsUpdate:
		changed := !m.haveIPs || m.ipsAffect(u.IPs)
		m.ips, m.haveIPs = u.IPs, true
		if !changed {
			return
		}
	case PodIPsDelta:
		if !m.haveIPs {
			return // a delta means nothing without the whole map it changes
		}
		changed := false
		policy.ApplyAddrs(m.ips, u.Removed, u.Added, func(k policy.Key) {
			changed = changed || m.affects(m.pods[k])
		})
		if !changed {
			return
		}
	case EndpointsUpdate:
		eps := slices.Clone(u.Endpoints)
		slices.SortFunc(eps, func(a, b policy.Endpoint) int {
			if a.Interface < b.Interface {
				return -1
			} else if a.Interface > b.Interface {
				return 1
			}
			return 0
		})
		if m.haveEndpoints && slices.Equal(m.endpoints, eps) {
			return
		}
		m.endpoints, m.haveEndpoints = eps, true
	case PolicyInSync:
		if m.inSync {
			return
		}
		m.inSync = true
	default:
		return
	}
	m.dirty = true
}

// affects tells whether a change of these pods (their old and new metadata; nil for none) can
// alter the rendering; without a calculation yet, or with one already due, it says yes.
func (m *policyManager) affects(pods ...*policy.Pod) bool {
	if m.calc == nil || m.dirty {
		return true
	}
	for _, p := range pods {
		if m.calc.Affects(p) {
			return true
		}
	}
	return false
}

// ipsAffect tells whether the addresses of a pod that affects the rendering differ between the
// current map and next. Addresses of pods without metadata are not rendered.
func (m *policyManager) ipsAffect(next map[policy.Key][]netip.Addr) bool {
	if m.calc == nil || m.dirty {
		return !maps.EqualFunc(m.ips, next, slices.Equal)
	}
	for k, ips := range next {
		if !slices.Equal(m.ips[k], ips) && m.calc.Affects(m.pods[k]) {
			return true
		}
	}
	for k := range m.ips {
		if _, ok := next[k]; !ok && m.calc.Affects(m.pods[k]) {
			return true
		}
	}
	return false
}

func samePodMeta(a, b *policy.Pod) bool {
	return a.HostNetwork == b.HostNetwork && maps.Equal(a.Labels, b.Labels) && slices.Equal(a.NamedPorts, b.NamedPorts)
}

func (m *policyManager) input() policy.Input {
	return policy.Input{Pods: m.pods, IPs: m.ips, Namespaces: m.namespaces, Policies: m.policies, Endpoints: m.endpoints}
}

func (m *policyManager) calculate() *policy.Calculator {
	m.calc = policy.NewCalculator(m.input())
	m.calcs++
	return m.calc
}

func (m *policyManager) CompleteDeferredWork(_ context.Context, resync bool) error {
	if !m.inSync || !m.haveIPs || !m.haveEndpoints || (!m.dirty && !resync) {
		return nil
	}
	// A resync with nothing changed states the last rendering again (the writers compare it
	// with what they re-read); only a change pays for a new one, one calculation for both
	// families.
	var calc *policy.Calculator
	if m.dirty {
		calc = m.calculate()
	}
	for _, fam := range ipfamily.All {
		w, ok := m.filter[fam]
		if !ok {
			continue
		}
		r, ok := m.last[fam]
		if calc != nil || !ok {
			if calc == nil {
				calc = m.calculate()
			}
			r = calc.Render(fam)
		}
		prev := m.last[fam]
		if resync {
			prev = policy.Rendered{}
		}
		for name, s := range r.IPSets {
			if old, ok := prev.IPSets[name]; !ok || old.Type != s.Type || !slices.Equal(old.Members, s.Members) {
				m.sets.SetMembers(name, s.Type, s.Family, s.Members)
			}
		}
		for name, rules := range r.Chains {
			if old, ok := prev.Chains[name]; !ok || !slices.Equal(old, rules) {
				w.UpdateChain(name, rules)
			}
		}
		for name := range m.last[fam].Chains {
			if _, ok := r.Chains[name]; !ok {
				w.RemoveChain(name)
			}
		}
		for name := range m.last[fam].IPSets {
			if _, ok := r.IPSets[name]; !ok {
				m.sets.RemoveSet(name)
			}
		}
		w.SetBaseJumps(policy.ParentChain, forwardJump)
		m.last[fam] = r
	}
	m.dirty = false
	return nil
}
