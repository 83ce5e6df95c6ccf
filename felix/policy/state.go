package policy

import (
	"maps"
	"net/netip"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// State is the incremental calculation: the same chains and sets as Compute over the same
// input, kept up to date change by change, as Calico's felix keeps them. Each policy is
// compiled alone; each pod selection a chain of this node uses has its sets, built once and
// then adjusted, and a pod's change finds the selections it may concern through an index from
// labels to selections; so
//
//   - a pod created, removed or relabelled anywhere changes the sets of the selections it
//     enters or leaves and the named-port sets it is in, and re-renders only the chains of
//     its own endpoint, if it is one of this node's;
//   - a policy created, changed or removed is compiled alone and re-renders the chains of the
//     local endpoints it selects, before or after;
//   - a namespace relabelled is tried against the selections with a namespaceSelector;
//   - a pod's addresses change the sets that hold the pod.
//
// Chains are rendered, and member lists merged, in Flush, which hands out only what changed.
// The State keeps the pods and policies it is given and never modifies them; the caller must
// not either. The map SetAddrs is given becomes the State's. A State is not safe for
// concurrent use.
type State struct {
	fams []*famState // the families rendered, in ipfamily.All order

	pods       map[Key]*Pod
	ips        map[Key][]netip.Addr
	namespaces map[string]*Namespace
	nsLabels   map[string]labels.Set // as selectors see them (kubernetes.io/metadata.name added)
	policies   map[Key]*compiledPolicy
	admins     map[AdminKey]*compiledAdmin
	adminList  []*compiledAdmin // admins in evaluation order
	nodes      map[string]*Node

	podsByNS       map[string]map[Key]struct{}
	podsByPortName map[string]map[Key]struct{}
	policiesByNS   map[string]map[Key]*compiledPolicy

	endpoints map[string]*endpoint // by interface, every one a message named
	podIfaces map[Key][]string     // the interfaces claiming each pod

	selections   map[string]*selection // the active ones, by id
	nsSelections map[*selection]struct{}
	index        selectorIndex

	// Since the last Flush: endpoints whose chains may differ, and whether the dispatch
	// chains may.
	dirtyEndpoints map[string]struct{}
	dispatchDirty  bool
	// renders counts the endpoint chains rendered (tests).
	renders int
	// flowLogs: the chains log their verdicts (NFLOG); flowRules what each prefix stands for.
	flowLogs  bool
	flowRules *flowRuleRefs
}

// endpoint is a host veth some message named, and what its chains were last rendered from.
type endpoint struct {
	iface string
	// claims are the pods claiming the interface, sorted, distinct: one for a usable
	// endpoint.
	claims []Key
	// pod is the policed pod, nil when the endpoint is not usable (see usableEndpoints);
	// tiers the policies selecting it per direction; ports its named ports.
	pod   *Pod
	tiers [2]tiers
	host  tiers // its traffic to this node
	ports []NamedPort
}

// NewState is an empty State that renders the families fams.
func NewState(fams ...ipfamily.Family) *State {
	s := &State{
		pods: map[Key]*Pod{}, ips: map[Key][]netip.Addr{},
		namespaces: map[string]*Namespace{}, nsLabels: map[string]labels.Set{},
		policies:       map[Key]*compiledPolicy{},
		admins:         map[AdminKey]*compiledAdmin{},
		nodes:          map[string]*Node{},
		podsByNS:       map[string]map[Key]struct{}{},
		podsByPortName: map[string]map[Key]struct{}{},
		policiesByNS:   map[string]map[Key]*compiledPolicy{},
		endpoints:      map[string]*endpoint{},
		podIfaces:      map[Key][]string{},
		selections:     map[string]*selection{},
		nsSelections:   map[*selection]struct{}{},
		index:          newSelectorIndex(),
		dirtyEndpoints: map[string]struct{}{},
		flowRules:      newFlowRuleRefs(),
	}
	for _, fam := range ipfamily.All {
		if slices.Contains(fams, fam) {
			s.fams = append(s.fams, newFamState(fam, s.flowRules))
		}
	}
	return s
}

// NewStateOf is a State holding in (its IPs, or each pod's own addresses when nil).
func NewStateOf(in Input, fams ...ipfamily.Family) *State {
	s := NewState(fams...)
	for _, ns := range in.Namespaces {
		if ns != nil {
			s.UpdateNamespace(*ns)
		}
	}
	ips := in.IPs
	if ips == nil {
		ips = map[Key][]netip.Addr{}
		for k, p := range in.Pods {
			if p != nil && len(p.IPs) > 0 {
				ips[k] = p.IPs
			}
		}
	}
	s.SetAddrs(ips)
	for _, p := range in.Pods {
		if p != nil {
			s.UpdatePod(p)
		}
	}
	for k, np := range in.Policies {
		if np != nil {
			s.setPolicy(k, np)
		}
	}
	for _, n := range in.Nodes {
		if n != nil {
			s.UpdateNode(n)
		}
	}
	for k, ap := range in.Admin {
		if ap != nil && ap.Key() == k {
			s.UpdateAdmin(ap)
		}
	}
	s.SetEndpoints(in.Endpoints)
	return s
}

// UpdatePod records a pod's labels, named ports and host networking.
func (s *State) UpdatePod(p *Pod) {
	k := p.Key
	old := s.pods[k]
	if old == p {
		return
	}
	if old != nil && old.HostNetwork == p.HostNetwork && maps.Equal(old.Labels, p.Labels) && slices.Equal(old.NamedPorts, p.NamedPorts) {
		s.pods[k] = p
		return
	}
	addrs := s.ips[k]
	portsChange := old == nil || old.HostNetwork != p.HostNetwork || !slices.Equal(old.NamedPorts, p.NamedPorts)
	if portsChange {
		s.namedPorts(old, addrs, false)
	}
	// The selections either version could be in, each once, judged before and after.
	var cands []*selection
	seen := map[*selection]struct{}{}
	note := func(sel *selection) {
		if _, ok := seen[sel]; !ok {
			seen[sel] = struct{}{}
			cands = append(cands, sel)
		}
	}
	if old != nil {
		s.index.candidates(k.Namespace, old.Labels, note)
	}
	s.index.candidates(k.Namespace, p.Labels, note)
	s.unindexPod(old)
	s.pods[k] = p
	s.indexPod(p)
	for _, sel := range cands {
		was := old != nil && sel.selects(old, s.namespaceLabels)
		if now := sel.selects(p, s.namespaceLabels); was != now {
			s.contribute(sel, k, now)
		}
	}
	if portsChange {
		s.namedPorts(p, addrs, true)
	}
	s.podEndpointsDirty(k)
}

// RemovePod forgets a pod (its addresses stay until they go: IPAM tells of them apart).
func (s *State) RemovePod(k Key) {
	old := s.pods[k]
	if old == nil {
		return
	}
	s.namedPorts(old, s.ips[k], false)
	s.index.candidates(k.Namespace, old.Labels, func(sel *selection) {
		if sel.selects(old, s.namespaceLabels) {
			s.contribute(sel, k, false)
		}
	})
	s.unindexPod(old)
	delete(s.pods, k)
	s.podEndpointsDirty(k)
}

func (s *State) indexPod(p *Pod) {
	addKey(s.podsByNS, p.Namespace, p.Key)
	for _, np := range p.NamedPorts {
		addKey(s.podsByPortName, np.Name, p.Key)
	}
}

func (s *State) unindexPod(p *Pod) {
	if p == nil {
		return
	}
	removeKey(s.podsByNS, p.Namespace, p.Key)
	for _, np := range p.NamedPorts {
		removeKey(s.podsByPortName, np.Name, p.Key)
	}
}

func addKey(m map[string]map[Key]struct{}, s string, k Key) {
	keys := m[s]
	if keys == nil {
		keys = map[Key]struct{}{}
		m[s] = keys
	}
	keys[k] = struct{}{}
}

func removeKey(m map[string]map[Key]struct{}, s string, k Key) {
	delete(m[s], k)
	if len(m[s]) == 0 {
		delete(m, s)
	}
}

func (s *State) podEndpointsDirty(k Key) {
	for _, iface := range s.podIfaces[k] {
		s.dirtyEndpoints[iface] = struct{}{}
	}
}

// SetAddrs replaces every pod's addresses; the map is the State's afterwards (ApplyAddrs
// changes it, replacing a pod's slice rather than modifying it).
func (s *State) SetAddrs(ips map[Key][]netip.Addr) {
	if ips == nil {
		ips = map[Key][]netip.Addr{}
	}
	for k, now := range ips {
		if old := s.ips[k]; !slices.Equal(old, now) {
			s.addrsChanged(k, old, now)
		}
	}
	for k, old := range s.ips {
		if _, ok := ips[k]; !ok {
			s.addrsChanged(k, old, nil)
		}
	}
	s.ips = ips
}

// ApplyAddrs changes the pods' addresses by those that went and came.
func (s *State) ApplyAddrs(removed, added []PodAddr) {
	old := map[Key][]netip.Addr{}
	for _, list := range [][]PodAddr{removed, added} {
		for _, a := range list {
			if _, ok := old[a.Pod]; !ok {
				old[a.Pod] = s.ips[a.Pod]
			}
		}
	}
	ApplyAddrs(s.ips, removed, added, func(Key) {})
	for k, was := range old {
		if now := s.ips[k]; !slices.Equal(was, now) {
			s.addrsChanged(k, was, now)
		}
	}
}

// UpdateNamespace records a namespace's labels.
func (s *State) UpdateNamespace(ns Namespace) {
	s.namespaces[ns.Name] = &ns
	if len(s.admins) > 0 && !maps.Equal(s.namespaceLabels(ns.Name), namespaceLabels(ns.Name, ns.Labels)) {
		s.podsOfNamespaceDirty(ns.Name)
	}
	s.relabelNamespace(ns.Name, namespaceLabels(ns.Name, ns.Labels))
	s.nsLabels[ns.Name] = namespaceLabels(ns.Name, ns.Labels)
}

// RemoveNamespace forgets a namespace: selectors see only its name from then on.
func (s *State) RemoveNamespace(name string) {
	if _, ok := s.namespaces[name]; !ok {
		return
	}
	delete(s.namespaces, name)
	if len(s.admins) > 0 {
		s.podsOfNamespaceDirty(name)
	}
	s.relabelNamespace(name, namespaceLabels(name, nil))
	delete(s.nsLabels, name)
}

// relabelNamespace moves the pods of namespace ns in or out of the selections whose
// namespaceSelector matches it before or after (with labels now), but not both.
func (s *State) relabelNamespace(ns string, now labels.Set) {
	was := s.namespaceLabels(ns)
	if maps.Equal(was, now) || len(s.podsByNS[ns]) == 0 {
		return
	}
	for sel := range s.nsSelections {
		enters := sel.nsSel.Matches(now)
		if sel.nsSel.Matches(was) == enters {
			continue
		}
		for k := range s.podsByNS[ns] {
			// The namespaceSelector aside, does sel select the pod?
			if pod := s.pods[k]; !pod.HostNetwork && sel.podSel.Matches(labels.Set(pod.Labels)) {
				s.contribute(sel, k, enters)
			}
		}
	}
}

// UpdatePolicy records a NetworkPolicy. One with the resourceVersion of the one recorded is
// taken as the same.
func (s *State) UpdatePolicy(np *networkingv1.NetworkPolicy) {
	s.setPolicy(Key{Namespace: np.Namespace, Name: np.Name}, np)
}

func (s *State) setPolicy(k Key, np *networkingv1.NetworkPolicy) {
	old := s.policies[k]
	if old != nil && (old.src == np || old.src.ResourceVersion != "" && old.src.ResourceVersion == np.ResourceVersion) {
		return
	}
	cp := compilePolicy(k, np)
	s.policies[k] = cp
	byNS := s.policiesByNS[k.Namespace]
	if byNS == nil {
		byNS = map[Key]*compiledPolicy{}
		s.policiesByNS[k.Namespace] = byNS
	}
	byNS[k] = cp
	if old == nil && len(s.policies) == 1 {
		s.dispatchDirty = true
	}
	s.policyEndpointsDirty(old, cp)
}

// RemovePolicy forgets a NetworkPolicy.
func (s *State) RemovePolicy(k Key) {
	old := s.policies[k]
	if old == nil {
		return
	}
	delete(s.policies, k)
	delete(s.policiesByNS[k.Namespace], k)
	if len(s.policiesByNS[k.Namespace]) == 0 {
		delete(s.policiesByNS, k.Namespace)
	}
	if len(s.policies) == 0 {
		s.dispatchDirty = true
	}
	s.policyEndpointsDirty(old, nil)
}

// policyEndpointsDirty marks the endpoints whose chains old selected, or now selects.
func (s *State) policyEndpointsDirty(old, now *compiledPolicy) {
	for iface, ep := range s.endpoints {
		if old != nil && (slices.Contains(ep.tiers[ingress].np, old) || slices.Contains(ep.tiers[egress].np, old)) {
			s.dirtyEndpoints[iface] = struct{}{}
			continue
		}
		if now == nil || len(ep.claims) != 1 {
			continue
		}
		if pod := s.pods[ep.claims[0]]; pod != nil && (now.selects(pod, ingress) || now.selects(pod, egress)) {
			s.dirtyEndpoints[iface] = struct{}{}
		}
	}
}

// SetEndpoints replaces this node's endpoints.
func (s *State) SetEndpoints(eps []Endpoint) {
	next := map[string][]Key{}
	for _, ep := range eps {
		next[ep.Interface] = append(next[ep.Interface], ep.Pod)
	}
	for iface, keys := range next {
		slices.SortFunc(keys, compareKeys)
		s.claim(iface, slices.Compact(keys))
	}
	for iface := range s.endpoints {
		if _, ok := next[iface]; !ok {
			s.claim(iface, nil)
		}
	}
}

// UpdateEndpoint records that the pod ep.Pod is behind ep.Interface (and no other pod is).
func (s *State) UpdateEndpoint(ep Endpoint) { s.claim(ep.Interface, []Key{ep.Pod}) }

// RemoveEndpoint records that no pod is behind iface any more.
func (s *State) RemoveEndpoint(iface string) { s.claim(iface, nil) }

// claim records the pods claiming iface (sorted, distinct; none: the endpoint is gone).
func (s *State) claim(iface string, keys []Key) {
	ep := s.endpoints[iface]
	if ep == nil {
		if len(keys) == 0 {
			return
		}
		ep = &endpoint{iface: iface}
		s.endpoints[iface] = ep
	}
	if slices.Equal(ep.claims, keys) {
		return
	}
	for _, k := range ep.claims {
		s.podIfaces[k] = slices.DeleteFunc(s.podIfaces[k], func(i string) bool { return i == iface })
		if len(s.podIfaces[k]) == 0 {
			delete(s.podIfaces, k)
		}
	}
	for _, k := range keys {
		s.podIfaces[k] = append(s.podIfaces[k], iface)
	}
	ep.claims = keys
	s.dirtyEndpoints[iface] = struct{}{}
}

// Input is what the State holds, as the whole calculation reads it. It shares the State's maps
// and objects: read only, and only until the next change.
func (s *State) Input() Input {
	in := Input{Pods: s.pods, IPs: s.ips, Namespaces: s.namespaces, Policies: make(map[Key]*networkingv1.NetworkPolicy, len(s.policies)), Nodes: s.nodes, Admin: make(map[AdminKey]*AdminPolicy, len(s.admins))}
	for k, ca := range s.admins {
		in.Admin[k] = ca.src
	}
	for k, cp := range s.policies {
		in.Policies[k] = cp.src
	}
	for _, iface := range slices.Sorted(maps.Keys(s.endpoints)) {
		for _, k := range s.endpoints[iface].claims {
			in.Endpoints = append(in.Endpoints, Endpoint{Interface: iface, Pod: k})
		}
	}
	return in
}

// UpdateAdmin records an AdminNetworkPolicy or the BaselineAdminNetworkPolicy. One with the
// resourceVersion of the one recorded is taken as the same.
func (s *State) UpdateAdmin(p *AdminPolicy) {
	k := p.Key()
	old := s.admins[k]
	if old != nil && (old.src == p || old.src.ResourceVersion != "" && old.src.ResourceVersion == p.ResourceVersion) {
		return
	}
	now := compileAdmin(p)
	s.admins[k] = now
	s.adminsChanged(old, now)
}

// RemoveAdmin forgets an admin policy.
func (s *State) RemoveAdmin(k AdminKey) {
	old, ok := s.admins[k]
	if !ok {
		return
	}
	delete(s.admins, k)
	s.adminsChanged(old, nil)
}

// adminsChanged marks the endpoints whose chains the admin policy old held or now holds: only
// the pods its subject selected or selects see its rules, so an admin policy of a few pods
// costs the node no pass over the policies of every other endpoint.
func (s *State) adminsChanged(old, now *compiledAdmin) {
	s.adminList = slices.SortedFunc(maps.Values(s.admins), compareAdmins)
	s.dispatchDirty = true
	for iface, ep := range s.endpoints {
		if len(ep.claims) != 1 {
			s.dirtyEndpoints[iface] = struct{}{}
			continue
		}
		pod := s.pods[ep.claims[0]]
		if pod == nil {
			continue
		}
		if old != nil && old.selects(pod, s.namespaceLabels) || now != nil && now.selects(pod, s.namespaceLabels) {
			s.dirtyEndpoints[iface] = struct{}{}
		}
	}
}

// podsOfNamespaceDirty marks the endpoints of the pods of namespace ns: an admin policy's
// subject may take or leave them with the namespace's labels.
func (s *State) podsOfNamespaceDirty(ns string) {
	for k := range s.podsByNS[ns] {
		s.podEndpointsDirty(k)
	}
}

// AdminProblems lists what compiling the admin policy k had to ignore.
func (s *State) AdminProblems(k AdminKey) []string {
	if ca := s.admins[k]; ca != nil {
		return slices.Clone(ca.problems)
	}
	return nil
}

// UpdateNode records a node's labels and addresses, for nodes peers.
func (s *State) UpdateNode(n *Node) {
	s.nodes[n.Name] = n
	s.nodesChanged()
}

// RemoveNode forgets a node.
func (s *State) RemoveNode(name string) {
	if _, ok := s.nodes[name]; !ok {
		return
	}
	delete(s.nodes, name)
	s.nodesChanged()
}

// nodesChanged brings every node set in use to what the nodes now give it (nodes are few and
// change rarely).
func (s *State) nodesChanged() {
	for _, f := range s.fams {
		for _, m := range f.nodes {
			want := nodeMembers(s.nodes, m.nodeSel, f.fam)
			var gone []string
			for e := range m.counts {
				if _, found := slices.BinarySearch(want, e); !found {
					gone = append(gone, e)
				}
			}
			m.remove(gone)
			var came []string
			for _, e := range want {
				if _, ok := m.counts[e]; !ok {
					came = append(came, e)
				}
			}
			m.add(came)
		}
	}
}

// Policies counts the policies held by kind: NetworkPolicy and the admin kinds, each present.
func (s *State) Policies() map[string]int {
	out := map[string]int{"NetworkPolicy": len(s.policies), KindANP: 0, KindBANP: 0, KindCNP: 0}
	for k := range s.admins {
		out[k.Kind]++
	}
	return out
}

// SetFlowLogs makes the endpoint chains log each verdict to NFLOG (FlowLogGroup), or stop:
// every endpoint's chains are rendered again at the next Flush.
func (s *State) SetFlowLogs(on bool) {
	if on == s.flowLogs {
		return
	}
	s.flowLogs = on
	for iface, ep := range s.endpoints {
		// Forgotten tiers make refresh render the chains as new.
		ep.tiers, ep.host = [2]tiers{}, tiers{}
		s.dirtyEndpoints[iface] = struct{}{}
	}
}

// FlowRules is what each NFLOG prefix of the chains stands for, as the last Flush rendered them,
// and whether that changed since the last call. The map is the State's: read only, until the
// next Flush.
func (s *State) FlowRules() (map[string]FlowRule, bool) {
	changed := s.flowRules.changed
	s.flowRules.changed = false
	return s.flowRules.rules, changed
}
