package felix

import (
	"context"
	"maps"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/apis/model"
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

// forwardJump sends forwarded traffic through tabby's policy first, inputJump a pod's traffic
// to this node.
var forwardJump, inputJump = []string{policy.JumpRule}, []string{policy.InputJumpRule}

// policyManager enforces NetworkPolicy: it hands each message to the incremental calculation
// (policy.State) and, on CompleteDeferredWork, the writers what changed: the chains of the
// endpoints a change concerns and the members of the sets it touches, never the rest.
type policyManager struct {
	filter map[ipfamily.Family]ChainWriter
	sets   SetWriter
	state  *policy.State

	// inSync: every Pod, Namespace and NetworkPolicy has been sent (PolicyInSync); haveIPAM:
	// IPAM's view has arrived, the first PodIPsUpdate, which the syncer sends after the
	// WorkloadUpdates of its first pass (this node's endpoints). Until both, nothing is
	// written: policies without this node's endpoints would drop every local pod as an unknown
	// workload, and without pod addresses every allowed peer.
	inSync, haveIPAM bool

	// counts, when set, is given the policies held by kind at each pass.
	counts *prometheus.GaugeVec
	// flowRules, when set, is given the rules the chains log at each pass that changed them.
	flowRules *flowRules
}

func newPolicyManager(filter map[ipfamily.Family]ChainWriter, sets SetWriter) *policyManager {
	var fams []ipfamily.Family
	for fam := range filter {
		fams = append(fams, fam)
	}
	return &policyManager{filter: filter, sets: sets, state: policy.NewState(fams...)}
}

func (m *policyManager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case PodUpdate:
		m.state.UpdatePod(u.Pod)
	case PodRemove:
		m.state.RemovePod(u.Key)
	case NamespaceUpdate:
		m.state.UpdateNamespace(u.Namespace)
	case NamespaceRemove:
		m.state.RemoveNamespace(u.Name)
	case NetworkPolicyUpdate:
		m.state.UpdatePolicy(u.Policy)
	case NetworkPolicyRemove:
		m.state.RemovePolicy(u.Key)
	case AdminPolicyUpdate:
		m.state.UpdateAdmin(u.Policy)
	case AdminPolicyRemove:
		m.state.RemoveAdmin(u.Key)
	case model.NodeUpdate:
		m.state.UpdateNode(policy.NodeOf(u.Node))
	case model.NodeRemove:
		m.state.RemoveNode(u.Name)
	case PodIPsUpdate:
		m.state.SetAddrs(u.IPs)
		m.haveIPAM = true
	case PodIPsDelta:
		if m.haveIPAM { // a delta means nothing without the whole map it changes
			m.state.ApplyAddrs(u.Removed, u.Added)
		}
	case model.WorkloadUpdate:
		m.state.UpdateEndpoint(policy.Endpoint{Interface: u.Workload.Interface, Pod: u.Workload.Pod})
	case model.WorkloadRemove:
		m.state.RemoveEndpoint(u.Interface)
	case PolicyInSync:
		m.inSync = true
	case model.FelixConfigurationUpdate:
		m.state.SetFlowLogs(flowLogConfigOf(u.Config).enabled)
	}
}

func (m *policyManager) CompleteDeferredWork(_ context.Context, resync bool) error {
	if m.counts != nil {
		for kind, n := range m.state.Policies() {
			m.counts.WithLabelValues(kind).Set(float64(n))
		}
	}
	if !m.inSync || !m.haveIPAM || (!resync && !m.state.Pending()) {
		return nil
	}
	for _, d := range m.state.Flush() {
		w := m.filter[d.Family]
		sets, chains := d.IPSets, d.Chains
		if resync {
			// The writers have re-read the kernel: state everything again.
			r := m.state.Rendered(d.Family)
			sets, chains = r.IPSets, r.Chains
		}
		for name, s := range sets {
			m.sets.SetMembers(name, s.Type, s.Family, s.Members)
		}
		for name, rules := range chains {
			w.UpdateChain(name, rules)
		}
		for _, name := range d.RemovedChains {
			w.RemoveChain(name)
		}
		for _, name := range d.RemovedIPSets {
			m.sets.RemoveSet(name)
		}
		w.SetBaseJumps(policy.ParentChain, forwardJump)
		w.SetBaseJumps(policy.InputParentChain, inputJump)
	}
	if rules, changed := m.state.FlowRules(); changed && m.flowRules != nil {
		m.flowRules.set(maps.Clone(rules))
	}
	return nil
}
