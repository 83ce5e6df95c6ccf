package vxlan

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

// routes is a routetable.Writer that keeps what the manager states.
type routes map[netip.Prefix]calc.Route

func (r routes) SetRoute(c routetable.Class, rt calc.Route) {
	if c != routetable.ClassVXLAN {
		panic("VXLAN route of another class")
	}
	r[rt.Dst] = rt
}
func (r routes) RemoveRoute(_ routetable.Class, dst netip.Prefix) { delete(r, dst) }

func (r routes) String(p string) string {
	rt, ok := r[pfx(p)]
	if !ok {
		return ""
	}
	return rt.String()
}

func mac(last byte) model.MAC { return model.MAC{0x66, 0x1f, 0, 0, 0, last} }

// node is a NodeUpdate with an IPv4 VTEP (vtep "": none) and optionally an IPv6 one.
func node(name, bgp4, vtep4 string, m byte, v6 ...string) model.NodeUpdate {
	n := model.Node{Name: name}
	n.BGPAddress.Set(ipfamily.IPv4, pfx(bgp4))
	if vtep4 != "" {
		n.VXLANTunnelAddr.Set(ipfamily.IPv4, addr(vtep4))
		n.VXLANMAC.Set(ipfamily.IPv4, mac(m))
	}
	if len(v6) == 2 {
		n.BGPAddress.Set(ipfamily.IPv6, pfx(v6[0]))
		n.VXLANTunnelAddr.Set(ipfamily.IPv6, addr(v6[1]))
		n.VXLANMAC.Set(ipfamily.IPv6, mac(m+0x80))
	}
	return model.NodeUpdate{Node: n}
}

func vxPool(name, cidr string, mode v1.VXLANMode) model.PoolUpdate {
	return model.PoolUpdate{Pool: model.Pool{Name: name, CIDR: pfx(cidr), IPIPMode: v1.IPIPModeNever, VXLANMode: mode}}
}

func block(cidr, n string, borrowed ...string) model.BlockUpdate {
	b := model.Block{CIDR: pfx(cidr), Node: n}
	for i := 0; i+1 < len(borrowed); i += 2 {
		b.Borrowed = append(b.Borrowed, model.Borrowed{Addr: addr(borrowed[i]), Node: borrowed[i+1]})
	}
	return model.BlockUpdate{Block: b}
}

func felixConfig(vni, port, mtu int) model.FelixConfigurationUpdate {
	c := &v1.FelixConfiguration{}
	c.Spec.VXLANVNI, c.Spec.VXLANPort = &vni, &port
	if mtu != 0 {
		c.Spec.VXLANMTU = &mtu
	}
	return model.FelixConfigurationUpdate{Config: c}
}

// env is a manager on a fake kernel with an uplink, whose neighbour events reach the manager
// as felix's loop hands them over.
type env struct {
	t     *testing.T
	fk    *nl.Fake
	m     *Manager
	rt    routes
	ready []string
	neigh chan netlink.NeighUpdate
}

func newEnv(t *testing.T, o Options) *env {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	e := &env{t: t, fk: fk, rt: routes{}, neigh: make(chan netlink.NeighUpdate, 10000)}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	if err := fk.SubscribeNeigh(done, e.neigh, nil); err != nil {
		t.Fatal(err)
	}
	o.NodeName, o.Uplink = "n1", ipfamily.PairOf("eth0", "eth0")
	o.LinkReady = func(l netlink.Link) { e.ready = append(e.ready, l.Attrs().Name) }
	if o.KernelRelease == "" {
		o.KernelRelease = "6.8.0"
	}
	e.m = New(e.rt, fk, o)
	return e
}

// pass hands the manager msgs and the neighbour events so far, then completes its work.
func (e *env) pass(what string, resync bool, msgs ...any) error {
	e.t.Helper()
	for _, msg := range msgs {
		e.m.OnUpdate(msg)
	}
	e.events()
	err := e.m.CompleteDeferredWork(context.Background(), resync)
	e.events() // the events of its own writes: none may need a write
	return err
}

func (e *env) mustPass(what string, msgs ...any) {
	e.t.Helper()
	if err := e.pass(what, false, msgs...); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// events hands over the queued neighbour events; it tells whether one needed a write.
func (e *env) events() bool {
	write := false
	for {
		select {
		case u := <-e.neigh:
			if e.m.OnNeighUpdate(u) {
				write = true
			}
		default:
			return write
		}
	}
}

func (e *env) link(name string) *netlink.Vxlan {
	e.t.Helper()
	l, err := e.fk.LinkByName(name)
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	vx, ok := l.(*netlink.Vxlan)
	if !ok {
		e.t.Fatalf("%s is a %s", name, l.Type())
	}
	return vx
}

// entries is the device's neighbour and FDB entries as `ip neigh` and `bridge fdb` would show
// them: "VTEP lladdr MAC" and "MAC dst UNDERLAY", sorted.
func (e *env) entries(dev string) []string {
	e.t.Helper()
	l, err := e.fk.LinkByName(dev)
	if err != nil {
		return nil
	}
	var out []string
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6, unix.AF_BRIDGE} {
		ns, _ := e.fk.NeighList(l.Attrs().Index, fam)
		for _, n := range ns {
			if n.State&netlink.NUD_PERMANENT == 0 {
				continue
			}
			if fam == unix.AF_BRIDGE {
				out = append(out, n.HardwareAddr.String()+" dst "+n.IP.String())
			} else {
				out = append(out, n.IP.String()+" lladdr "+n.HardwareAddr.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

func (e *env) wantEntries(dev string, want ...string) {
	e.t.Helper()
	slices.Sort(want)
	if got := e.entries(dev); !slices.Equal(got, want) {
		e.t.Fatalf("%s entries\n%s\nwant\n%s", dev, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func (e *env) wantRoute(p, want string) {
	e.t.Helper()
	if got := e.rt.String(p); got != want {
		e.t.Fatalf("route %s = %q, want %q", p, got, want)
	}
}

// writes counts the calls that change the kernel.
func (e *env) writes() int {
	n := 0
	for _, op := range []string{"LinkAdd", "LinkDel", "LinkSetUp", "LinkSetMTU", "LinkSetHardwareAddr", "SetTxChecksumOffload", "AddrReplace", "NeighSet", "NeighDel"} {
		n += e.fk.Calls(op)
	}
	return n
}

// cluster is three nodes, a VXLAN pool, blocks on each node and an address n3 borrowed in n2's.
func cluster(mode v1.VXLANMode) []any {
	return []any{
		node("n1", "198.51.100.11/24", "10.244.0.0", 1),
		node("n2", "198.51.100.12/24", "10.244.1.0", 2),
		node("n3", "203.0.113.7/24", "10.244.2.0", 3),
		vxPool("vx", "10.244.0.0/16", mode),
		block("10.244.0.0/26", "n1"),
		block("10.244.1.0/26", "n2", "10.244.1.40", "n3"),
		block("10.244.2.0/26", "n3"),
	}
}

func TestConvergeFromEmptyAndNoOp(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustPass("first", cluster(v1.VXLANModeAlways)...)
	vx := e.link("vxlan.tabby")
	if vx.VxlanId != 4096 || vx.Port != 4789 || !vx.SrcAddr.Equal(addr("198.51.100.11").AsSlice()) || vx.Learning ||
		vx.HardwareAddr.String() != mac(1).String() || vx.MTU != 1450 || vx.Flags&1 == 0 {
		t.Fatalf("device %+v", vx)
	}
	addrs, _ := e.fk.AddrList(vx, unix.AF_INET)
	if len(addrs) != 1 || addrs[0].IPNet.String() != "10.244.0.0/32" {
		t.Fatalf("addresses %v", addrs)
	}
	if on, _ := e.fk.TxChecksumOffload("vxlan.tabby"); !on {
		t.Fatal("offload off on a 6.8 kernel")
	}
	e.wantEntries("vxlan.tabby",
		"10.244.1.0 lladdr 66:1f:00:00:00:02", "66:1f:00:00:00:02 dst 198.51.100.12",
		"10.244.2.0 lladdr 66:1f:00:00:00:03", "66:1f:00:00:00:03 dst 203.0.113.7")
	e.wantRoute("10.244.1.0/26", "10.244.1.0/26 via 10.244.1.0 dev vxlan.tabby onlink")
	e.wantRoute("10.244.2.0/26", "10.244.2.0/26 via 10.244.2.0 dev vxlan.tabby onlink")
	e.wantRoute("10.244.1.40/32", "10.244.1.40/32 via 10.244.2.0 dev vxlan.tabby onlink")
	if len(e.rt) != 3 || !slices.Equal(e.ready, []string{"vxlan.tabby"}) {
		t.Fatalf("routes %v, link ready %v", e.rt, e.ready)
	}
	if _, err := e.fk.LinkByName("vxlan-v6.tabby"); err == nil {
		t.Fatal("an IPv6 device without an IPv6 VXLAN pool")
	}

	// Nothing changed, or only what VXLAN does not read: no kernel call at all.
	reads, writes := e.fk.Calls("LinkByName"), e.writes()
	e.mustPass("nothing new")
	e.mustPass("unrelated", model.WorkloadUpdate{Workload: model.Workload{Interface: "cali1"}},
		routetable.LinkUpdate{Name: "cali1", Index: 9}, model.PoolUpdate{Pool: model.Pool{Name: "other", CIDR: pfx("10.99.0.0/16")}})
	if e.fk.Calls("LinkByName") != reads || e.writes() != writes {
		t.Fatalf("kernel touched with nothing changed: %d reads, %d writes", e.fk.Calls("LinkByName")-reads, e.writes()-writes)
	}
	// A resync reads the kernel again and writes nothing.
	if err := e.pass("resync", true); err != nil {
		t.Fatal(err)
	}
	if e.writes() != writes {
		t.Fatalf("a resync wrote %d times", e.writes()-writes)
	}
	// A block added costs its route only.
	reads = e.fk.Calls("LinkByName")
	e.mustPass("a block", block("10.244.1.64/26", "n2"))
	e.wantRoute("10.244.1.64/26", "10.244.1.64/26 via 10.244.1.0 dev vxlan.tabby onlink")
	if e.writes() != writes || e.fk.Calls("LinkByName") != reads {
		t.Fatalf("a block touched the kernel: %d writes, %d reads", e.writes()-writes, e.fk.Calls("LinkByName")-reads)
	}
}

func TestDriftRepaired(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustPass("first", cluster(v1.VXLANModeAlways)...)
	vx := e.link("vxlan.tabby")
	all := e.entries("vxlan.tabby")

	// Someone deletes an FDB entry and a neighbour, and adds one of their own.
	if err := e.fk.NeighDel(&netlink.Neigh{LinkIndex: vx.Index, Family: unix.AF_BRIDGE, HardwareAddr: mac(2).HardwareAddr(), IP: addr("198.51.100.12").AsSlice()}); err != nil {
		t.Fatal(err)
	}
	if err := e.fk.NeighDel(&netlink.Neigh{LinkIndex: vx.Index, Family: unix.AF_INET, IP: addr("10.244.2.0").AsSlice()}); err != nil {
		t.Fatal(err)
	}
	if err := e.fk.NeighSet(&netlink.Neigh{LinkIndex: vx.Index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT, IP: addr("10.244.9.9").AsSlice(), HardwareAddr: mac(9).HardwareAddr()}); err != nil {
		t.Fatal(err)
	}
	if !e.events() {
		t.Fatal("removing tabby's entries does not call for a write")
	}
	e.mustPass("repair")
	e.wantEntries("vxlan.tabby", all...)

	// A neighbour entry the kernel made itself (not permanent) is not tabby's.
	if err := e.fk.NeighSet(&netlink.Neigh{LinkIndex: vx.Index, Family: unix.AF_INET, State: netlink.NUD_REACHABLE, IP: addr("10.244.9.8").AsSlice(), HardwareAddr: mac(8).HardwareAddr()}); err != nil {
		t.Fatal(err)
	}
	if e.events() {
		t.Fatal("a kernel-made neighbour calls for a write")
	}

	// Someone deletes the device: made again, with its entries, and the route table told.
	e.fk.DelLink("vxlan.tabby")
	e.mustPass("device deleted", routetable.LinkUpdate{Name: "vxlan.tabby", Index: vx.Index, Gone: true})
	if e.link("vxlan.tabby").Index == vx.Index || len(e.ready) != 2 {
		t.Fatalf("device not made again (ready %v)", e.ready)
	}
	e.wantEntries("vxlan.tabby", all...)

	// Its MTU and state changed behind felix's back: put back in place, not made again.
	l := e.link("vxlan.tabby")
	_ = e.fk.LinkSetMTU(l, 1300)
	l.Flags &^= 1
	e.mustPass("changed", routetable.LinkUpdate{Name: "vxlan.tabby", Index: l.Index})
	if l = e.link("vxlan.tabby"); l.MTU != 1450 || l.Flags&1 == 0 || e.fk.Calls("LinkAdd") != 2 {
		t.Fatalf("mtu %d flags %v, %d devices made", l.MTU, l.Flags, e.fk.Calls("LinkAdd"))
	}
}

func TestCrossSubnetAndBorrowed(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustPass("first", append(cluster(v1.VXLANModeCrossSubnet),
		block("10.244.0.64/26", "n1", "10.244.0.70", "n2", "10.244.0.71", "n3", "10.244.0.72", "n1"))...)
	e.wantRoute("10.244.1.0/26", "10.244.1.0/26 via 198.51.100.12 dev eth0")
	e.wantRoute("10.244.2.0/26", "10.244.2.0/26 via 10.244.2.0 dev vxlan.tabby onlink")
	e.wantRoute("10.244.1.40/32", "10.244.1.40/32 via 10.244.2.0 dev vxlan.tabby onlink")
	e.wantRoute("10.244.0.70/32", "10.244.0.70/32 via 198.51.100.12 dev eth0")
	e.wantRoute("10.244.0.71/32", "10.244.0.71/32 via 10.244.2.0 dev vxlan.tabby onlink")
	e.wantRoute("10.244.0.72/32", "") // this node's own pod
	// n3 moves into this node's subnet: native from then on.
	e.mustPass("n3 moves", node("n3", "198.51.100.13/24", "10.244.2.0", 3))
	e.wantRoute("10.244.2.0/26", "10.244.2.0/26 via 198.51.100.13 dev eth0")
	e.wantEntries("vxlan.tabby",
		"10.244.1.0 lladdr 66:1f:00:00:00:02", "66:1f:00:00:00:02 dst 198.51.100.12",
		"10.244.2.0 lladdr 66:1f:00:00:00:03", "66:1f:00:00:00:03 dst 198.51.100.13")
	// The borrowed address goes back: its host route goes.
	e.mustPass("returned", block("10.244.0.64/26", "n1", "10.244.0.70", "n2"))
	e.wantRoute("10.244.0.71/32", "")
	e.wantRoute("10.244.0.70/32", "10.244.0.70/32 via 198.51.100.12 dev eth0")
}

func TestNodeLeaves(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustPass("first", cluster(v1.VXLANModeAlways)...)
	e.mustPass("n3 leaves", model.NodeRemove{Name: "n3"})
	e.wantEntries("vxlan.tabby", "10.244.1.0 lladdr 66:1f:00:00:00:02", "66:1f:00:00:00:02 dst 198.51.100.12")
	e.wantRoute("10.244.2.0/26", "")
	e.wantRoute("10.244.1.40/32", "")
	if nr := e.m.NoRoutes(); !strings.Contains(nr[pfx("10.244.2.0/26")], "node n3 is unknown") {
		t.Fatalf("no routes %v", nr)
	}
	// Its blocks are released: nothing is left of it.
	e.mustPass("blocks released", model.BlockRemove{CIDR: pfx("10.244.2.0/26")}, block("10.244.1.0/26", "n2"))
	if len(e.m.NoRoutes()) != 0 || len(e.rt) != 1 {
		t.Fatalf("left: no routes %v, routes %v", e.m.NoRoutes(), e.rt)
	}
	// A node losing its VTEP: its entries go, its routes wait.
	e.mustPass("n2 loses its VTEP", node("n2", "198.51.100.12/24", "", 0))
	e.wantEntries("vxlan.tabby")
	e.wantRoute("10.244.1.0/26", "")
}

func TestRemovalWaitsForInSync(t *testing.T) {
	e := newEnv(t, Options{WaitForInSync: true})
	// What a previous felix left: a device with a stale peer.
	e.mustPass("first", append(cluster(v1.VXLANModeAlways), model.InSync{})...)
	vx := e.link("vxlan.tabby")
	stale := &netlink.Neigh{LinkIndex: vx.Index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT, IP: addr("10.244.7.0").AsSlice(), HardwareAddr: mac(7).HardwareAddr()}
	if err := e.fk.NeighSet(stale); err != nil {
		t.Fatal(err)
	}
	e.events()
	all := e.entries("vxlan.tabby")

	// A new felix on the same kernel, with half the datastore (no pools yet, another VNI).
	e.rt = routes{} // the route table keeps what the previous felix stated until in sync
	e.m = New(e.rt, e.fk, Options{NodeName: "n1", Uplink: ipfamily.PairOf("eth0", "eth0"), WaitForInSync: true, KernelRelease: "6.8.0"})
	e.mustPass("restart", node("n1", "198.51.100.11/24", "10.244.0.0", 1), node("n2", "198.51.100.12/24", "10.244.1.0", 2),
		vxPool("vx", "10.244.0.0/16", v1.VXLANModeAlways), felixConfig(4097, 4789, 0))
	if l := e.link("vxlan.tabby"); l.Index != vx.Index {
		t.Fatal("device made again before in sync")
	}
	e.wantEntries("vxlan.tabby", all...)
	if err := e.pass("in sync", false, model.InSync{}); err != nil {
		t.Fatal(err)
	}
	if l := e.link("vxlan.tabby"); l.Index == vx.Index || l.VxlanId != 4097 {
		t.Fatalf("device not made again with VNI 4097 once in sync: %+v", l)
	}
	e.wantEntries("vxlan.tabby", "10.244.1.0 lladdr 66:1f:00:00:00:02", "66:1f:00:00:00:02 dst 198.51.100.12")

	// The last VXLAN pool goes: so does the device.
	e.mustPass("pool removed", model.PoolRemove{Name: "vx"})
	if _, err := e.fk.LinkByName("vxlan.tabby"); !nl.IsNotFound(err) {
		t.Fatalf("device kept without a VXLAN pool: %v", err)
	}
	if len(e.rt) != 0 {
		t.Fatalf("routes kept: %v", e.rt)
	}
}

func TestConfigurationChanges(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustPass("first", cluster(v1.VXLANModeAlways)...)
	all := e.entries("vxlan.tabby")
	// The MTU changes in place.
	e.mustPass("mtu", felixConfig(4096, 4789, 1400))
	if l := e.link("vxlan.tabby"); l.MTU != 1400 || e.fk.Calls("LinkAdd") != 1 {
		t.Fatalf("mtu %d after %d creations", l.MTU, e.fk.Calls("LinkAdd"))
	}
	// The VNI and the port only by making the device again, entries and all.
	for i, c := range []model.FelixConfigurationUpdate{felixConfig(7, 4789, 1400), felixConfig(7, 8472, 1400)} {
		e.mustPass("vni or port", c)
		l := e.link("vxlan.tabby")
		if l.VxlanId != 7 || l.Port != *c.Config.Spec.VXLANPort || e.fk.Calls("LinkAdd") != 2+i || l.MTU != 1400 {
			t.Fatalf("device %+v after %d creations", l, e.fk.Calls("LinkAdd"))
		}
		e.wantEntries("vxlan.tabby", all...)
	}
	// The configuration goes: defaults (made again for the VNI), and the MTU follows the
	// uplink's.
	e.mustPass("defaults", model.FelixConfigurationUpdate{})
	if l := e.link("vxlan.tabby"); l.VxlanId != 4096 || l.Port != 4789 || l.MTU != 1450 {
		t.Fatalf("device %+v", l)
	}
	eth0, _ := e.fk.LinkByName("eth0")
	_ = e.fk.LinkSetMTU(eth0, 9000)
	e.mustPass("uplink mtu", routetable.LinkUpdate{Name: "eth0", Index: eth0.Attrs().Index})
	if l := e.link("vxlan.tabby"); l.MTU != 8950 {
		t.Fatalf("mtu %d after the uplink's went to 9000", l.MTU)
	}
	// This node's MAC changes in place.
	e.mustPass("mac", node("n1", "198.51.100.11/24", "10.244.0.0", 0x21))
	if l := e.link("vxlan.tabby"); l.HardwareAddr.String() != mac(0x21).String() || e.fk.Calls("LinkAdd") != 4 {
		t.Fatalf("mac %s", l.HardwareAddr)
	}
}

func TestIPv6AndOffload(t *testing.T) {
	e := newEnv(t, Options{ChecksumOffload: ChecksumOffloadOff})
	e.mustPass("first",
		node("n1", "198.51.100.11/24", "", 1, "2001:db8:100::11/64", "fd00:10:244::"),
		node("n2", "198.51.100.12/24", "", 2, "2001:db8:300::12/64", "fd00:10:244:1::"),
		vxPool("vx6", "fd00:10:244::/48", v1.VXLANModeCrossSubnet),
		block("fd00:10:244:1::/122", "n2"))
	l := e.link("vxlan-v6.tabby")
	addrs, _ := e.fk.AddrList(l, unix.AF_INET6)
	if !l.SrcAddr.Equal(addr("2001:db8:100::11").AsSlice()) || l.MTU != 1430 || len(addrs) != 1 || addrs[0].IPNet.String() != "fd00:10:244::/128" {
		t.Fatalf("device %+v addresses %v", l, addrs)
	}
	if on, _ := e.fk.TxChecksumOffload("vxlan-v6.tabby"); on {
		t.Fatal("offload on though configured off")
	}
	e.wantEntries("vxlan-v6.tabby", "fd00:10:244:1:: lladdr 66:1f:00:00:00:82", "66:1f:00:00:00:82 dst 2001:db8:300::12")
	e.wantRoute("fd00:10:244:1::/122", "fd00:10:244:1::/122 via fd00:10:244:1:: dev vxlan-v6.tabby onlink")
	if _, err := e.fk.LinkByName("vxlan.tabby"); err == nil {
		t.Fatal("an IPv4 device without an IPv4 VXLAN pool")
	}
}

func TestOffloadDecision(t *testing.T) {
	for _, tc := range []struct {
		c       ChecksumOffload
		release string
		want    bool
	}{
		{ChecksumOffloadAuto, "5.6.19-generic", false},
		{ChecksumOffloadAuto, "4.19.0", false},
		{ChecksumOffloadAuto, "5.7.0", true},
		{ChecksumOffloadAuto, "6.18.44-fc", true},
		{ChecksumOffloadAuto, "5.15rc1", true},
		{ChecksumOffloadAuto, "", true},
		{ChecksumOffloadOn, "4.19.0", true},
		{ChecksumOffloadOff, "6.8.0", false},
	} {
		if got := tc.c.Wanted(tc.release); got != tc.want {
			t.Errorf("%q on %q: %v, want %v", tc.c, tc.release, got, tc.want)
		}
	}
}

func TestFailuresRetried(t *testing.T) {
	e := newEnv(t, Options{})
	e.fk.Fail(&nl.Failure{Op: "NeighSet", Dst: mac(3).String(), Err: unix.ENOBUFS, Times: 1})
	err := e.pass("first", false, cluster(v1.VXLANModeAlways)...)
	if err == nil || !strings.Contains(err.Error(), "FDB entry 66:1f:00:00:00:03") || e.m.NextDeadline().IsZero() {
		t.Fatalf("injected failure: %v (retry at %v)", err, e.m.NextDeadline())
	}
	if got := e.m.devs.Get(ipfamily.IPv4).table.programmed(); got != 1 {
		t.Fatalf("%d peers programmed with one FDB entry failed", got)
	}
	e.mustPass("retry")
	e.wantEntries("vxlan.tabby",
		"10.244.1.0 lladdr 66:1f:00:00:00:02", "66:1f:00:00:00:02 dst 198.51.100.12",
		"10.244.2.0 lladdr 66:1f:00:00:00:03", "66:1f:00:00:00:03 dst 203.0.113.7")
	if !e.m.NextDeadline().IsZero() {
		t.Fatal("a retry pending after success")
	}

	// A kernel without the vxlan driver: said so, no routes through a device that is not there
	// are lost (they stay stated), and the device is made once the kernel can.
	e2 := newEnv(t, Options{})
	e2.fk.Fail(&nl.Failure{Op: "LinkAdd", Err: unix.EOPNOTSUPP, Times: 1})
	if err := e2.pass("no driver", false, cluster(v1.VXLANModeAlways)...); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err %v, want ErrUnsupported", err)
	}
	e2.mustPass("driver loaded")
	e2.link("vxlan.tabby")
}

// Two nodes with one VTEP address or MAC: the first by name is programmed, whatever the order
// they came in, and the other's routes wait, with the reason.
func TestVTEPConflicts(t *testing.T) {
	for _, order := range [][]int{{0, 1}, {1, 0}} {
		e := newEnv(t, Options{})
		nodes := []model.NodeUpdate{node("n2", "198.51.100.12/24", "10.244.1.0", 2), node("n4", "198.51.100.14/24", "10.244.4.0", 2)}
		e.mustPass("first", node("n1", "198.51.100.11/24", "10.244.0.0", 1), vxPool("vx", "10.244.0.0/16", v1.VXLANModeAlways),
			block("10.244.1.0/26", "n2"), block("10.244.4.0/26", "n4"), nodes[order[0]], nodes[order[1]])
		e.wantEntries("vxlan.tabby", "10.244.1.0 lladdr 66:1f:00:00:00:02", "66:1f:00:00:00:02 dst 198.51.100.12")
		e.wantRoute("10.244.4.0/26", "")
		if nr := e.m.NoRoutes()[pfx("10.244.4.0/26")]; !strings.Contains(nr, "MAC 66:1f:00:00:00:02 is node n2's") {
			t.Fatalf("reason %q", nr)
		}
		// n2 goes: n4 takes over.
		e.mustPass("n2 leaves", model.NodeRemove{Name: "n2"})
		e.wantEntries("vxlan.tabby", "10.244.4.0 lladdr 66:1f:00:00:00:02", "66:1f:00:00:00:02 dst 198.51.100.14")
		e.wantRoute("10.244.4.0/26", "10.244.4.0/26 via 10.244.4.0 dev vxlan.tabby onlink")
	}
}
