package policy

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// TestStateEqualsCompute is the incremental calculation's reference test: random sequences of
// pod, address, namespace, policy and endpoint changes go to a State and to a plain Input; after
// every flush, the State's rendering, and what its deltas built up, equal Compute over the
// Input, for both families; and every delta holds only differences.
func TestStateEqualsCompute(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260301, 11))
	const sequences, steps = 60, 120
	ops := map[string]int{}
	for n := range sequences {
		w := newWorld(rng)
		for step := range steps {
			// Most flushes follow one change; some follow several, as a burst of messages
			// before felix's next pass.
			batch := 1
			if rng.IntN(4) == 0 {
				batch = 2 + rng.IntN(4)
			}
			var did []string
			for range batch {
				did = append(did, w.change())
			}
			for _, d := range did {
				ops[d]++
			}
			w.flushAndCheck(t, fmt.Sprintf("sequence %d step %d (%v)", n, step, did))
			if t.Failed() {
				t.Fatalf("input:%s", (&generator{}).describe(w.in()))
			}
		}
		if !w.s.Pending() {
			if d := w.s.Flush(); !d[0].Empty() || !d[1].Empty() {
				t.Fatalf("sequence %d: a flush with nothing pending handed out %+v", n, d)
			}
		}
		// With every policy gone, nothing of them is left behind.
		for k := range w.pols {
			delete(w.pols, k)
			w.s.RemovePolicy(k)
		}
		for k := range w.admin {
			delete(w.admin, k)
			w.s.RemoveAdmin(k)
		}
		w.flushAndCheck(t, fmt.Sprintf("sequence %d: every policy removed", n))
		x := w.s.index
		if len(w.s.selections) > 0 || len(w.s.nsSelections) > 0 || len(x.byValue)+len(x.byKey)+len(x.byNamespace)+len(x.everywhere) > 0 {
			t.Fatalf("sequence %d: with no policy, selections %v and index %+v are left", n, w.s.selections, x)
		}
		for _, f := range w.s.fams {
			if len(f.sets)+len(f.named)+len(f.nodes)+len(f.uses) > 0 {
				t.Fatalf("sequence %d %v: with no policy, sets %v, named-port sets %v, uses %v are left", n, f.fam, f.sets, f.named, f.uses)
			}
		}
	}
	t.Logf("changes: %v", ops)
	for _, op := range []string{"pod", "relabel", "ports", "host", "pod-remove", "addr", "addr-all", "ns", "ns-remove", "policy", "policy-remove", "endpoint", "endpoint-remove", "endpoints", "admin", "admin-remove", "node"} {
		if ops[op] < 100 {
			t.Errorf("only %d %s changes", ops[op], op)
		}
	}
}

// world is a cluster changing at random, held both as an Input and in a State.
type world struct {
	g      *generator
	s      *State
	pods   map[Key]*Pod
	ips    map[Key][]netip.Addr
	nss    map[string]*Namespace
	pols   map[Key]*networkingv1.NetworkPolicy
	claims map[string][]Key
	admin  map[AdminKey]*AdminPolicy
	nodes  map[string]*Node
	// mirror is what the deltas built up, per family.
	mirror map[ipfamily.Family]Rendered
	next   int
	rv     int
}

var worldAddrs = func() []netip.Addr {
	var out []netip.Addr
	for i := range 10 {
		out = append(out, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), netip.MustParseAddr(fmt.Sprintf("fd00::%x", i+1)))
	}
	// An IPv4-mapped address, which the sets hold as the IPv4 one.
	return append(out, netip.MustParseAddr("::ffff:10.0.0.3"))
}()

func newWorld(rng *rand.Rand) *world {
	w := &world{
		g: &generator{rng: rng}, s: NewState(ipfamily.All...),
		pods: map[Key]*Pod{}, ips: map[Key][]netip.Addr{}, nss: map[string]*Namespace{},
		pols: map[Key]*networkingv1.NetworkPolicy{}, claims: map[string][]Key{},
		mirror: map[ipfamily.Family]Rendered{},
		admin:  map[AdminKey]*AdminPolicy{}, nodes: map[string]*Node{},
	}
	for _, fam := range ipfamily.All {
		w.mirror[fam] = Rendered{Chains: map[string][]string{}, IPSets: map[string]IPSet{}}
	}
	// Start from a random cluster, given as a whole (NewStateOf) or change by change.
	in := w.g.input()
	for _, p := range in.Pods {
		p.IPs = nil
	}
	in.IPs = map[Key][]netip.Addr{}
	for k := range in.Pods {
		if w.g.chance(0.8) {
			in.IPs[k] = w.randomAddrs()
		}
	}
	w.pods, w.ips, w.nss, w.pols = in.Pods, in.IPs, in.Namespaces, in.Policies
	for k, np := range w.pols {
		np.ResourceVersion = w.newRV()
		w.pols[k] = np
	}
	for _, ep := range in.Endpoints {
		w.claims[ep.Interface] = []Key{ep.Pod}
	}
	if w.g.chance(0.5) {
		w.s = NewStateOf(Input{Pods: maps.Clone(w.pods), IPs: maps.Clone(w.ips), Namespaces: maps.Clone(w.nss), Policies: maps.Clone(w.pols), Endpoints: w.endpoints()}, ipfamily.All...)
	} else {
		for _, ns := range w.nss {
			w.s.UpdateNamespace(*ns)
		}
		for _, p := range w.pods {
			w.s.UpdatePod(p)
		}
		w.s.SetAddrs(maps.Clone(w.ips))
		for _, np := range w.pols {
			w.s.UpdatePolicy(np)
		}
		w.s.SetEndpoints(w.endpoints())
	}
	w.next = len(w.pods)
	return w
}

func (w *world) newRV() string { w.rv++; return fmt.Sprint(w.rv) }

func (w *world) randomAddrs() []netip.Addr {
	var out []netip.Addr
	for range 1 + w.g.pick(2) {
		out = append(out, oneOf(w.g, worldAddrs...))
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func (w *world) endpoints() []Endpoint {
	var out []Endpoint
	for _, iface := range slices.Sorted(maps.Keys(w.claims)) {
		for _, k := range w.claims[iface] {
			out = append(out, Endpoint{Interface: iface, Pod: k})
		}
	}
	return out
}

func (w *world) in() Input {
	return Input{Pods: w.pods, IPs: w.ips, Namespaces: w.nss, Policies: w.pols, Admin: w.admin, Nodes: w.nodes, Endpoints: w.endpoints()}
}

func (w *world) randomPod() (Key, bool) {
	if len(w.pods) == 0 {
		return Key{}, false
	}
	keys := slices.SortedFunc(maps.Keys(w.pods), compareKeys)
	return keys[w.g.pick(len(keys))], true
}

// newPod is a pod as the generator makes them, with a fresh name.
func (w *world) newPod() *Pod {
	w.next++
	p := &Pod{Key: Key{Namespace: oneOf(w.g, genNamespaces...), Name: fmt.Sprintf("n%d", w.next)}}
	w.relabel(p)
	for range w.g.pick(4) {
		p.NamedPorts = append(p.NamedPorts, oneOf(w.g, genNamedPorts...))
	}
	p.HostNetwork = w.g.chance(0.1)
	return p
}

func (w *world) relabel(p *Pod) {
	p.Labels = map[string]string{}
	if w.g.chance(0.8) {
		p.Labels["app"] = oneOf(w.g, "web", "db", "api")
	}
	if w.g.chance(0.5) {
		p.Labels["tier"] = oneOf(w.g, "fe", "be")
	}
}

// change makes one random change in both and names it.
func (w *world) change() string {
	g := w.g
	switch g.pick(17) {
	case 14: // an admin policy comes or changes
		var in Input
		for len(in.Admin) == 0 {
			w.g.admin(&in)
		}
		for _, p := range in.Admin {
			p.ResourceVersion = w.newRV()
			w.admin[p.Key()] = p
			w.s.UpdateAdmin(p)
			break
		}
		return "admin"
	case 15: // an admin policy goes
		for k := range w.admin {
			delete(w.admin, k)
			w.s.RemoveAdmin(k)
			return "admin-remove"
		}
		return "none"
	case 16: // a node is relabelled, or goes
		var in Input
		w.g.admin(&in)
		name := oneOf(g, "n1", "n2")
		if g.chance(0.3) {
			delete(w.nodes, name)
			w.s.RemoveNode(name)
			return "node-remove"
		}
		n := in.Nodes[name]
		n.Labels = kv("role=" + oneOf(g, "cp", "worker"))
		w.nodes[name] = n
		w.s.UpdateNode(n)
		return "node"
	case 0: // a pod comes, its addresses before or after
		p := w.newPod()
		w.pods[p.Key] = p
		w.s.UpdatePod(p)
		if g.chance(0.7) {
			w.setAddrs(p.Key, w.randomAddrs())
		}
		return "pod"
	case 1, 2: // relabelled (a copy: nobody modifies a pod once sent)
		k, ok := w.randomPod()
		if !ok {
			return "none"
		}
		p := *w.pods[k]
		w.relabel(&p)
		w.pods[k] = &p
		w.s.UpdatePod(&p)
		return "relabel"
	case 3: // named ports change
		k, ok := w.randomPod()
		if !ok {
			return "none"
		}
		p := *w.pods[k]
		p.NamedPorts = nil
		for range g.pick(3) {
			p.NamedPorts = append(p.NamedPorts, oneOf(g, genNamedPorts...))
		}
		w.pods[k] = &p
		w.s.UpdatePod(&p)
		return "ports"
	case 4: // host networking flips
		k, ok := w.randomPod()
		if !ok {
			return "none"
		}
		p := *w.pods[k]
		p.HostNetwork = !p.HostNetwork
		w.pods[k] = &p
		w.s.UpdatePod(&p)
		return "host"
	case 5: // a pod goes; its addresses often with it
		k, ok := w.randomPod()
		if !ok {
			return "none"
		}
		delete(w.pods, k)
		w.s.RemovePod(k)
		if g.chance(0.7) {
			w.setAddrs(k, nil)
		}
		return "pod-remove"
	case 6, 7: // an address comes or goes, of a pod or of one not seen yet
		k, ok := w.randomPod()
		if !ok || g.chance(0.1) {
			k = Key{Namespace: oneOf(g, genNamespaces...), Name: fmt.Sprintf("n%d", w.next+1)}
		}
		now := slices.Clone(w.ips[k])
		if a := oneOf(g, worldAddrs...); slices.Contains(now, a) {
			now = slices.DeleteFunc(now, func(b netip.Addr) bool { return b == a })
		} else {
			now = append(now, a)
		}
		slices.SortFunc(now, netip.Addr.Compare)
		w.setAddrs(k, now)
		return "addr"
	case 8: // every address at once, some moved
		next := map[Key][]netip.Addr{}
		for k, v := range w.ips {
			if g.chance(0.8) {
				next[k] = v
			} else if g.chance(0.5) {
				next[k] = w.randomAddrs()
			}
		}
		w.ips = next
		w.s.SetAddrs(maps.Clone(next))
		return "addr-all"
	case 9: // a namespace is relabelled or comes
		name := oneOf(g, genNamespaces...)
		l := map[string]string{}
		if g.chance(0.6) {
			l["team"] = oneOf(g, "x", "y")
		}
		if g.chance(0.5) {
			l["env"] = oneOf(g, "prod", "dev")
		}
		if g.chance(0.3) {
			// Removed rather than relabelled.
			delete(w.nss, name)
			w.s.RemoveNamespace(name)
			return "ns-remove"
		}
		w.nss[name] = &Namespace{Name: name, Labels: l}
		w.s.UpdateNamespace(Namespace{Name: name, Labels: l})
		return "ns"
	case 10: // a policy comes or changes
		np := g.policy(fmt.Sprintf("np%d", g.pick(6)))
		np.ResourceVersion = w.newRV()
		w.pols[Key{Namespace: np.Namespace, Name: np.Name}] = np
		w.s.UpdatePolicy(np)
		return "policy"
	case 11: // a policy goes
		if len(w.pols) == 0 {
			return "none"
		}
		keys := slices.SortedFunc(maps.Keys(w.pols), compareKeys)
		k := keys[g.pick(len(keys))]
		delete(w.pols, k)
		w.s.RemovePolicy(k)
		return "policy-remove"
	case 12: // a workload on this node comes, moves or goes
		k, ok := w.randomPod()
		if !ok {
			return "none"
		}
		iface := iface(k)
		switch {
		case g.chance(0.1):
			iface = oneOf(g, "cali+", "eth0", "calitoolongname00")
		case g.chance(0.15) && len(w.claims) > 0:
			iface = oneOf(g, slices.Sorted(maps.Keys(w.claims))...) // another pod's interface
		}
		if g.chance(0.3) {
			delete(w.claims, iface)
			w.s.RemoveEndpoint(iface)
			return "endpoint-remove"
		}
		w.claims[iface] = []Key{k}
		w.s.UpdateEndpoint(Endpoint{Interface: iface, Pod: k})
		return "endpoint"
	default: // the whole list, with now and then an interface two pods claim
		eps := w.endpoints()
		if len(eps) > 0 && g.chance(0.5) {
			eps = slices.Delete(eps, 0, 1+g.pick(len(eps)))
		}
		if k, ok := w.randomPod(); ok {
			eps = append(eps, Endpoint{Interface: iface(k), Pod: k})
			if len(eps) > 1 && g.chance(0.3) {
				eps = append(eps, Endpoint{Interface: eps[0].Interface, Pod: k})
			}
		}
		w.claims = map[string][]Key{}
		for _, ep := range eps {
			w.claims[ep.Interface] = append(w.claims[ep.Interface], ep.Pod)
		}
		g.rng.Shuffle(len(eps), func(i, j int) { eps[i], eps[j] = eps[j], eps[i] })
		w.s.SetEndpoints(eps)
		return "endpoints"
	}
}

// setAddrs gives pod k the addresses now, by a delta.
func (w *world) setAddrs(k Key, now []netip.Addr) {
	var removed, added []PodAddr
	for _, a := range w.ips[k] {
		if !slices.Contains(now, a) {
			removed = append(removed, PodAddr{Pod: k, IP: a})
		}
	}
	for _, a := range now {
		if !slices.Contains(w.ips[k], a) {
			added = append(added, PodAddr{Pod: k, IP: a})
		}
	}
	if len(now) == 0 {
		delete(w.ips, k)
	} else {
		w.ips[k] = now
	}
	w.s.ApplyAddrs(removed, added)
}

// flushAndCheck flushes the State and compares.
func (w *world) flushAndCheck(t *testing.T, step string) {
	t.Helper()
	for _, d := range w.s.Flush() {
		m := w.mirror[d.Family]
		for name, rules := range d.Chains {
			if old, ok := m.Chains[name]; ok && slices.Equal(old, rules) {
				t.Errorf("%s %v: chain %s handed out unchanged", step, d.Family, name)
			}
			m.Chains[name] = rules
		}
		for _, name := range d.RemovedChains {
			if _, ok := m.Chains[name]; !ok {
				t.Errorf("%s %v: chain %s removed, never handed out", step, d.Family, name)
			}
			delete(m.Chains, name)
		}
		for name, set := range d.IPSets {
			if old, ok := m.IPSets[name]; ok && reflect.DeepEqual(old, set) {
				t.Errorf("%s %v: set %s handed out unchanged", step, d.Family, name)
			}
			m.IPSets[name] = set
		}
		for _, name := range d.RemovedIPSets {
			if _, ok := m.IPSets[name]; !ok {
				t.Errorf("%s %v: set %s removed, never handed out", step, d.Family, name)
			}
			delete(m.IPSets, name)
		}
	}
	for _, fam := range ipfamily.All {
		want := Compute(w.in(), fam)
		if got := w.s.Rendered(fam); !reflect.DeepEqual(got, want) {
			t.Errorf("%s %v: State renders\n%s\nCompute\n%s", step, fam, showRendered(got), showRendered(want))
			return
		}
		if got := w.mirror[fam]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s %v: the deltas built up\n%s\nCompute\n%s", step, fam, showRendered(got), showRendered(want))
			return
		}
	}
}

func showRendered(r Rendered) string {
	s := ""
	for _, name := range slices.Sorted(maps.Keys(r.Chains)) {
		s += fmt.Sprintf("  %s %q\n", name, r.Chains[name])
	}
	for _, name := range slices.Sorted(maps.Keys(r.IPSets)) {
		s += fmt.Sprintf("  %s %s %q\n", name, r.IPSets[name].Type, r.IPSets[name].Members)
	}
	return s
}

// Each kind of change touches only what it concerns: the chains of the endpoints whose
// selection changes, and the sets of the selections a pod enters or leaves.
func TestStateTouchesOnlyWhatChanged(t *testing.T) {
	in := fixture(
		mkPolicy("prod/web-in", spec{PodSelector: *sel("app=web"), Ingress: []ingressRule{{From: peers{podPeer(sel("app=api")), nsPeer(sel("team=b"))}}}}),
		mkPolicy("prod/db-out", spec{PodSelector: *sel("app=db"), PolicyTypes: egressOnly(), Egress: []egressRule{{To: peers{podPeer(sel("tier=fe"))}, Ports: ports{namedPort("", "http")}}}}),
	)
	s := NewStateOf(in, ipfamily.All...)
	s.Flush()
	api := setName(setKindPods, ipfamily.IPv4, `ns="prod" pods="app=api"`)
	api6 := setName(setKindPods, ipfamily.IPv6, `ns="prod" pods="app=api"`)
	teamB := setName(setKindPods, ipfamily.IPv4, `nssel="team=b" pods=""`)
	teamB6 := setName(setKindPods, ipfamily.IPv6, `nssel="team=b" pods=""`)
	http4 := namedPortSetName("http", "TCP", ipfamily.IPv4)
	tw := endpointChain(iface(podWeb.Key), ingress)
	if len(s.selections) != 3 {
		t.Fatalf("active selections %v, want app=api, team=b and tier=fe", slices.Collect(maps.Keys(s.selections)))
	}

	step := func(what string, change func(), renders int, chains, sets map[ipfamily.Family][]string) {
		t.Helper()
		before := s.renders
		change()
		ds := s.Flush()
		if got := s.renders - before; got != renders {
			t.Errorf("%s: %d chains rendered, want %d", what, got, renders)
		}
		for _, d := range ds {
			gotChains := slices.Concat(slices.Sorted(maps.Keys(d.Chains)), d.RemovedChains)
			gotSets := slices.Concat(slices.Sorted(maps.Keys(d.IPSets)), d.RemovedIPSets)
			if !slices.Equal(gotChains, chains[d.Family]) || !slices.Equal(gotSets, sets[d.Family]) {
				t.Errorf("%s %v: chains %v and sets %v changed, want %v and %v", what, d.Family, gotChains, gotSets, chains[d.Family], sets[d.Family])
			}
		}
		for _, fam := range ipfamily.All {
			if want := Compute(s.Input(), fam); !reflect.DeepEqual(s.Rendered(fam), want) {
				t.Fatalf("%s %v: the State's rendering differs from Compute's", what, fam)
			}
		}
	}
	v4 := func(names ...string) map[ipfamily.Family][]string {
		return map[ipfamily.Family][]string{ipfamily.IPv4: names}
	}

	api2 := *podAPI
	api2.Labels = kv("app=gone", "tier=be")
	step("a pod elsewhere leaves a selection", func() { s.UpdatePod(&api2) }, 0, nil,
		map[ipfamily.Family][]string{ipfamily.IPv4: {api}, ipfamily.IPv6: {api6}})

	step("a pod elsewhere comes, in no selection", func() {
		s.UpdatePod(mkPod("ops/batch", "", "app=batch"))
		s.ApplyAddrs(nil, []PodAddr{{Pod: Key{Namespace: "ops", Name: "batch"}, IP: netip.MustParseAddr("10.0.3.9")}})
	}, 0, nil, nil)

	step("an address of a pod in a selection and with the named port", func() {
		s.ApplyAddrs(nil, []PodAddr{{Pod: podDevWeb.Key, IP: netip.MustParseAddr("10.0.2.77")}})
	}, 0, nil, v4(slices.Sorted(slices.Values([]string{http4, teamB}))...))

	step("a pod of the selected namespace gets the named port", func() {
		tool := *podTool
		tool.NamedPorts = []NamedPort{{Name: "http", Protocol: "TCP", Port: 8000}}
		s.UpdatePod(&tool)
	}, 0, nil, v4(http4))

	step("a namespace joins a namespaceSelector", func() { s.UpdateNamespace(Namespace{Name: "ops", Labels: kv("team=b")}) }, 0, nil,
		map[ipfamily.Family][]string{ipfamily.IPv4: {teamB}, ipfamily.IPv6: {teamB6}})

	web2 := *podWeb
	web2.Labels = kv("app=web", "tier=fe", "extra=1")
	step("a local pod relabelled, still selected by the same policies", func() { s.UpdatePod(&web2) }, 0, nil, nil)

	step("a policy selecting one local pod", func() {
		s.UpdatePolicy(mkPolicy("prod/db-in", spec{PodSelector: *sel("app=db"), Ingress: []ingressRule{{From: peers{podPeer(sel("app=web"))}}}}))
	}, 2, map[ipfamily.Family][]string{ipfamily.IPv4: {ChainToWorkload, endpointChain(iface(podDB.Key), ingress)}, ipfamily.IPv6: {ChainToWorkload, endpointChain(iface(podDB.Key), ingress)}},
		map[ipfamily.Family][]string{ipfamily.IPv4: {setName(setKindPods, ipfamily.IPv4, `ns="prod" pods="app=web"`)}, ipfamily.IPv6: {setName(setKindPods, ipfamily.IPv6, `ns="prod" pods="app=web"`)}})

	step("a policy elsewhere", func() {
		s.UpdatePolicy(mkPolicy("dev/x", spec{PodSelector: *sel(), Ingress: []ingressRule{{From: peers{podPeer(sel("app=web"))}}}}))
	}, 0, nil, nil)

	step("a policy removed", func() { s.RemovePolicy(Key{Namespace: "prod", Name: "web-in"}) }, 0,
		map[ipfamily.Family][]string{ipfamily.IPv4: {ChainToWorkload, tw}, ipfamily.IPv6: {ChainToWorkload, tw}},
		map[ipfamily.Family][]string{ipfamily.IPv4: slices.Sorted(slices.Values([]string{api, teamB})), ipfamily.IPv6: slices.Sorted(slices.Values([]string{api6, teamB6}))})
	if len(s.selections) != 2 {
		t.Errorf("active selections %v, want tier=fe and app=web", slices.Collect(maps.Keys(s.selections)))
	}
}
