package bird

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// cluster is the state a random stream of messages leaves behind, kept by the test to feed a
// fresh agent all of it at once.
type cluster struct {
	nodes   map[string]model.Node
	pools   map[string]model.Pool
	blocks  map[netip.Prefix]model.Block
	conf    *v1.BGPConfiguration
	peers   map[string]*v1.BGPPeer
	secrets map[string]map[string][]byte
	filters map[string]model.BGPFilter
	lbPools map[string]model.Pool
	svcs    map[string]model.Service
}

// randomChange changes c at random and returns the message that says so.
func (c *cluster) randomChange(r *rand.Rand) any {
	p := netip.MustParsePrefix
	switch r.IntN(8) {
	case 7: // a LoadBalancer pool or a Service
		if r.IntN(3) == 0 {
			lb := []model.Pool{{Name: "lb", CIDR: p("203.0.113.160/28")}, {Name: "lb6", CIDR: p("2001:db8:ff::/120")}, {Name: "lb", CIDR: p("203.0.113.176/28")}}[r.IntN(3)]
			lb.Uses = []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}
			if r.IntN(3) == 0 {
				delete(c.lbPools, lb.Name)
				return model.LoadBalancerPoolRemove{Name: lb.Name}
			}
			c.lbPools[lb.Name] = lb
			return model.LoadBalancerPoolUpdate{Pool: lb}
		}
		key := []string{"default/a", "default/b", "kube-system/c"}[r.IntN(3)]
		if r.IntN(4) == 0 {
			delete(c.svcs, key)
			return model.ServiceRemove{Key: key}
		}
		svc := model.Service{Key: key, Local: r.IntN(2) == 0, LocalEndpoint: r.IntN(2) == 0,
			ClusterIPs: []netip.Addr{netip.MustParseAddr([]string{"203.0.113.10", "10.96.0.10"}[r.IntN(2)])}}
		for _, a := range []string{"203.0.113.161", "203.0.113.177", "2001:db8:ff::5"} {
			if r.IntN(2) == 0 {
				svc.LoadBalancerIPs = append(svc.LoadBalancerIPs, netip.MustParseAddr(a))
			}
		}
		c.svcs[key] = svc
		return model.ServiceUpdate{Service: svc}
	case 0, 1: // a node: this one or another joins, changes, leaves
		i := 1 + r.IntN(6)
		name := fmt.Sprintf("node%d", i)
		if i > 1 && r.IntN(4) == 0 {
			delete(c.nodes, name)
			return model.NodeRemove{Name: name}
		}
		n := mkNode(i, nil, "")
		if r.IntN(2) == 0 {
			n.Labels = map[string]string{"rack": []string{"a", "b"}[r.IntN(2)]}
		}
		if i > 3 && r.IntN(3) == 0 {
			n.RRClusterID = "244.0.0.1"
		}
		if r.IntN(2) == 0 {
			n.BGPAddress.Set(ipfamily.IPv6, p(fmt.Sprintf("2001:db8:100::%d/64", i)))
		}
		if i > 1 && r.IntN(5) == 0 { // not annotated yet: reached at its InternalIP
			n.BGPAddress = ipfamily.Pair[netip.Prefix]{}
			n.InternalIP.Set(ipfamily.IPv4, netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", 100+i)))
		}
		if r.IntN(4) == 0 {
			n.RestartingUntil = time.Unix(int64(1e9+r.IntN(3)), 0)
		}
		c.nodes[name] = n
		return model.NodeUpdate{Node: n}
	case 2: // a pool
		pool := []model.Pool{{Name: "v4", CIDR: pool}, {Name: "v6", CIDR: pool6}, {Name: "other", CIDR: p("10.245.0.0/16")}}[r.IntN(3)]
		if r.IntN(3) == 0 {
			delete(c.pools, pool.Name)
			return model.PoolRemove{Name: pool.Name}
		}
		c.pools[pool.Name] = pool
		return model.PoolUpdate{Pool: pool}
	case 3, 4: // a block, claimed, moved, borrowed from, released
		cidr := []netip.Prefix{blockOf(1), blockOf(2), blockOf(3), p("10.244.1.64/26"), block6Of(1), block6Of(2), p("10.245.0.0/26")}[r.IntN(7)]
		if r.IntN(4) == 0 {
			delete(c.blocks, cidr)
			return model.BlockRemove{CIDR: cidr}
		}
		owner := func() string { return []string{"", "node1", "node2", "node3"}[r.IntN(4)] }
		b := model.Block{CIDR: cidr, Node: owner()}
		for k := range r.IntN(3) {
			a := cidr.Addr()
			for range 5 + k {
				a = a.Next()
			}
			b.Borrowed = append(b.Borrowed, model.Borrowed{Addr: a, Node: owner()})
		}
		c.blocks[cidr] = b
		return model.BlockUpdate{Block: b}
	case 5: // the BGPConfiguration
		switch r.IntN(4) {
		case 0:
			c.conf = nil
		case 1:
			c.conf = meshOff()
		default:
			c.conf = &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{
				ServiceClusterIPs: []v1.ServiceCIDR{{CIDR: []string{"203.0.113.0/26", "2001:db8:96::/112"}[r.IntN(2)]}}}}
			if r.IntN(2) == 0 {
				c.conf.Spec.ServiceLoadBalancerIPs = []v1.ServiceCIDR{{CIDR: "203.0.113.176/28"}}
			}
			if r.IntN(2) == 0 {
				c.conf.Spec.PrefixAdvertisements = []v1.PrefixAdvertisement{{CIDR: pool.String(), Communities: []v1.CommunityRef{[]v1.CommunityRef{"65001:1", "65001:1:2"}[r.IntN(2)]}}}
			}
		}
		return model.BGPConfigurationUpdate{Config: c.conf}
	default: // a BGPPeer, its Secret or its BGPFilter
		if r.IntN(4) == 0 {
			f := []model.BGPFilter{
				{Name: "f1", Export: []model.FilterRule{{Family: ipfamily.IPv4, Prefix: blockOf(1), MinLen: 26, MaxLen: 26}}},
				{Name: "f1", Import: []model.FilterRule{{Family: ipfamily.IPv4, Accept: true, Prefix: p("203.0.113.0/24"), MinLen: 24, MaxLen: 24}}},
				{Name: "f2", Import: []model.FilterRule{{Family: ipfamily.IPv6}}},
			}[r.IntN(3)]
			if r.IntN(3) == 0 {
				delete(c.filters, f.Name)
				return model.BGPFilterRemove{Name: f.Name}
			}
			c.filters[f.Name] = f
			return model.BGPFilterUpdate{Filter: f}
		}
		if r.IntN(3) == 0 {
			if r.IntN(2) == 0 {
				delete(c.secrets, "bgp")
				return model.SecretRemove{Name: "bgp"}
			}
			data := map[string][]byte{"pw": []byte([]string{"one", "two"}[r.IntN(2)])}
			c.secrets["bgp"] = data
			return model.SecretUpdate{Name: "bgp", Data: data}
		}
		peers := []v1.BGPPeer{
			{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: "203.0.113.1", ASNumber: 65000}},
			{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: "203.0.113.1", ASNumber: 65000, KeepOriginalNextHop: true,
				Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "bgp", Key: "pw"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "rrs"}, Spec: v1.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "rack == 'a'"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: "203.0.113.1", ASNumber: 65000, Filters: []string{"f1", "f2"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "rrs"}, Spec: v1.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "rack == 'a'", Filters: []string{"f2"}}},
		}
		peer := peers[r.IntN(len(peers))]
		if r.IntN(3) == 0 {
			delete(c.peers, peer.Name)
			return model.BGPPeerRemove{Name: peer.Name}
		}
		c.peers[peer.Name] = &peer
		return model.BGPPeerUpdate{Peer: &peer}
	}
}

// messages says all of c, as a syncer's first sync would.
func (c *cluster) messages() []any {
	var out []any
	for _, n := range c.nodes {
		out = append(out, model.NodeUpdate{Node: n})
	}
	for _, p := range c.pools {
		out = append(out, model.PoolUpdate{Pool: p})
	}
	for _, b := range c.blocks {
		out = append(out, model.BlockUpdate{Block: b})
	}
	for _, lb := range c.lbPools {
		out = append(out, model.LoadBalancerPoolUpdate{Pool: lb})
	}
	for _, s := range c.svcs {
		out = append(out, model.ServiceUpdate{Service: s})
	}
	out = append(out, model.BGPConfigurationUpdate{Config: c.conf})
	for name, data := range c.secrets {
		out = append(out, model.SecretUpdate{Name: name, Data: data})
	}
	for _, f := range c.filters {
		out = append(out, model.BGPFilterUpdate{Filter: f})
	}
	for _, p := range c.peers {
		out = append(out, model.BGPPeerUpdate{Peer: p})
	}
	return out
}

// TestIncrementalMatchesFull: an agent fed a random stream of changes, with passes at random
// points, leaves its speaker exactly as an agent fed the end state at once: the same identity,
// sessions, paths and policy. A concern a message failed to mark would leave the first behind.
func TestIncrementalMatchesFull(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for run := range 200 {
		c := &cluster{nodes: map[string]model.Node{"node1": mkNode(1, nil, "")}, pools: map[string]model.Pool{}, blocks: map[netip.Prefix]model.Block{},
			peers: map[string]*v1.BGPPeer{}, secrets: map[string]map[string][]byte{}, filters: map[string]model.BGPFilter{},
			lbPools: map[string]model.Pool{}, svcs: map[string]model.Service{}}
		inc, incSpk, _ := newFakeBird(t, "node1")
		send(inc, model.NodeUpdate{Node: c.nodes["node1"]})
		var trail []string
		for range 1 + r.IntN(60) {
			msg := c.randomChange(r)
			trail = append(trail, fmt.Sprintf("%T%+v", msg, msg))
			inc.OnUpdate(msg)
			if r.IntN(3) == 0 {
				pass(t, inc)
			}
		}
		pass(t, inc)

		full, fullSpk, _ := newFakeBird(t, "node1")
		send(full, c.messages()...)
		pass(t, full)

		a, b := incSpk.last(), fullSpk.last()
		diff := func(what string, x, y any) {
			t.Fatalf("run %d: %s differ:\nincremental %+v\nfull        %+v\nmessages:\n%s", run, what, x, y, strings.Join(trail, "\n"))
		}
		if a.cfg != b.cfg {
			diff("speaker identities", a.cfg, b.cfg)
		}
		if !maps.Equal(a.peers, b.peers) {
			diff("peers", a.peers, b.peers)
		}
		if !maps.Equal(a.paths, b.paths) {
			diff("paths", a.paths, b.paths)
		}
		if (a.policy == nil) != (b.policy == nil) || a.policy != nil && !a.policy.Equal(*b.policy) {
			diff("policies", a.policy, b.policy)
		}
	}
}
