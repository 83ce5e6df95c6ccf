package node

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/sysctl"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

type nopSysctl struct{}

func (nopSysctl) Set(...sysctl.Setting) error { return nil }

// TestOnUpdatesOneMorePodWritesOneRoute: tabby-node hands each agent the changes of a pass and
// nothing else. After the first pass (the node, two pools, two blocks, 50 pods), a pass with
// one pod more reaches the kernel as that pod's route alone (no other route, no iptables or
// ipset command), and a pass of BGP objects, LoadBalancer pools and Services writes nothing.
func TestOnUpdatesOneMorePodWritesOneRoute(t *testing.T) {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	fk.AddLink("cali0123456789a", 1500)
	kern := fakekernel.New()
	f, err := felix.New(felix.Config{NodeName: "n1", UplinkInterface: ipfamily.PairOf("eth0", ""), ResyncInterval: time.Hour},
		felix.WithNetlink(fk), felix.WithCommandRunner(kern), felix.WithSysctl(nopSysctl{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	b, err := bird.New(bird.Config{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{felix: f, bgp: b, tunnel: newTunnelNeed("n1"), tunnelKick: make(chan struct{}, 1), synced: make(chan struct{})}

	first := []any{
		model.NodeUpdate{Node: model.Node{Name: "n1", BGPAddress: ipfamily.PairOf(netip.MustParsePrefix("198.51.100.11/24"), netip.Prefix{})}},
		model.PoolUpdate{Pool: model.Pool{Name: "a", CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26, IPIPMode: v1.IPIPModeNever, NATOutgoing: true}},
		model.PoolUpdate{Pool: model.Pool{Name: "b", CIDR: netip.MustParsePrefix("10.245.0.0/16"), BlockSize: 26, IPIPMode: v1.IPIPModeNever, NATOutgoing: true}},
		model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix("10.244.1.0/26"), Node: "n1"}},
		model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix("10.244.1.64/26"), Node: "n1"}},
	}
	w := model.Workload{Pod: model.PodKey{Namespace: "default", Name: "web"}, Interface: "cali0123456789a"}
	for i := 0; i < 50; i++ {
		w.IPs = append(w.IPs, netip.AddrFrom4([4]byte{10, 244, 1, byte(1 + i)}))
	}
	first = append(first, model.WorkloadUpdate{Workload: w}, model.InSync{})
	apply := func() {
		t.Helper()
		if err := f.ApplyNow(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	a.onUpdates(first)
	apply()
	if n := len(fk.Routes()); n != 52 {
		t.Fatalf("first pass: %d routes, want 50 pods + 2 blackholes", n)
	}
	if got := kern.Sets()["tabby-masq-ipam-pools"].Members; len(got) != 2 {
		t.Fatalf("first pass: NAT set %q, want both pools", got)
	}
	select {
	case <-a.synced:
	default:
		t.Error("the first pass's InSync did not mark the datastore synced")
	}

	more := w
	more.IPs = append(append([]netip.Addr(nil), w.IPs...), netip.MustParseAddr("10.244.1.60"))
	replaces, dels, links := fk.Calls("RouteReplace"), fk.Calls("RouteDel"), fk.Calls("LinkList")
	kern.ResetCalls()
	a.onUpdates([]any{model.WorkloadUpdate{Workload: more}})
	apply()
	if got := fk.Calls("RouteReplace") - replaces; got != 1 {
		t.Errorf("one new pod address: %d route replaces, want 1", got)
	}
	if got := fk.Calls("RouteDel") - dels; got != 0 {
		t.Errorf("one new pod address: %d route deletes, want 0", got)
	}
	if got := fk.Calls("LinkList") - links; got != 0 {
		t.Errorf("one new pod address: %d link lists, want 0", got)
	}
	if got := kern.Calls(); len(got) != 0 {
		t.Errorf("one new pod address: iptables/ipset commands %v (NAT re-applied), want none", got)
	}
	if _, ok := fk.Route("10.244.1.60/32"); !ok {
		t.Error("the new pod's route is missing")
	}

	replaces = fk.Calls("RouteReplace")
	lbPool := model.Pool{Name: "lb", CIDR: netip.MustParsePrefix("203.0.113.0/24"), IPIPMode: v1.IPIPModeNever, VXLANMode: v1.VXLANModeNever, Uses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}
	a.onUpdates([]any{model.LoadBalancerPoolUpdate{Pool: lbPool},
		model.BGPPeerUpdate{Peer: &v1.BGPPeer{Spec: v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65000}}}, model.SecretUpdate{Name: "s"},
		model.ServiceUpdate{Service: model.Service{Key: "apps/web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("203.0.113.10")}}}})
	apply()
	if fk.Calls("RouteReplace") != replaces || len(kern.Calls()) != 0 {
		t.Error("a pass of BGP objects, a LoadBalancer pool and a Service wrote to the kernel")
	}
	if got := kern.Sets()["tabby-masq-ipam-pools"].Members; len(got) != 2 {
		t.Errorf("the LoadBalancer pool reached felix's NAT set: %q", got)
	}
	if a.tunnel.record(model.LoadBalancerPoolUpdate{Pool: lbPool}) {
		t.Error("a LoadBalancer pool taken as an input of the tunnels")
	}
}

// TestTunnelNeed: a pool that selects this node and encapsulates needs the device's address
// (and for VXLAN its MAC) on this node's Node, a pool of the other family or encapsulation does
// not; the inputs are this node's Node and the pools, and nothing else of the stream.
func TestTunnelNeed(t *testing.T) {
	pool := func(name string, mode v1.IPIPMode, sel string, disabled bool) model.Pool {
		p := model.Pool{Name: name, CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: mode, VXLANMode: v1.VXLANModeNever, Disabled: disabled}
		if sel != "" {
			p = parsePool(t, name, mode, sel, disabled)
		}
		return p
	}
	vxlan := func(name, cidr string, mode v1.VXLANMode) model.Pool {
		return model.Pool{Name: name, CIDR: netip.MustParsePrefix(cidr), IPIPMode: v1.IPIPModeNever, VXLANMode: mode}
	}
	local := model.Node{Name: "a", Labels: map[string]string{"zone": "x"}}
	withVTEP := local
	withVTEP.VXLANTunnelAddr.Set(ipfamily.IPv6, netip.MustParseAddr("fd00:10:244::1"))
	withVTEP.VXLANMAC.Set(ipfamily.IPv6, ipam.VXLANTunnel.Get(ipfamily.IPv6).WantMAC("a"))
	for _, tc := range []struct {
		name string
		msgs []any
		want []string // the tunnels out of sync
	}{
		{"no local node yet", []any{model.PoolUpdate{Pool: pool("p", v1.IPIPModeAlways, "", false)}}, nil},
		{"never", []any{model.NodeUpdate{Node: local}, model.PoolUpdate{Pool: pool("p", v1.IPIPModeNever, "", false)}}, nil},
		{"cross-subnet selects us", []any{model.NodeUpdate{Node: local}, model.PoolUpdate{Pool: pool("p", v1.IPIPModeCrossSubnet, "zone == 'x'", false)}}, []string{"IPIP"}},
		{"always, other zone", []any{model.NodeUpdate{Node: local}, model.PoolUpdate{Pool: pool("p", v1.IPIPModeAlways, "zone == 'y'", false)}}, nil},
		{"always but disabled", []any{model.NodeUpdate{Node: local}, model.PoolUpdate{Pool: pool("p", v1.IPIPModeAlways, "", true)}}, nil},
		{"pool removed", []any{model.NodeUpdate{Node: local}, model.PoolUpdate{Pool: pool("p", v1.IPIPModeAlways, "", false)}, model.PoolRemove{Name: "p"}}, nil},
		{"has its address", []any{model.NodeUpdate{Node: model.Node{Name: "a", IPIPTunnelAddr: netip.MustParseAddr("10.244.0.1")}}, model.PoolUpdate{Pool: pool("p", v1.IPIPModeAlways, "", false)}}, nil},
		{"an address no pool needs", []any{model.NodeUpdate{Node: model.Node{Name: "a", IPIPTunnelAddr: netip.MustParseAddr("10.244.0.1")}}}, []string{"IPIP"}},
		{"VXLAN of each family", []any{model.NodeUpdate{Node: local}, model.PoolUpdate{Pool: vxlan("v4", "10.244.0.0/16", v1.VXLANModeAlways)},
			model.PoolUpdate{Pool: vxlan("v6", "fd00:10:244::/48", v1.VXLANModeCrossSubnet)}}, []string{"VXLAN IPv4", "VXLAN IPv6"}},
		{"IPv6 VXLAN with its VTEP and MAC", []any{model.NodeUpdate{Node: withVTEP}, model.PoolUpdate{Pool: vxlan("v6", "fd00:10:244::/48", v1.VXLANModeAlways)}}, nil},
		{"a VTEP and MAC no pool needs", []any{model.NodeUpdate{Node: withVTEP}, model.PoolUpdate{Pool: vxlan("v6", "fd00:10:244::/48", v1.VXLANModeNever)}}, []string{"VXLAN IPv6"}},
	} {
		tn := newTunnelNeed("a")
		for _, m := range tc.msgs {
			if !tn.record(m) {
				t.Errorf("%s: %T not taken as an input", tc.name, m)
			}
		}
		var got []string
		for _, tun := range tn.outOfSync() {
			got = append(got, tun.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: out of sync %v, want %v", tc.name, got, tc.want)
		}
	}
	tn := newTunnelNeed("a")
	for _, m := range []any{model.NodeUpdate{Node: model.Node{Name: "b"}}, model.BlockUpdate{}, model.WorkloadUpdate{}, model.FelixConfigurationUpdate{}} {
		if tn.record(m) {
			t.Errorf("%T (another node's, or not an input) taken as an input", m)
		}
	}
}

// Without BGP (--bgp=none) the agent has no bird: BGP's objects go nowhere, felix still gets its
// own (the FelixConfiguration among them), and felix's InSync waits for the datastore alone, so
// the route a previous run left and nothing explains is removed without a BGP agent to wait for.
func TestNoBGP(t *testing.T) {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	stale := netlink.Route{Dst: ipnet("10.244.9.0/26"), Type: unix.RTN_BLACKHOLE, Protocol: v1.RouteProtocol, Table: unix.RT_TABLE_MAIN}
	fk.InjectRoute(stale)
	f, err := felix.New(felix.Config{NodeName: "n1", UplinkInterface: ipfamily.PairOf("eth0", ""), ResyncInterval: time.Hour, WaitForInSync: true},
		felix.WithNetlink(fk), felix.WithCommandRunner(fakekernel.New()), felix.WithSysctl(nopSysctl{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	a := &Agent{felix: f, tunnel: newTunnelNeed("n1"), tunnelKick: make(chan struct{}, 1), synced: make(chan struct{})}
	a.onUpdates([]any{
		model.NodeUpdate{Node: model.Node{Name: "n1", BGPAddress: ipfamily.PairOf(netip.MustParsePrefix("198.51.100.11/24"), netip.Prefix{})}},
		model.FelixConfigurationUpdate{}, model.BGPConfigurationUpdate{},
		model.BGPPeerUpdate{Peer: &v1.BGPPeer{Spec: v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65000}}}, model.SecretUpdate{Name: "s"},
		model.InSync{},
	})
	if err := f.ApplyNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := fk.Route("10.244.9.0/26"); !ok {
		t.Fatal("felix removed a route before InSync")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.declareInSync(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("declareInSync waited for a BGP agent that does not exist")
	}
	if err := f.ApplyNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := fk.Route("10.244.9.0/26"); ok {
		t.Fatal("after InSync, the stale route is still there")
	}
	if err := a.shutdown(); err != nil {
		t.Fatalf("shutdown without BGP: %v", err)
	}
}

func ipnet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}
