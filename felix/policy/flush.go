package policy

import (
	"maps"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Delta is what changed in one family's rendering since the last Flush: chains and sets that
// are new or differ (in full: the writers take whole chains and whole member lists), and those
// that went. Nothing in it equals what the previous Flush handed out.
type Delta struct {
	Family        ipfamily.Family
	Chains        map[string][]string
	RemovedChains []string // sorted
	IPSets        map[string]IPSet
	RemovedIPSets []string // sorted
}

// Empty tells whether nothing changed.
func (d Delta) Empty() bool {
	return len(d.Chains) == 0 && len(d.RemovedChains) == 0 && len(d.IPSets) == 0 && len(d.RemovedIPSets) == 0
}

// famState is one family's rendering as last flushed, and what changed in it since.
type famState struct {
	fam    ipfamily.Family
	chains map[string][]string
	// uses: the sets each endpoint chain's rules name.
	uses  map[string][]*memberSet
	sets  map[string]*memberSet
	named map[namedKey]*memberSet // the named-port sets among sets
	nodes map[string]*memberSet   // the node sets among sets, by name
	// Since the last Flush: chains rendered differently (or gone), sets with pending members,
	// sets a chain stopped using (gone at the flush's end unless another uses them).
	changedChains map[string]struct{}
	dirtySets     map[*memberSet]struct{}
	unused        []*memberSet
	// logs: the NFLOG prefixes each endpoint chain's rules log (flow logs on), counted in
	// flowRules, which every family shares.
	logs      map[string][]string
	flowRules *flowRuleRefs
}

// flowRuleRefs are the rules the chains log, by prefix, with the chains (of every family) that
// log each.
type flowRuleRefs struct {
	rules   map[string]FlowRule
	refs    map[string]int
	changed bool
}

func newFlowRuleRefs() *flowRuleRefs {
	return &flowRuleRefs{rules: map[string]FlowRule{}, refs: map[string]int{}}
}

func newFamState(fam ipfamily.Family, refs *flowRuleRefs) *famState {
	f := &famState{
		fam: fam, chains: map[string][]string{}, uses: map[string][]*memberSet{},
		logs: map[string][]string{}, flowRules: refs,
		sets: map[string]*memberSet{}, named: map[namedKey]*memberSet{}, nodes: map[string]*memberSet{},
		changedChains: map[string]struct{}{}, dirtySets: map[*memberSet]struct{}{},
	}
	f.setChain(ChainForward, slices.Clone(forwardRules))
	f.setChain(ChainFromWorkload, []string{})
	f.setChain(ChainToWorkload, []string{})
	f.setChain(ChainInput, slices.Clone(inputRules))
	f.setChain(ChainToHost, []string{})
	return f
}

func (f *famState) setChain(name string, rules []string) {
	if old, ok := f.chains[name]; ok && slices.Equal(old, rules) {
		return
	}
	f.chains[name] = rules
	f.changedChains[name] = struct{}{}
}

func (f *famState) removeChain(name string) {
	if _, ok := f.chains[name]; !ok {
		return
	}
	delete(f.chains, name)
	f.changedChains[name] = struct{}{}
	f.use(name, nil)
	f.useLogs(name, nil)
}

// useLogs records that chain now logs the prefixes logged (nil: none), and takes those of its
// previous rendering away.
func (f *famState) useLogs(chain string, logged []string) {
	r := f.flowRules
	for _, p := range logged {
		r.refs[p]++
	}
	for _, p := range f.logs[chain] {
		if r.refs[p]--; r.refs[p] == 0 {
			delete(r.refs, p)
			delete(r.rules, p)
			r.changed = true
		}
	}
	if len(logged) == 0 {
		delete(f.logs, chain)
	} else {
		f.logs[chain] = logged
	}
}

// use records that chain now names the sets used (nil: none), and takes the uses of its
// previous rendering away.
func (f *famState) use(chain string, used []*memberSet) {
	for _, m := range used {
		m.refs++
	}
	for _, m := range f.uses[chain] {
		m.refs--
		if m.refs == 0 {
			f.unused = append(f.unused, m)
		}
	}
	if len(used) == 0 {
		delete(f.uses, chain)
	} else {
		f.uses[chain] = used
	}
}

// collector is the State's setNamer while one family's chain is rendered: it finds or builds
// each set a rule names and lists it.
type collector struct {
	s      *State
	f      *famState
	used   []*memberSet
	logged []string
}

func (c *collector) logRule(dr DecidingRule) (string, bool) {
	if !c.s.flowLogs {
		return "", false
	}
	fr := flowRuleOf(dr)
	p := fr.Prefix()
	r := c.f.flowRules
	if _, ok := r.rules[p]; !ok {
		r.rules[p] = fr
		r.changed = true
	}
	c.logged = append(c.logged, p)
	return p, true
}

func (c *collector) podSet(ps *podSelection) string {
	name := ps.setName.Get(c.f.fam)
	m := c.f.sets[name]
	if m == nil {
		sel := c.s.activate(ps)
		m = c.f.newSet(name, "hash:ip")
		m.sel = sel
		c.s.eachSelected(sel, func(k Key) { m.add(appendAddrMembers(nil, c.s.ips[k], m.fam)) })
		sel.sets = append(sel.sets, m)
	}
	c.note(m)
	return name
}

func (c *collector) blockSet(b *ipBlock) (string, bool) {
	if !b.renders(c.f.fam) {
		return "", false
	}
	m := c.f.sets[b.setName]
	if m == nil {
		m = c.f.newSet(b.setName, "hash:net")
		m.add(b.members)
	}
	c.note(m)
	return b.setName, true
}

func (c *collector) namedPortSet(ps *portSpec) string {
	name := ps.setName.Get(c.f.fam)
	m := c.f.sets[name]
	if m == nil {
		m = c.f.newSet(name, "hash:ip,port")
		m.port = namedKey{ps.name, ps.proto}
		for k := range c.s.podsByPortName[ps.name] {
			m.add(m.podMembers(c.s.pods[k], c.s.ips[k]))
		}
		c.f.named[m.port] = m
	}
	c.note(m)
	return name
}

func (c *collector) nodeSet(n *nodeSelection) string {
	name := n.setName.Get(c.f.fam)
	m := c.f.sets[name]
	if m == nil {
		m = c.f.newSet(name, "hash:ip")
		m.nodeSel = n.sel
		m.add(nodeMembers(c.s.nodes, n.sel, c.f.fam))
		c.f.nodes[name] = m
	}
	c.note(m)
	return name
}

func (c *collector) note(m *memberSet) {
	if !slices.Contains(c.used, m) {
		c.used = append(c.used, m)
	}
}

// newSet is an empty set of the family, a change for the next Flush.
func (f *famState) newSet(name, typ string) *memberSet {
	m := &memberSet{name: name, typ: typ, fam: f.fam, counts: map[string]int{}, members: []string{}, pending: map[string]bool{}, dirty: f.dirtySets}
	f.sets[name] = m
	f.dirtySets[m] = struct{}{}
	return m
}

// dropUnused forgets the sets no chain uses any more, and the selections no set.
func (f *famState) dropUnused(s *State, d *Delta) {
	for _, m := range f.unused {
		if m.refs > 0 || f.sets[m.name] != m {
			continue
		}
		delete(f.sets, m.name)
		delete(f.dirtySets, m)
		if m.written {
			d.RemovedIPSets = append(d.RemovedIPSets, m.name)
		}
		switch {
		case m.sel != nil:
			m.sel.sets = slices.DeleteFunc(m.sel.sets, func(o *memberSet) bool { return o == m })
			if len(m.sel.sets) == 0 {
				s.deactivate(m.sel)
			}
		case m.typ == "hash:ip,port":
			delete(f.named, m.port)
		case m.nodeSel != nil:
			delete(f.nodes, m.name)
		}
	}
	f.unused = f.unused[:0]
}

// refresh renders the chains of the endpoint on iface again if what they are rendered from
// changed: whether it is usable, the policies selecting its pod (of every tier), the pod's
// named ports.
func (s *State) refresh(iface string) {
	ep := s.endpoints[iface]
	if ep == nil {
		return
	}
	var pod *Pod
	if len(ep.claims) == 1 && validInterface(iface) {
		if p := s.pods[ep.claims[0]]; p != nil && !p.HostNetwork {
			pod = p
		}
	}
	var t [2]tiers
	var ports []NamedPort
	if pod != nil {
		for _, d := range []direction{ingress, egress} {
			t[d] = tiers{
				admin: adminsSelecting(s.adminList, pod, d, TierAdmin, s.namespaceLabels),
				np:    s.selecting(pod, d),
				base:  adminsSelecting(s.adminList, pod, d, TierBaseline, s.namespaceLabels),
			}
		}
		ports = pod.NamedPorts
	}
	host := hostTiers(t[egress])
	if (pod == nil) != (ep.pod == nil) || t[ingress].empty() != ep.tiers[ingress].empty() || t[egress].empty() != ep.tiers[egress].empty() ||
		host.empty() != ep.host.empty() {
		s.dispatchDirty = true
	}
	portsChanged := !slices.Equal(ports, ep.ports)
	was, wasHost := ep.tiers, ep.host
	ep.pod, ep.tiers, ep.host, ep.ports = pod, t, host, ports
	if len(ep.claims) == 0 {
		delete(s.endpoints, iface)
	}
	for _, d := range []direction{ingress, egress} {
		// A chain is text from the policies' rules and, for ingress named ports, the pod's
		// ports; compiled policies never change, so the same policies render the same.
		if t[d].equal(was[d]) && (!portsChanged || t[d].empty()) {
			continue
		}
		name, pass := endpointChain(iface, d), passChain(iface, d)
		for _, f := range s.fams {
			if t[d].empty() {
				f.removeChain(name)
				f.removeChain(pass)
				continue
			}
			c := &collector{s: s, f: f}
			chains := tieredChains(iface, pod, d, t[d], c)
			for _, ch := range chains {
				f.setChain(ch.name, ch.rules)
			}
			if len(chains) == 1 {
				f.removeChain(pass)
			}
			f.use(name, c.used)
			f.useLogs(name, c.logged)
			s.renders++
		}
	}
	if host.equal(wasHost) && (!portsChanged || host.empty()) {
		return
	}
	name, pass := ToHostPrefix+iface, ToHostPassPrefix+iface
	for _, f := range s.fams {
		if host.empty() || pod == nil {
			f.removeChain(name)
			f.removeChain(pass)
			continue
		}
		c := &collector{s: s, f: f}
		chains := tieredChainsNamed(name, pass, pod, egress, host, c)
		for _, ch := range chains {
			f.setChain(ch.name, ch.rules)
		}
		if len(chains) == 1 {
			f.removeChain(pass)
		}
		f.use(name, c.used)
		f.useLogs(name, c.logged)
	}
}

func (t tiers) equal(o tiers) bool {
	return slices.Equal(t.admin, o.admin) && slices.Equal(t.np, o.np) && slices.Equal(t.base, o.base) && t.npOpen == o.npOpen
}

// selecting lists, in Key order, the policies that apply to pod in direction d.
func (s *State) selecting(pod *Pod, d direction) []*compiledPolicy {
	var out []*compiledPolicy
	for _, p := range s.policiesByNS[pod.Namespace] {
		if p.selects(pod, d) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *compiledPolicy) int { return compareKeys(a.key, b.key) })
	return out
}

// dispatch renders both dispatch chains from the usable endpoints.
func (s *State) dispatch() {
	from, to := []string{}, []string{}
	if len(s.policies) > 0 || len(s.admins) > 0 {
		var usable []*endpoint
		for _, ep := range s.endpoints {
			if ep.pod != nil {
				usable = append(usable, ep)
			}
		}
		slices.SortFunc(usable, func(a, b *endpoint) int { return strings.Compare(a.iface, b.iface) })
		for _, ep := range usable {
			from = append(from, dispatchRule(ep.iface, egress, !ep.tiers[egress].empty()))
			to = append(to, dispatchRule(ep.iface, ingress, !ep.tiers[ingress].empty()))
		}
		from = append(from, dispatchDrop(egress))
		to = append(to, dispatchDrop(ingress))
	}
	host := []string{}
	for _, ep := range s.endpoints {
		if ep.pod != nil && !ep.host.empty() {
			host = append(host, hostDispatchRule(ep.iface))
		}
	}
	slices.Sort(host)
	for _, f := range s.fams {
		f.setChain(ChainFromWorkload, from)
		f.setChain(ChainToWorkload, to)
		f.setChain(ChainToHost, host)
	}
}

// Pending tells whether a Flush would hand out anything.
func (s *State) Pending() bool {
	if len(s.dirtyEndpoints) > 0 || s.dispatchDirty {
		return true
	}
	for _, f := range s.fams {
		if len(f.changedChains) > 0 || len(f.dirtySets) > 0 {
			return true
		}
	}
	return false
}

// Flush renders what the changes since the last Flush touched and returns, per family, what
// differs from what the last Flush handed out. The first Flush hands out everything.
func (s *State) Flush() []Delta {
	for _, iface := range slices.Sorted(maps.Keys(s.dirtyEndpoints)) {
		s.refresh(iface)
	}
	clear(s.dirtyEndpoints)
	if s.dispatchDirty {
		s.dispatch()
		s.dispatchDirty = false
	}
	out := make([]Delta, 0, len(s.fams))
	for _, f := range s.fams {
		d := Delta{Family: f.fam, Chains: map[string][]string{}, IPSets: map[string]IPSet{}}
		f.dropUnused(s, &d)
		for m := range f.dirtySets {
			if m.settle() || !m.written {
				m.written = true
				d.IPSets[m.name] = IPSet{Type: m.typ, Family: m.fam, Members: m.members}
			}
		}
		clear(f.dirtySets)
		for name := range f.changedChains {
			if rules, ok := f.chains[name]; ok {
				d.Chains[name] = rules
			} else {
				d.RemovedChains = append(d.RemovedChains, name)
			}
		}
		clear(f.changedChains)
		slices.Sort(d.RemovedChains)
		slices.Sort(d.RemovedIPSets)
		out = append(out, d)
	}
	return out
}

// Rendered is the whole rendering of family fam as the last Flush left it: what Compute gives
// for the same input. Its chains and member lists are the State's: read only.
func (s *State) Rendered(fam ipfamily.Family) Rendered {
	for _, f := range s.fams {
		if f.fam != fam {
			continue
		}
		r := Rendered{Chains: maps.Clone(f.chains), IPSets: make(map[string]IPSet, len(f.sets))}
		for name, m := range f.sets {
			if m.written {
				r.IPSets[name] = IPSet{Type: m.typ, Family: m.fam, Members: m.members}
			}
		}
		return r
	}
	checkFamily(fam)
	return Rendered{}
}
