package syncer

import (
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

// testNamespace is the namespace of the test syncers' Secrets.
const testNamespace = "tabby-system"

// newTestSyncer is a syncer as tabby-node runs it, over informer caches that the test fills
// (put, remove) instead of a watch: its passes are run by the test (pass), not by Run.
func newTestSyncer(tb testing.TB, cfg Config) *Syncer {
	tb.Helper()
	c, err := client.New(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Namespace = testNamespace
	return New(c, cfg)
}

// resourceOf names the informer of obj's kind.
func resourceOf(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.Node:
		return "nodes"
	case *v1.IPPool:
		return "ippools"
	case *v1.IPAMBlock:
		return "ipamblocks"
	case *v1.BGPConfiguration:
		return "bgpconfigurations"
	case *v1.FelixConfiguration:
		return "felixconfigurations"
	case *v1.BGPPeer:
		return "bgppeers"
	case *v1.BGPFilter:
		return "bgpfilters"
	case *corev1.Secret:
		return "secrets"
	case *corev1.Service:
		return "services"
	case *discoveryv1.EndpointSlice:
		return "endpointslices"
	}
	panic(fmt.Sprintf("no informer for %T", obj))
}

func (s *Syncer) informer(resource string) cache.SharedIndexInformer {
	return map[string]cache.SharedIndexInformer{"nodes": s.nodes, "ippools": s.pools, "ipamblocks": s.blocks,
		"bgpconfigurations": s.configs, "felixconfigurations": s.felixConfigs, "bgppeers": s.peers, "bgpfilters": s.filters, "secrets": s.secrets,
		"services": s.services, "endpointslices": s.slices}[resource]
}

// put stores obj in its informer's cache, in place of the version under its key, and sends the
// syncer the event the informer would.
func (s *Syncer) put(tb testing.TB, obj runtime.Object) {
	tb.Helper()
	res := resourceOf(obj)
	store := s.informer(res).GetStore()
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		tb.Fatal(err)
	}
	old, ok, _ := store.GetByKey(key)
	if ok {
		if err := store.Update(obj); err != nil {
			tb.Fatal(err)
		}
		s.handlers[res].OnUpdate(old, obj)
		return
	}
	if err := store.Add(obj); err != nil {
		tb.Fatal(err)
	}
	s.handlers[res].OnAdd(obj, false)
}

// remove deletes the object under key from the informer of resource, and sends the event.
func (s *Syncer) remove(tb testing.TB, resource, key string) {
	tb.Helper()
	store := s.informer(resource).GetStore()
	old, ok, _ := store.GetByKey(key)
	if !ok {
		return
	}
	if err := store.Delete(old); err != nil {
		tb.Fatal(err)
	}
	s.handlers[resource].OnDelete(old)
}

// discard is a logger for tests whose invalid objects are meant.
var discard = slog.New(slog.DiscardHandler)

// list is every object the informer holds.
func list[T runtime.Object](inf cache.SharedIndexInformer) []T {
	items := inf.GetStore().List()
	out := make([]T, 0, len(items))
	for _, it := range items {
		out = append(out, it.(T))
	}
	return out
}

// unchanged fails the test when msgs, sent by an earlier pass and rendered then as text, were
// changed since: the agents own what the stream sent them, the syncer must not modify it.
func unchanged(tb testing.TB, what string, msgs []any, text string) {
	tb.Helper()
	if now := fmt.Sprint(msgs); msgs != nil && now != text {
		tb.Fatalf("%s: the previous pass's messages were changed in place:\n was %s\n now %s", what, text, now)
	}
}

// inputs are the objects the syncer's caches hold, for Build.
func (s *Syncer) inputs() Inputs {
	in := Inputs{NodeName: s.nodeName, Nodes: list[*corev1.Node](s.nodes), Pools: list[*v1.IPPool](s.pools),
		Blocks: list[*v1.IPAMBlock](s.blocks), BGPPeers: list[*v1.BGPPeer](s.peers), BGPFilters: list[*v1.BGPFilter](s.filters), BGPConfig: s.bgpConfig(), FelixConfig: s.felixConfig(),
		Services: list[*corev1.Service](s.services), EndpointSlices: list[*discoveryv1.EndpointSlice](s.slices)}
	if s.secrets != nil {
		in.Secrets = list[*corev1.Secret](s.secrets)
	}
	return in
}

// streamState is what an agent knows from the change stream: the messages applied, a map per
// kind. apply fails the test on a message that changes nothing (an unchanged object sent again,
// a removal of what was never sent): the syncer must send only what changed.
type streamState struct {
	nodes     map[string]model.Node
	pools     map[string]model.Pool
	lbPools   map[string]model.Pool
	services  map[string]model.Service
	blocks    map[netip.Prefix]model.Block
	workloads map[string]model.Workload
	podIPs    map[PodKey][]netip.Addr
	config    *v1.BGPConfiguration
	felixConf *v1.FelixConfiguration
	peers     map[string]*v1.BGPPeer
	filters   map[string]model.BGPFilter
	secrets   map[string]map[string][]byte
	inSync    bool
}

func newStreamState() *streamState {
	return &streamState{nodes: map[string]model.Node{}, pools: map[string]model.Pool{}, lbPools: map[string]model.Pool{}, services: map[string]model.Service{}, blocks: map[netip.Prefix]model.Block{},
		workloads: map[string]model.Workload{}, peers: map[string]*v1.BGPPeer{}, filters: map[string]model.BGPFilter{}, secrets: map[string]map[string][]byte{}}
}

func (st *streamState) apply(tb testing.TB, msgs []any) {
	tb.Helper()
	if len(msgs) == 0 {
		return
	}
	if !st.inSync {
		if _, ok := msgs[len(msgs)-1].(model.InSync); !ok {
			tb.Fatalf("the first pass does not end with InSync: %v", msgs)
		}
	}
	last := 0
	for i, m := range msgs {
		if r := passOrder(m); r < last {
			tb.Fatalf("message %d of %d (%T) comes after a later kind's (node/syncer/doc.go): %v", i, len(msgs), m, msgs)
		} else {
			last = r
		}
		redundant := false
		switch m := m.(type) {
		case model.NodeUpdate:
			old, ok := st.nodes[m.Node.Name]
			redundant = ok && old.Equal(m.Node)
			st.nodes[m.Node.Name] = m.Node
		case model.NodeRemove:
			_, ok := st.nodes[m.Name]
			redundant = !ok
			delete(st.nodes, m.Name)
		case model.PoolUpdate:
			old, ok := st.pools[m.Pool.Name]
			redundant = ok && old.Equal(m.Pool)
			st.pools[m.Pool.Name] = m.Pool
		case model.PoolRemove:
			_, ok := st.pools[m.Name]
			redundant = !ok
			delete(st.pools, m.Name)
		case model.LoadBalancerPoolUpdate:
			old, ok := st.lbPools[m.Pool.Name]
			redundant = ok && old.Equal(m.Pool)
			st.lbPools[m.Pool.Name] = m.Pool
		case model.LoadBalancerPoolRemove:
			_, ok := st.lbPools[m.Name]
			redundant = !ok
			delete(st.lbPools, m.Name)
		case model.ServiceUpdate:
			old, ok := st.services[m.Service.Key]
			redundant = ok && old.Equal(m.Service)
			st.services[m.Service.Key] = m.Service
		case model.ServiceRemove:
			_, ok := st.services[m.Key]
			redundant = !ok
			delete(st.services, m.Key)
		case model.BlockUpdate:
			old, ok := st.blocks[m.Block.CIDR]
			redundant = ok && old.Equal(m.Block)
			st.blocks[m.Block.CIDR] = m.Block
		case model.BlockRemove:
			_, ok := st.blocks[m.CIDR]
			redundant = !ok
			delete(st.blocks, m.CIDR)
		case model.WorkloadUpdate:
			old, ok := st.workloads[m.Workload.Interface]
			redundant = ok && old.Equal(m.Workload)
			st.workloads[m.Workload.Interface] = m.Workload
		case model.WorkloadRemove:
			_, ok := st.workloads[m.Interface]
			redundant = !ok
			delete(st.workloads, m.Interface)
		case felix.PodIPsUpdate:
			redundant = st.podIPs != nil
			st.podIPs = m.IPs
		case felix.PodIPsDelta:
			redundant = st.podIPs == nil || len(m.Removed)+len(m.Added) == 0
			policy.ApplyAddrs(st.podIPs, m.Removed, m.Added, func(PodKey) {})
		case model.BGPConfigurationUpdate:
			redundant = st.inSync && (m.Config == nil) == (st.config == nil) && (m.Config == nil || apiequality.Semantic.DeepEqual(m.Config.Spec, st.config.Spec))
			st.config = m.Config
		case model.FelixConfigurationUpdate:
			redundant = st.inSync && (m.Config == nil) == (st.felixConf == nil) && (m.Config == nil || apiequality.Semantic.DeepEqual(m.Config.Spec, st.felixConf.Spec))
			st.felixConf = m.Config
		case model.BGPPeerUpdate:
			old, ok := st.peers[m.Peer.Name]
			redundant = ok && apiequality.Semantic.DeepEqual(old.Spec, m.Peer.Spec)
			st.peers[m.Peer.Name] = m.Peer
		case model.BGPPeerRemove:
			_, ok := st.peers[m.Name]
			redundant = !ok
			delete(st.peers, m.Name)
		case model.BGPFilterUpdate:
			old, ok := st.filters[m.Filter.Name]
			redundant = ok && old.Equal(m.Filter)
			st.filters[m.Filter.Name] = m.Filter
		case model.BGPFilterRemove:
			_, ok := st.filters[m.Name]
			redundant = !ok
			delete(st.filters, m.Name)
		case model.SecretUpdate:
			old, ok := st.secrets[m.Name]
			redundant = ok && maps.EqualFunc(old, m.Data, slices.Equal)
			st.secrets[m.Name] = m.Data
		case model.SecretRemove:
			_, ok := st.secrets[m.Name]
			redundant = !ok
			delete(st.secrets, m.Name)
		case model.InSync:
			redundant = st.inSync || i != len(msgs)-1
			st.inSync = true
		default:
			tb.Fatalf("unexpected message %T", m)
		}
		if redundant {
			tb.Fatalf("message %d of %d changes nothing: %#v", i, len(msgs), m)
		}
	}
}

// passOrder is the rank of a message's kind in a pass (node/syncer/doc.go).
func passOrder(m any) int {
	switch m.(type) {
	case model.NodeUpdate, model.NodeRemove:
		return 0
	case model.PoolUpdate, model.PoolRemove:
		return 1
	case model.LoadBalancerPoolUpdate, model.LoadBalancerPoolRemove:
		return 2
	case model.BlockUpdate, model.BlockRemove:
		return 3
	case model.WorkloadUpdate, model.WorkloadRemove:
		return 4
	case felix.PodIPsUpdate, felix.PodIPsDelta:
		return 5
	case model.FelixConfigurationUpdate:
		return 6
	case model.BGPConfigurationUpdate:
		return 7
	case model.SecretUpdate, model.SecretRemove:
		return 8
	case model.BGPFilterUpdate, model.BGPFilterRemove:
		return 9
	case model.BGPPeerUpdate, model.BGPPeerRemove:
		return 10
	case model.ServiceUpdate, model.ServiceRemove:
		return 11
	}
	return 12 // InSync, last
}

// check compares the state with what Build says of the syncer's caches: every kind, the blocks
// (each block's node and borrowed addresses, as the IPAMBlocks hold them, and the routes Build
// derives from them), this node's workloads, every pod's addresses, the BGP objects.
func (st *streamState) check(tb testing.TB, s *Syncer, what string) {
	tb.Helper()
	in := s.inputs()
	want := Build(in, discard)
	fail := func(kind string, got, want any) {
		tb.Helper()
		tb.Fatalf("%s: the stream's %s\n got %+v\nwant %+v", what, kind, got, want)
	}
	if len(st.nodes) != len(want.Nodes) || !slices.EqualFunc(want.Nodes, sortedValues(st.nodes), model.Node.Equal) {
		fail("nodes", sortedValues(st.nodes), want.Nodes)
	}
	if len(st.pools) != len(want.Pools) || !slices.EqualFunc(want.Pools, sortedValues(st.pools), model.Pool.Equal) {
		fail("pools", sortedValues(st.pools), want.Pools)
	}
	if len(st.lbPools) != len(want.LoadBalancerPools) || !slices.EqualFunc(want.LoadBalancerPools, sortedValues(st.lbPools), model.Pool.Equal) {
		fail("LoadBalancer pools", sortedValues(st.lbPools), want.LoadBalancerPools)
	}
	for name := range st.lbPools {
		if _, ok := st.pools[name]; ok {
			fail("pools", fmt.Sprintf("%s both a pod pool and a LoadBalancer pool", name), "one kind")
		}
	}
	if len(st.services) != len(want.Services) || !slices.EqualFunc(want.Services, sortedValues(st.services), model.Service.Equal) {
		fail("Services", sortedValues(st.services), want.Services)
	}
	// The blocks as the IPAMBlocks hold them, read here on their own.
	blocks := map[netip.Prefix]model.Block{}
	for _, b := range in.Blocks {
		cidr, err := ipam.BlockCIDR(b)
		if err != nil {
			continue
		}
		mb := model.Block{CIDR: cidr, Node: strings.TrimPrefix(b.Spec.Affinity, v1.AffinityPrefixHost)}
		for ord, a := range b.Spec.Allocations {
			if a.Node != "" && a.Node != mb.Node {
				var n int
				fmt.Sscan(ord, &n)
				mb.Borrowed = append(mb.Borrowed, model.Borrowed{Addr: ipam.AddrAt(cidr, n), Node: a.Node})
			}
		}
		slices.SortFunc(mb.Borrowed, func(a, b model.Borrowed) int { return a.Addr.Compare(b.Addr) })
		blocks[cidr] = mb
	}
	if !maps.EqualFunc(st.blocks, blocks, model.Block.Equal) {
		fail("blocks", st.blocks, blocks)
	}
	var local, routable []netip.Prefix
	var borrowed []netip.Addr
	for _, b := range st.blocks {
		routable = append(routable, b.CIDR)
		if b.Node == s.nodeName {
			local = append(local, b.CIDR)
		}
		for _, a := range b.Borrowed {
			routable = append(routable, ipfamily.HostPrefix(a.Addr))
			if a.Node == s.nodeName {
				borrowed = append(borrowed, a.Addr)
			}
		}
	}
	slices.SortFunc(local, netip.Prefix.Compare)
	slices.SortFunc(routable, netip.Prefix.Compare)
	slices.SortFunc(borrowed, netip.Addr.Compare)
	if !slices.Equal(local, want.LocalBlocks) || !slices.Equal(routable, want.Routable) || !slices.Equal(borrowed, want.Borrowed) {
		fail("routes", fmt.Sprint(local, routable, borrowed), fmt.Sprint(want.LocalBlocks, want.Routable, want.Borrowed))
	}
	workloads := map[string]model.Workload{}
	for _, w := range want.Workloads { // in address order
		mw := workloads[w.Interface]
		mw.Interface, mw.Pod = w.Interface, model.PodKey{Namespace: w.Pod.Namespace, Name: w.Pod.Name}
		mw.IPs = append(mw.IPs, w.IP)
		workloads[w.Interface] = mw
	}
	if !maps.EqualFunc(st.workloads, workloads, model.Workload.Equal) {
		fail("workloads", st.workloads, workloads)
	}
	if !maps.EqualFunc(st.podIPs, want.PodIPs, slices.Equal) {
		fail("pods' addresses", st.podIPs, want.PodIPs)
	}
	if (st.config == nil) != (want.BGPConfig == nil) || st.config != nil && !apiequality.Semantic.DeepEqual(st.config.Spec, want.BGPConfig.Spec) {
		fail("BGPConfiguration", st.config, want.BGPConfig)
	}
	if (st.felixConf == nil) != (want.FelixConfig == nil) || st.felixConf != nil && !apiequality.Semantic.DeepEqual(st.felixConf.Spec, want.FelixConfig.Spec) {
		fail("FelixConfiguration", st.felixConf, want.FelixConfig)
	}
	peers := map[string]v1.BGPPeerSpec{}
	for _, p := range want.BGPPeers {
		peers[p.Name] = p.Spec
	}
	if !maps.EqualFunc(st.peers, peers, func(p *v1.BGPPeer, spec v1.BGPPeerSpec) bool { return apiequality.Semantic.DeepEqual(p.Spec, spec) }) {
		fail("BGPPeers", st.peers, peers)
	}
	filters := map[string]model.BGPFilter{}
	for _, f := range want.BGPFilters {
		filters[f.Name] = f
	}
	if !maps.EqualFunc(st.filters, filters, model.BGPFilter.Equal) {
		fail("BGPFilters", st.filters, filters)
	}
	if !maps.EqualFunc(st.secrets, want.Secrets, func(a, b map[string][]byte) bool { return maps.EqualFunc(a, b, slices.Equal) }) {
		fail("Secrets", st.secrets, want.Secrets)
	}
}

func sortedValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// randomPasses runs steps passes, each after the datastore changes change makes (it returns how
// many; a pass after none must send nothing), and checks after each that the stream applied to
// st matches Build, and that no pass changed the messages of the one before in place.
func randomPasses(t *testing.T, s *Syncer, st *streamState, steps int, change func() int) {
	t.Helper()
	var prev []any // the first pass's map of addresses is the state's, changed by the deltas
	var prevText string
	for step := range steps {
		n := change()
		msgs, _ := s.pass()
		what := fmt.Sprintf("step %d", step)
		if n == 0 && len(msgs) != 0 {
			t.Fatalf("%s: nothing changed, sent %v", what, msgs)
		}
		unchanged(t, what, prev, prevText)
		st.apply(t, msgs)
		st.check(t, s, what)
		prev, prevText = msgs, fmt.Sprint(msgs)
	}
}
