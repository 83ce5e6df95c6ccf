package syncer

import (
	"bytes"
	"log/slog"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
)

// stream is what the syncer sent on its change stream of the kinds whose objects it compares
// with what it sent (a node's and a block's previous version are in the view cache), so that an
// object whose new version changes nothing tabby reads is sent as nothing.
type stream struct {
	// pools are the pod pools sent, lbPools the LoadBalancer pools: an IPPool is in one or none.
	pools, lbPools map[string]model.Pool
	// services are the announceable Services sent, by key.
	services map[string]model.Service
	peers    map[string]*v1.BGPPeer
	// filters are the BGPFilters sent, parsed.
	filters map[string]model.BGPFilter
	// secrets by informer key (namespace/name).
	secrets     map[string]map[string][]byte
	config      *v1.BGPConfiguration
	felixConfig *v1.FelixConfiguration
	veths       hostVeths
}

func newStream() *stream {
	return &stream{pools: map[string]model.Pool{}, lbPools: map[string]model.Pool{}, services: map[string]model.Service{}, peers: map[string]*v1.BGPPeer{}, filters: map[string]model.BGPFilter{}, secrets: map[string]map[string][]byte{},
		veths: hostVeths{byName: map[string]*hostVeth{}, dirty: map[string]struct{}{}}}
}

// streamInputs is what changed in a pass: the view cache's changes of nodes and blocks, and the
// keys of the other kinds' objects that changed with a lookup of their current version.
type streamInputs struct {
	first     bool
	nodes     []nodeChange
	blocks    []blockChange
	pools     map[string]struct{}
	getPool   func(key string) *v1.IPPool
	peers     map[string]struct{}
	getPeer   func(key string) *v1.BGPPeer
	filters   map[string]struct{}
	getFilter func(key string) *v1.BGPFilter
	config    bool // the default BGPConfiguration changed
	getConfig func() *v1.BGPConfiguration
	// felixConfig: the default FelixConfiguration changed.
	felixConfig    bool
	getFelixConfig func() *v1.FelixConfiguration
	secrets        map[string]struct{}
	getSecret      func(key string) *corev1.Secret
	podIPs         func() map[PodKey][]netip.Addr
	podIPsChange   *PodIPsChange
	// services: the keys of the Services that changed, or whose EndpointSlices changed whether
	// one lists a ready endpoint on this node.
	services      map[string]struct{}
	getService    func(key string) *corev1.Service
	localEndpoint func(key string) bool
}

// messages are the pass's changes, in the order the agents apply them: nodes, pools, LoadBalancer
// pools, blocks, this node's workloads, the pods' addresses, the dataplane's configuration, then
// BGP's configuration, the Secrets its peers' passwords refer to, the filters, the peers, the
// Services; the first pass ends with InSync. Within a kind, by name.
func (st *stream) messages(in streamInputs, log *slog.Logger) []any {
	var msgs []any
	for _, ch := range in.nodes {
		switch {
		case ch.cur == nil:
			msgs = append(msgs, model.NodeRemove{Name: ch.old.Name})
		case ch.old == nil || !ch.old.Equal(*ch.cur):
			msgs = append(msgs, model.NodeUpdate{Node: *ch.cur})
		}
	}

	// A pool whose uses change is removed as one kind and sent as the other in the same pass.
	var lbMsgs []any
	for _, key := range sortedKeys(in.pools) {
		var pool model.Pool
		ok := false
		if p := in.getPool(key); p != nil {
			pool, ok = parsePool(p, log)
		}
		lb := ok && pool.LoadBalancer()
		sent, was := st.pools[key]
		switch {
		case (!ok || lb) && was:
			delete(st.pools, key)
			msgs = append(msgs, model.PoolRemove{Name: key})
		case ok && !lb && (!was || !sent.Equal(pool)):
			st.pools[key] = pool
			msgs = append(msgs, model.PoolUpdate{Pool: pool})
		}
		sent, was = st.lbPools[key]
		switch {
		case !lb && was:
			delete(st.lbPools, key)
			lbMsgs = append(lbMsgs, model.LoadBalancerPoolRemove{Name: key})
		case lb && (!was || !sent.Equal(pool)):
			st.lbPools[key] = pool
			lbMsgs = append(lbMsgs, model.LoadBalancerPoolUpdate{Pool: pool})
		}
	}
	msgs = append(msgs, lbMsgs...)

	for _, ch := range in.blocks {
		switch {
		case ch.cur == nil:
			msgs = append(msgs, model.BlockRemove{CIDR: ch.old.block.CIDR})
		case ch.old == nil:
			msgs = append(msgs, model.BlockUpdate{Block: ch.cur.block})
		case ch.old.block.CIDR != ch.cur.block.CIDR:
			msgs = append(msgs, model.BlockRemove{CIDR: ch.old.block.CIDR}, model.BlockUpdate{Block: ch.cur.block})
		case !ch.old.block.Equal(ch.cur.block):
			msgs = append(msgs, model.BlockUpdate{Block: ch.cur.block})
		}
		var old, cur []Workload
		if ch.old != nil {
			old = ch.old.workloads
		}
		if ch.cur != nil {
			cur = ch.cur.workloads
		}
		st.veths.change(old, cur)
	}
	msgs = st.veths.messages(msgs)

	if in.first {
		msgs = append(msgs, felix.PodIPsUpdate{IPs: in.podIPs()})
	} else if !in.podIPsChange.empty() {
		msgs = append(msgs, felix.PodIPsDelta{Removed: in.podIPsChange.Removed, Added: in.podIPsChange.Added})
	}

	if in.first || in.felixConfig {
		cur := validFelixConfig(in.getFelixConfig(), log)
		if in.first || (cur == nil) != (st.felixConfig == nil) || cur != nil && !apiequality.Semantic.DeepEqual(cur.Spec, st.felixConfig.Spec) {
			st.felixConfig = cur
			msgs = append(msgs, model.FelixConfigurationUpdate{Config: cur})
		}
	}

	if in.first || in.config {
		cur := validConfig(in.getConfig(), log)
		if in.first || (cur == nil) != (st.config == nil) || cur != nil && !apiequality.Semantic.DeepEqual(cur.Spec, st.config.Spec) {
			st.config = cur
			msgs = append(msgs, model.BGPConfigurationUpdate{Config: cur})
		}
	}

	for _, key := range sortedKeys(in.secrets) {
		_, name, _ := cache.SplitMetaNamespaceKey(key)
		sent, was := st.secrets[key]
		sec := in.getSecret(key)
		switch {
		case sec == nil && was:
			delete(st.secrets, key)
			msgs = append(msgs, model.SecretRemove{Name: name})
		case sec != nil && (!was || !maps.EqualFunc(sent, sec.Data, bytes.Equal)):
			st.secrets[key] = sec.Data
			msgs = append(msgs, model.SecretUpdate{Name: name, Data: sec.Data})
		}
	}

	for _, key := range sortedKeys(in.filters) {
		var f model.BGPFilter
		ok := false
		if obj := in.getFilter(key); obj != nil {
			f, ok = parseFilter(obj, log)
		}
		sent, was := st.filters[key]
		switch {
		case !ok && was:
			delete(st.filters, key)
			msgs = append(msgs, model.BGPFilterRemove{Name: key})
		case ok && (!was || !sent.Equal(f)):
			st.filters[key] = f
			msgs = append(msgs, model.BGPFilterUpdate{Filter: f})
		}
	}

	for _, key := range sortedKeys(in.peers) {
		p := in.getPeer(key)
		if p != nil && !validPeer(p, log) {
			p = nil
		}
		sent, was := st.peers[key]
		switch {
		case p == nil && was:
			delete(st.peers, key)
			msgs = append(msgs, model.BGPPeerRemove{Name: key})
		case p != nil && (!was || !apiequality.Semantic.DeepEqual(sent.Spec, p.Spec)):
			st.peers[key] = p
			msgs = append(msgs, model.BGPPeerUpdate{Peer: p})
		}
	}

	msgs = st.serviceMessages(msgs, in.services, in.getService, in.localEndpoint, log)

	if in.first {
		msgs = append(msgs, model.InSync{})
	}
	return msgs
}

// hostVeths are this node's pods by host veth, from the blocks' views. A dual-stack pod's IPv4
// and IPv6 addresses are in two blocks, which may change in different passes: each veth keeps
// its addresses from every block, so that a change of one block sends the veth's whole
// Workload without reading the other.
type hostVeths struct {
	byName map[string]*hostVeth
	// dirty: the veths whose addresses changed since the last messages.
	dirty map[string]struct{}
}

type hostVeth struct {
	// addrs are the veth's addresses from every block, in address order.
	addrs []Workload
	// sent is the Workload last sent (Interface "": none).
	sent model.Workload
}

// change replaces a block's workloads old with cur.
func (h *hostVeths) change(old, cur []Workload) {
	if slices.Equal(old, cur) {
		return
	}
	for _, w := range old {
		if v := h.byName[w.Interface]; v != nil {
			if i := slices.Index(v.addrs, w); i >= 0 {
				v.addrs = slices.Delete(v.addrs, i, i+1)
			}
			h.dirty[w.Interface] = struct{}{}
		}
	}
	for _, w := range cur {
		v := h.byName[w.Interface]
		if v == nil {
			v = &hostVeth{}
			h.byName[w.Interface] = v
		}
		i, _ := slices.BinarySearchFunc(v.addrs, w.IP, func(a Workload, ip netip.Addr) int { return a.IP.Compare(ip) })
		v.addrs = slices.Insert(v.addrs, i, w)
		h.dirty[w.Interface] = struct{}{}
	}
}

// messages appends to msgs the changed veths' Workloads, by name, and forgets the veths left
// without an address.
func (h *hostVeths) messages(msgs []any) []any {
	for _, name := range sortedKeys(h.dirty) {
		v := h.byName[name]
		if len(v.addrs) == 0 {
			if v.sent.Interface != "" {
				msgs = append(msgs, model.WorkloadRemove{Interface: name})
			}
			delete(h.byName, name)
			continue
		}
		// The veth's name is a hash of its pod's: every address of it is the same pod's.
		pod := v.addrs[0].Pod
		w := model.Workload{Pod: model.PodKey(pod), Interface: name, IPs: make([]netip.Addr, len(v.addrs))}
		for i, a := range v.addrs {
			w.IPs[i] = a.IP
		}
		if !v.sent.Equal(w) {
			v.sent = w
			msgs = append(msgs, model.WorkloadUpdate{Workload: w})
		}
	}
	clear(h.dirty)
	return msgs
}
