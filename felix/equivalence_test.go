package felix

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// mirror is the input the messages sent so far add up to, as calc.Compute takes it.
type mirror struct {
	node      model.Node
	nodes     map[string]model.Node
	pools     map[string]model.Pool
	blocks    map[netip.Prefix]model.Block
	workloads map[string]model.Workload
	learned   map[netip.Prefix]netip.Addr
}

func newMirror() *mirror {
	return &mirror{nodes: map[string]model.Node{}, pools: map[string]model.Pool{}, blocks: map[netip.Prefix]model.Block{},
		workloads: map[string]model.Workload{}, learned: map[netip.Prefix]netip.Addr{}}
}

func (m *mirror) apply(msg any) {
	switch u := msg.(type) {
	case model.NodeUpdate:
		if u.Node.Name == "n1" {
			m.node = u.Node
		}
		m.nodes[u.Node.Name] = u.Node
	case model.NodeRemove:
		if u.Name == "n1" {
			m.node = model.Node{}
		}
		delete(m.nodes, u.Name)
	case model.PoolUpdate:
		m.pools[u.Pool.Name] = u.Pool
	case model.PoolRemove:
		delete(m.pools, u.Name)
	case model.BlockUpdate:
		m.blocks[u.Block.CIDR] = u.Block
	case model.BlockRemove:
		delete(m.blocks, u.CIDR)
	case model.WorkloadUpdate:
		m.workloads[u.Workload.Interface] = u.Workload
	case model.WorkloadRemove:
		delete(m.workloads, u.Interface)
	case model.RouteUpdate:
		m.learned[u.Prefix] = u.NextHop
	case model.RouteRemove:
		delete(m.learned, u.Prefix)
	}
}

func (m *mirror) input(uplink ipfamily.Pair[string], host []calc.HostRoute) calc.Input {
	in := calc.Input{
		Underlay:   calc.Underlay{Addr: m.node.BGPAddress, Uplink: uplink},
		Pools:      slices.Collect(maps.Values(m.pools)),
		Workloads:  slices.Collect(maps.Values(m.workloads)),
		BGPRoutes:  m.learned,
		HostRoutes: host,
		NodeName:   "n1",
		Nodes:      slices.Collect(maps.Values(m.nodes)),
		Blocks:     slices.Collect(maps.Values(m.blocks)),
	}
	for _, b := range m.blocks {
		if b.Node == "n1" {
			in.LocalBlocks = append(in.LocalBlocks, b.CIDR)
		}
	}
	return in
}

// churn draws the random changes: every kind of message, on values chosen to collide: pods on
// addresses that are also local /32 blocks and learned /32s, learned routes on local blocks,
// behind a tunnel, outside every pool, with this node's own next hop and with unusable ones;
// pools changing mode (native, IPIP, VXLAN, CrossSubnet) under the learned and the VXLAN routes,
// this node's subnet changing under their next hops, blocks changing node and lending addresses
// to other nodes (this one included), nodes' VTEPs coming, going and colliding.
type churn struct {
	rng *rand.Rand
}

func (c churn) pick(n int) int { return c.rng.IntN(n) }

var (
	churnIfaces = []string{"cali0", "cali1", "cali2", "cali3", ""}
	churnAddrs  = []netip.Addr{
		addrOf("10.244.0.5"), addrOf("10.244.0.6"), addrOf("10.244.0.60"), addrOf("10.244.0.70"),
		addrOf("10.244.200.5"), addrOf("172.16.0.5"), addrOf("fd00:10:244::5"), addrOf("fd00:10:244::70"),
		addrOf("::ffff:10.244.0.7"), // IPv4-mapped: no family, skipped
	}
	churnBlocks = []netip.Prefix{
		pfxOf("10.244.0.0/26"), pfxOf("10.244.0.60/32"), pfxOf("10.244.1.0/26"),
		pfxOf("10.244.200.0/26"), pfxOf("fd00:10:244::/122"),
	}
	churnPrefixes = []netip.Prefix{
		pfxOf("10.244.1.0/26"), pfxOf("10.244.2.0/26"), pfxOf("10.244.0.0/26"), pfxOf("10.244.0.60/32"),
		pfxOf("10.244.0.5/32"), pfxOf("10.244.0.70/32"), pfxOf("10.244.200.0/26"), pfxOf("10.244.200.5/32"),
		pfxOf("172.16.0.0/26"), pfxOf("fd00:10:244::40/122"), pfxOf("fd00:10:244::70/128"),
	}
	churnHops = []netip.Addr{
		addrOf("198.51.100.12"), addrOf("198.51.100.200"), addrOf("203.0.113.7"), addrOf("198.51.100.11"),
		addrOf("2001:db8:100::12"), addrOf("2001:db8:300::13"), addrOf("2001:db8:100::11"),
	}
	churnPools = []model.Pool{
		{Name: "pods", CIDR: pfxOf("10.244.0.0/16")},
		{Name: "cross", CIDR: pfxOf("10.244.200.0/24")},
		{Name: "v6", CIDR: pfxOf("fd00:10:244::/48"), IPIPMode: v1.IPIPModeNever},
	}
	churnModes      = []v1.IPIPMode{v1.IPIPModeNever, v1.IPIPModeCrossSubnet, v1.IPIPModeAlways}
	churnVXLANModes = []v1.VXLANMode{v1.VXLANModeNever, v1.VXLANModeCrossSubnet, v1.VXLANModeAlways}
	churnNodeAddr   = []netip.Prefix{pfxOf("198.51.100.11/24"), pfxOf("198.51.100.11/25"), {}}
	churnNode6      = []netip.Prefix{pfxOf("2001:db8:100::11/64"), {}}
	// The other nodes' underlay addresses: in this node's subnet or not, this node's own.
	churnPeerAddr = []netip.Prefix{pfxOf("198.51.100.12/24"), pfxOf("198.51.100.200/24"), pfxOf("203.0.113.7/24"), pfxOf("198.51.100.11/24"), {}}
	churnPeer6    = []netip.Prefix{pfxOf("2001:db8:100::12/64"), pfxOf("2001:db8:300::13/64"), {}}
	churnNodes    = []string{"n1", "n1", "n2", "n3"}
	churnVTEPs    = []netip.Addr{addrOf("10.244.0.1"), addrOf("10.244.1.1"), addrOf("10.244.1.2"), addrOf("10.244.200.1"), addrOf("10.244.2.1"), {}}
	churnVTEP6s   = []netip.Addr{addrOf("fd00:10:244::1"), addrOf("fd00:10:244::41"), addrOf("fd00:10:244::81"), {}}
	churnMACs     = []model.MAC{{0x66, 0, 0, 0, 0, 1}, {0x66, 0, 0, 0, 0, 2}, {0x66, 0, 0, 0, 0, 3}, {0x66, 0, 0, 0, 0, 4}, {0x66, 0, 0, 0, 0, 5}, {0x66, 0, 0, 0, 0, 6}, {}}
)

func addrOf(s string) netip.Addr  { return netip.MustParseAddr(s) }
func pfxOf(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func (c churn) message() any {
	switch op := c.pick(100); {
	case op < 25:
		w := model.Workload{Interface: churnIfaces[c.pick(len(churnIfaces))]}
		for range c.pick(3) {
			w.IPs = append(w.IPs, churnAddrs[c.pick(len(churnAddrs))])
		}
		return model.WorkloadUpdate{Workload: w}
	case op < 35:
		return model.WorkloadRemove{Interface: churnIfaces[c.pick(len(churnIfaces))]}
	case op < 60:
		return model.RouteUpdate{Prefix: churnPrefixes[c.pick(len(churnPrefixes))], NextHop: churnHops[c.pick(len(churnHops))]}
	case op < 70:
		return model.RouteRemove{Prefix: churnPrefixes[c.pick(len(churnPrefixes))]}
	case op < 78:
		nodes := []string{"n1", "n2", "n3", ""}
		b := model.Block{CIDR: churnBlocks[c.pick(len(churnBlocks))], Node: nodes[c.pick(len(nodes))]}
		for range c.pick(3) {
			b.Borrowed = append(b.Borrowed, model.Borrowed{Addr: churnAddrs[c.pick(len(churnAddrs))], Node: nodes[c.pick(len(nodes))]})
		}
		return model.BlockUpdate{Block: b}
	case op < 82:
		return model.BlockRemove{CIDR: churnBlocks[c.pick(len(churnBlocks))]}
	case op < 90:
		p := churnPools[c.pick(len(churnPools))]
		p.VXLANMode = churnVXLANModes[c.pick(len(churnVXLANModes))]
		if p.Family() == ipfamily.IPv4 && p.VXLANMode == v1.VXLANModeNever {
			p.IPIPMode = churnModes[c.pick(len(churnModes))]
		}
		p.NATOutgoing = c.pick(2) == 0
		return model.PoolUpdate{Pool: p}
	case op < 93:
		return model.PoolRemove{Name: churnPools[c.pick(len(churnPools))].Name}
	case op < 98:
		n := model.Node{Name: churnNodes[c.pick(len(churnNodes))]}
		if n.Name == "n1" {
			n.BGPAddress = ipfamily.PairOf(churnNodeAddr[c.pick(len(churnNodeAddr))], churnNode6[c.pick(len(churnNode6))])
		} else {
			n.BGPAddress = ipfamily.PairOf(churnPeerAddr[c.pick(len(churnPeerAddr))], churnPeer6[c.pick(len(churnPeer6))])
		}
		n.VXLANTunnelAddr = ipfamily.PairOf(churnVTEPs[c.pick(len(churnVTEPs))], churnVTEP6s[c.pick(len(churnVTEP6s))])
		n.VXLANMAC = ipfamily.PairOf(churnMACs[c.pick(len(churnMACs))], churnMACs[c.pick(len(churnMACs))])
		if n.Name == "n1" && c.pick(4) != 0 {
			// This node mostly has its VTEPs: without them no VXLAN route is decided.
			n.VXLANTunnelAddr = ipfamily.PairOf(churnVTEPs[c.pick(len(churnVTEPs)-1)], churnVTEP6s[c.pick(len(churnVTEP6s)-1)])
			n.VXLANMAC = ipfamily.PairOf(churnMACs[c.pick(len(churnMACs)-1)], churnMACs[c.pick(len(churnMACs)-1)])
		}
		return model.NodeUpdate{Node: n}
	default:
		return model.NodeRemove{Name: churnNodes[c.pick(len(churnNodes))]}
	}
}

// hostRoute is one of the host's own routes the churn adds and removes behind felix's back.
type hostRoute struct {
	dst string
	gw  string
}

var churnHostRoutes = []hostRoute{
	{dst: "0.0.0.0/0", gw: "198.51.100.1"},
	{dst: "203.0.113.0/24", gw: "198.51.100.254"},
	{dst: "::/0", gw: "2001:db8:100::1"},
}

// The managers, driven by random sequences of the model's messages (and by the host's routes
// changing under them), must want exactly the routes calc.Compute derives from the input those
// messages add up to, and report the same unresolved next hops, after every pass: whether a
// pass took one message or a burst, a new pod or a changed pool.
func TestManagersEqualCompute(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			c := churn{rng: rand.New(rand.NewPCG(seed, 42))}
			fk := nl.NewFake()
			eth0 := fk.AddLink("eth0", 1500)
			for _, n := range churnIfaces[:4] {
				fk.AddLink(n, 1500)
			}
			fk.InjectRoute(netlink.Route{Dst: ipNet("198.51.100.0/24"), LinkIndex: eth0, Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_KERNEL})
			fk.InjectRoute(netlink.Route{Dst: ipNet("2001:db8:100::/64"), LinkIndex: eth0, Protocol: unix.RTPROT_KERNEL})
			up := ipfamily.PairOf("eth0", "eth0")
			f, err := New(Config{NodeName: "n1", UplinkInterface: up, ResyncInterval: time.Hour},
				WithNetlink(fk), WithCommandRunner(fakekernel.New()), WithSysctl(&fakeSysctl{set: map[string]string{}}))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m := newMirror()
			hosts := map[hostRoute]bool{}
			ctx := context.Background()
			for step := 0; step < 400; step++ {
				var sent []any
				for range 1 + c.pick(4) {
					msg := c.message()
					m.apply(msg)
					f.OnUpdate(msg)
					sent = append(sent, msg)
				}
				if c.pick(10) == 0 {
					h := churnHostRoutes[c.pick(len(churnHostRoutes))]
					if hosts[h] {
						fk.RemoveRoute(h.dst)
					} else {
						fk.InjectRoute(netlink.Route{Dst: ipNet(h.dst), Gw: net.ParseIP(h.gw), LinkIndex: eth0, Protocol: unix.RTPROT_STATIC})
					}
					hosts[h] = !hosts[h]
					f.QueueResync()
				}
				_ = f.ApplyNow(ctx) // tunl0 may be wanted on a kernel that cannot make it: beside the point
				want := calc.Compute(m.input(up, f.rt.HostRoutes()))
				got := f.rt.DesiredRoutes()
				if !maps.EqualFunc(got, want.Routes, calc.Route.Equal) {
					t.Fatalf("step %d (sent %v): the managers want\n%v\ncalc.Compute says\n%v", step, sent, got, want.Routes)
				}
				wantUnresolved := map[netip.Prefix]string{}
				for _, u := range want.Unresolved {
					wantUnresolved[u.Prefix] = u.String()
				}
				if gotUnresolved := f.Unresolved(); !maps.Equal(gotUnresolved, wantUnresolved) {
					t.Fatalf("step %d (sent %v): unresolved %v, calc.Compute says %v", step, sent, gotUnresolved, wantUnresolved)
				}
				wantNoRoutes := map[netip.Prefix]string{}
				for _, n := range want.VXLANNoRoutes {
					wantNoRoutes[n.Prefix] = n.String()
				}
				if got := f.VXLANUnresolved(); !maps.Equal(got, wantNoRoutes) {
					t.Fatalf("step %d (sent %v): VXLAN routes missing %v, calc.Compute says %v", step, sent, got, wantNoRoutes)
				}
				for _, fam := range ipfamily.All {
					st := want.VXLAN.Get(fam)
					device, peers := f.vxlan.Wanted(fam)
					if device != st.Device || !maps.Equal(peers, st.Peers) {
						t.Fatalf("step %d (sent %v): %s VXLAN device %v peers %v, calc.Compute says %v %v", step, sent, fam, device, peers, st.Device, st.Peers)
					}
				}
			}
		})
	}
}

func ipNet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}
