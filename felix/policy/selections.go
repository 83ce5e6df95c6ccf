package policy

import (
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	labelop "k8s.io/apimachinery/pkg/selection"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// selection is a pod selection that some chain of this node uses (an active one, as Calico
// calls them). Its sets are built from the cluster once and then adjusted as pods come, go and
// change labels and as namespaces change labels. Which pods it holds is not kept: it is what
// the selector says of the pods as they are, and every change is judged before and after.
type selection struct {
	podSelection
	// sets are its hash:ip sets that chains use, one per family at most.
	sets []*memberSet
}

// selectorIndex finds the active selections a pod's change can concern without trying them
// all: a selection is filed under one requirement every pod it selects must meet (a label with
// one of some values, a label key, the policy's namespace), and a pod is tried only against
// the selections filed under its labels and namespace, and those with none of these.
type selectorIndex struct {
	byValue     map[string]map[string]map[*selection]struct{} // label key → value → selections
	byKey       map[string]map[*selection]struct{}            // label key → selections
	byNamespace map[string]map[*selection]struct{}            // namespace → selections
	everywhere  map[*selection]struct{}
}

func newSelectorIndex() selectorIndex {
	return selectorIndex{
		byValue:     map[string]map[string]map[*selection]struct{}{},
		byKey:       map[string]map[*selection]struct{}{},
		byNamespace: map[string]map[*selection]struct{}{},
		everywhere:  map[*selection]struct{}{},
	}
}

// file calls fn with the buckets s belongs in: one requirement of its podSelector that a pod
// must meet to be selected, a value (In, =) preferred to a key (Exists); else its namespace
// when it has no namespaceSelector; else everywhere.
func (x *selectorIndex) file(s *selection, fn func(bucket map[*selection]struct{}, set func(map[*selection]struct{}))) {
	reqs, _ := s.podSel.Requirements()
	exists := ""
	for _, r := range reqs {
		switch r.Operator() {
		case labelop.Equals, labelop.DoubleEquals, labelop.In:
			byValue := x.byValue[r.Key()]
			if byValue == nil {
				byValue = map[string]map[*selection]struct{}{}
				x.byValue[r.Key()] = byValue
			}
			for _, v := range r.Values().UnsortedList() {
				fn(byValue[v], func(b map[*selection]struct{}) { setBucket(byValue, v, b) })
			}
			if len(byValue) == 0 {
				delete(x.byValue, r.Key())
			}
			return
		case labelop.Exists:
			if exists == "" {
				exists = r.Key()
			}
		}
	}
	switch {
	case exists != "":
		fn(x.byKey[exists], func(b map[*selection]struct{}) { setBucket(x.byKey, exists, b) })
	case s.nsSel == nil:
		fn(x.byNamespace[s.namespace], func(b map[*selection]struct{}) { setBucket(x.byNamespace, s.namespace, b) })
	default:
		fn(x.everywhere, func(map[*selection]struct{}) {})
	}
}

// setBucket stores b under k, or deletes k when b is empty.
func setBucket[K comparable](m map[K]map[*selection]struct{}, k K, b map[*selection]struct{}) {
	if len(b) == 0 {
		delete(m, k)
		return
	}
	m[k] = b
}

func (x *selectorIndex) add(s *selection) {
	x.file(s, func(b map[*selection]struct{}, set func(map[*selection]struct{})) {
		if b == nil {
			b = map[*selection]struct{}{}
		}
		b[s] = struct{}{}
		set(b)
	})
}

func (x *selectorIndex) remove(s *selection) {
	x.file(s, func(b map[*selection]struct{}, set func(map[*selection]struct{})) {
		delete(b, s)
		set(b)
	})
}

// candidates calls fn for every active selection that could select a pod of namespace ns with
// labels l, each once: a selection is filed in one bucket, and a pod has one value per key.
func (x *selectorIndex) candidates(ns string, l map[string]string, fn func(*selection)) {
	if len(x.everywhere) == 0 && len(x.byNamespace) == 0 && len(x.byKey) == 0 && len(x.byValue) == 0 {
		return
	}
	for k, v := range l {
		for s := range x.byValue[k][v] {
			fn(s)
		}
		for s := range x.byKey[k] {
			fn(s)
		}
	}
	for s := range x.byNamespace[ns] {
		fn(s)
	}
	for s := range x.everywhere {
		fn(s)
	}
}

// namedKey is a named-port set's selection: a port name and protocol.
type namedKey struct {
	name  string
	proto Protocol
}

// memberSet is one ipset a chain of this node uses, its members kept up to date as the
// cluster changes. Members are counted (two pods may hold one address while one replaces the
// other), and only a member's first arrival and last departure count as a change.
type memberSet struct {
	name string
	typ  string
	fam  ipfamily.Family
	// refs: the chains that use it; at none, it goes at the end of the flush.
	refs int
	sel  *selection // a pod set's selection
	port namedKey   // a named-port set's name and protocol
	// nodeSel: a node set's selector.
	nodeSel labels.Selector
	// counts: the contributions to each member (pod and named-port sets).
	counts map[string]int
	// members are sorted, as last handed out (or built), and pending what came (true) and
	// went (false) since.
	members []string
	pending map[string]bool
	// written: a Flush has handed it out.
	written bool
	dirty   map[*memberSet]struct{} // the family's sets with pending changes
}

func (m *memberSet) add(members []string) {
	for _, e := range members {
		m.counts[e]++
		if m.counts[e] == 1 {
			m.toggle(e, true)
		}
	}
}

func (m *memberSet) remove(members []string) {
	for _, e := range members {
		n, ok := m.counts[e]
		if !ok {
			continue
		}
		if n > 1 {
			m.counts[e] = n - 1
			continue
		}
		delete(m.counts, e)
		m.toggle(e, false)
	}
}

// toggle notes that e came or went; a member that comes and goes again before the next flush
// is no change.
func (m *memberSet) toggle(e string, present bool) {
	if was, ok := m.pending[e]; ok && was != present {
		delete(m.pending, e)
		return
	}
	m.pending[e] = present
	m.dirty[m] = struct{}{}
}

// settle applies the pending changes to members, merging rather than sorting them all again,
// and tells whether they changed. members is replaced, never modified: a Flush's caller may
// hold the last one.
func (m *memberSet) settle() bool {
	if len(m.pending) == 0 {
		return false
	}
	var adds []string
	gone := 0
	for e, present := range m.pending {
		if present {
			adds = append(adds, e)
		} else {
			gone++
		}
	}
	slices.Sort(adds)
	out := make([]string, 0, len(m.members)+len(adds)-gone)
	i := 0
	for _, e := range m.members {
		if present, ok := m.pending[e]; ok && !present {
			continue
		}
		for i < len(adds) && adds[i] < e {
			out = append(out, adds[i])
			i++
		}
		out = append(out, e)
	}
	out = append(out, adds[i:]...)
	m.members = out
	clear(m.pending)
	return true
}

// podMembers is what a pod with addresses addrs gives a set of family fam.
func (m *memberSet) podMembers(pod *Pod, addrs []netip.Addr) []string {
	if m.sel != nil {
		return appendAddrMembers(nil, addrs, m.fam)
	}
	return appendNamedPortMembers(nil, pod, addrs, m.port.name, m.port.proto, m.fam)
}

// activate returns the selection ps as the chains use it.
func (s *State) activate(ps *podSelection) *selection {
	if sel := s.selections[ps.id]; sel != nil {
		return sel
	}
	sel := &selection{podSelection: *ps}
	if ps.nsSel != nil {
		s.nsSelections[sel] = struct{}{}
	}
	s.selections[ps.id] = sel
	s.index.add(sel)
	return sel
}

// eachSelected calls fn with every pod sel selects.
func (s *State) eachSelected(sel *selection, fn func(Key)) {
	consider := func(keys map[Key]struct{}) {
		for k := range keys {
			if sel.selects(s.pods[k], s.namespaceLabels) {
				fn(k)
			}
		}
	}
	if sel.nsSel == nil {
		consider(s.podsByNS[sel.namespace])
		return
	}
	for ns, keys := range s.podsByNS {
		if sel.nsSel.Matches(s.namespaceLabels(ns)) {
			consider(keys)
		}
	}
}

// deactivate forgets sel once no chain uses it.
func (s *State) deactivate(sel *selection) {
	delete(s.selections, sel.id)
	delete(s.nsSelections, sel)
	s.index.remove(sel)
}

// contribute adds pod k's addresses to sel's sets, or takes them away.
func (s *State) contribute(sel *selection, k Key, add bool) {
	for _, m := range sel.sets {
		members := appendAddrMembers(nil, s.ips[k], m.fam)
		if add {
			m.add(members)
		} else {
			m.remove(members)
		}
	}
}

// namedPorts adds (or takes away) what pod, with addresses addrs, gives the named-port sets
// in use.
func (s *State) namedPorts(pod *Pod, addrs []netip.Addr, add bool) {
	if pod == nil || pod.HostNetwork || len(pod.NamedPorts) == 0 || len(addrs) == 0 {
		return
	}
	for _, f := range s.fams {
		if len(f.named) == 0 {
			continue
		}
		for i, np := range pod.NamedPorts {
			k := namedKey{np.Name, namedPortProtocol(np)}
			m := f.named[k]
			if m == nil || slices.ContainsFunc(pod.NamedPorts[:i], func(o NamedPort) bool { return o.Name == k.name && namedPortProtocol(o) == k.proto }) {
				continue // not in use, or done already
			}
			members := m.podMembers(pod, addrs)
			if add {
				m.add(members)
			} else {
				m.remove(members)
			}
		}
	}
}

// addrsChanged moves pod k's contributions from its old addresses to its new ones, in the sets
// that hold it.
func (s *State) addrsChanged(k Key, old, now []netip.Addr) {
	pod := s.pods[k]
	if pod == nil || pod.HostNetwork {
		return // in no set
	}
	s.index.candidates(k.Namespace, pod.Labels, func(sel *selection) {
		if !sel.selects(pod, s.namespaceLabels) {
			return
		}
		for _, m := range sel.sets {
			m.remove(appendAddrMembers(nil, old, m.fam))
			m.add(appendAddrMembers(nil, now, m.fam))
		}
	})
	s.namedPorts(pod, old, false)
	s.namedPorts(pod, now, true)
}

// namespaceLabels is a namespace's labels as selectors see them.
func (s *State) namespaceLabels(ns string) labels.Set {
	if l, ok := s.nsLabels[ns]; ok {
		return l
	}
	return namespaceLabels(ns, nil)
}
