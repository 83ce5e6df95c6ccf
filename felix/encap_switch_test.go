package felix

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/internal/testwait"
)

// A pool switched between IPIP and VXLAN while the cluster runs: felix on the fake kernel, this
// node n1 in 198.51.100.0/24 with n2 and n3, n4 and n5 in 203.0.113.0/24, each with a block of
// the pool and n5 an address borrowed in n2's block. BGP keeps learning every block (bird
// advertises them whatever the encapsulation); the VXLAN VTEPs come with the NodeUpdates once
// IPAM has allocated them, and go once it has released them.

type switchNode struct {
	name, underlay, block string
	sameSubnet            bool
}

var switchNodes = []switchNode{
	{"n2", "198.51.100.12", "10.244.1.0/26", true},
	{"n3", "198.51.100.13", "10.244.2.0/26", true},
	{"n4", "203.0.113.14", "10.244.3.0/26", false},
	{"n5", "203.0.113.15", "10.244.4.0/26", false},
}

// switchBorrowed is n5's pod in n2's block: a /32 routed to n5.
const switchBorrowed = "10.244.1.60"

// switchVTEP is node i's VXLAN VTEP address (i 0: n1) and MAC.
func switchVTEP(i int) (netip.Addr, model.MAC) {
	return netip.AddrFrom4([4]byte{10, 244, 200, byte(1 + i)}), model.MAC{0x66, 0x1f, 0, 0, 0, byte(1 + i)}
}

// switchNodeUpdate is a node's NodeUpdate (i 0: n1), with its VTEP when vtep.
func switchNodeUpdate(i int, vtep bool) model.NodeUpdate {
	name, under := "n1", "198.51.100.11/24"
	if i > 0 {
		n := switchNodes[i-1]
		name, under = n.name, n.underlay+"/24"
	}
	n := model.Node{Name: name}
	n.BGPAddress.Set(ipfamily.IPv4, netip.MustParsePrefix(under))
	if vtep {
		a, mac := switchVTEP(i)
		n.VXLANTunnelAddr.Set(ipfamily.IPv4, a)
		n.VXLANMAC.Set(ipfamily.IPv4, mac)
	} else {
		n.IPIPTunnelAddr = netip.AddrFrom4([4]byte{10, 244, 100, byte(1 + i)})
	}
	return model.NodeUpdate{Node: n}
}

// allVTEPs: every node has its VTEP.
const allVTEPs = 5

// switchNodeUpdates are every node's NodeUpdates: the first vteps nodes (n1 first) with their
// VTEP, the others with an IPIP tunnel address.
func switchNodeUpdates(vteps int) []any {
	var out []any
	for i := 0; i <= len(switchNodes); i++ {
		out = append(out, switchNodeUpdate(i, i < vteps))
	}
	return out
}

func switchPool(ipip v1.IPIPMode, vx v1.VXLANMode) model.PoolUpdate {
	return model.PoolUpdate{Pool: model.Pool{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: ipip, VXLANMode: vx, NATOutgoing: true}}
}

// switchCluster is the rest of what the syncer and the BGP speaker send: this node's block,
// the other nodes' blocks and their learned routes.
func switchCluster() []any {
	msgs := []any{localBlock("10.244.0.0/26")}
	for _, n := range switchNodes {
		b := model.Block{CIDR: netip.MustParsePrefix(n.block), Node: n.name}
		if n.name == "n2" {
			b.Borrowed = []model.Borrowed{{Addr: netip.MustParseAddr(switchBorrowed), Node: "n5"}}
		}
		msgs = append(msgs, model.BlockUpdate{Block: b}, learned(n.block, n.underlay))
	}
	return append(msgs, learned(switchBorrowed+"/32", "203.0.113.15"))
}

// encap is how the routes to the other nodes go.
type encap struct {
	ipip v1.IPIPMode
	vx   v1.VXLANMode
}

func (e encap) String() string {
	if e.vx != v1.VXLANModeNever {
		return "vxlan" + string(e.vx)
	}
	return "ipip" + string(e.ipip)
}

// wantRoutes are the kernel's routes to the other nodes' prefixes under e, by destination, as
// kernelRoutes writes them, the first vteps nodes having their VTEP.
func wantRoutes(e encap, vteps int) map[string]string {
	out := map[string]string{}
	route := func(dst string, i int) {
		n := switchNodes[i]
		switch {
		case e.vx == v1.VXLANModeNever && (e.ipip == v1.IPIPModeAlways || !n.sameSubnet):
			out[dst] = "via " + n.underlay + " dev tunl0 onlink"
		// Without this node's VTEP or the other's (the passes between the pool's switch to
		// VXLAN and IPAM's VTEPs), a node in this node's subnet is still reached, natively;
		// one across subnets is not (see calc.LearnedRoute).
		case e.vx == v1.VXLANModeNever || n.sameSubnet && (e.vx == v1.VXLANModeCrossSubnet || i+1 >= vteps):
			out[dst] = "via " + n.underlay + " dev eth0"
		case i+1 < vteps:
			a, _ := switchVTEP(i + 1)
			out[dst] = "via " + a.String() + " dev vxlan.tabby onlink"
		}
	}
	for i, n := range switchNodes {
		route(n.block, i)
	}
	route(switchBorrowed+"/32", 3)
	return out
}

// wantEntries are vxlan.tabby's neighbour and FDB entries, as entryString writes them.
func wantEntries(e encap, vteps int) []string {
	if e.vx == v1.VXLANModeNever || vteps == 0 {
		return nil
	}
	var out []string
	for i, n := range switchNodes {
		if i+1 >= vteps {
			continue
		}
		a, mac := switchVTEP(i + 1)
		out = append(out, fmt.Sprintf("fdb %s dst %s", mac, n.underlay), fmt.Sprintf("neigh %s lladdr %s", a, mac))
	}
	slices.Sort(out)
	return out
}

func linkName(fk *nl.Fake, index int) string {
	links, _ := fk.LinkList()
	for _, l := range links {
		if l.Attrs().Index == index {
			return l.Attrs().Name
		}
	}
	return fmt.Sprintf("if%d", index)
}

// kernelRoutes are the fake kernel's routes to the other nodes' prefixes (this node's block
// and pods left out), by destination; a destination with two routes fails the test.
func kernelRoutes(t *testing.T, fk *nl.Fake) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range fk.Routes() {
		if r.Dst == nil || r.Dst.String() == "10.244.0.0/26" || r.Type == unix.RTN_BLACKHOLE {
			continue
		}
		dst := r.Dst.String()
		s := "via " + r.Gw.String() + " dev " + linkName(fk, r.LinkIndex)
		if r.Flags&unix.RTNH_F_ONLINK != 0 {
			s += " onlink"
		}
		if was, dup := out[dst]; dup {
			t.Fatalf("two routes to %s: %q and %q", dst, was, s)
		}
		out[dst] = s
	}
	return out
}

// kernelEntries are the neighbour and FDB entries on every link but the uplink.
func kernelEntries(t *testing.T, fk *nl.Fake) []string {
	t.Helper()
	ns, err := fk.NeighList(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range ns {
		if n.Family == unix.AF_BRIDGE {
			out = append(out, fmt.Sprintf("fdb %s dst %s", n.HardwareAddr, n.IP))
		} else {
			out = append(out, fmt.Sprintf("neigh %s lladdr %s", n.IP, n.HardwareAddr))
		}
	}
	slices.Sort(out)
	return out
}

// switchFelix is felix on a fake kernel that has the ipip module, the cluster in place under
// e, in sync.
func switchFelix(t *testing.T, e encap) (*Felix, *nl.Fake) {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	f, err := New(Config{NodeName: "n1", UplinkInterface: uplink("eth0"), ResyncInterval: time.Hour},
		WithNetlink(fk), WithCommandRunner(fakekernel.New()), WithSysctl(&fakeSysctl{set: map[string]string{}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vteps := 0
	if e.vx != v1.VXLANModeNever {
		vteps = allVTEPs
	}
	f.send(switchNodeUpdates(vteps)...)
	f.send(switchPool(e.ipip, e.vx))
	f.send(switchCluster()...)
	f.send(model.InSync{})
	f.mustApply(t)
	return f, fk
}

// routeWrites are the route writes (replace and delete) made so far.
func routeWrites(fk *nl.Fake) int { return fk.Calls("RouteReplace") + fk.Calls("RouteDel") }

// checkKernel compares the kernel's routes and entries with what e wants.
func checkKernel(t *testing.T, fk *nl.Fake, what string, e encap, vteps int) {
	t.Helper()
	got, want := kernelRoutes(t, fk), wantRoutes(e, vteps)
	var diff []string
	for dst, w := range want {
		if got[dst] != w {
			diff = append(diff, fmt.Sprintf("%s: got %q, want %q", dst, got[dst], w))
		}
	}
	for dst, g := range got {
		if _, ok := want[dst]; !ok {
			diff = append(diff, fmt.Sprintf("%s: stale %q", dst, g))
		}
	}
	slices.Sort(diff)
	if len(diff) > 0 {
		t.Errorf("%s: routes differ from %s's:\n%s", what, e, strings.Join(diff, "\n"))
	}
	if g, w := kernelEntries(t, fk), wantEntries(e, vteps); !slices.Equal(g, w) {
		t.Errorf("%s: VXLAN entries %q, want %q", what, g, w)
	}
	_, err := fk.LinkByName("vxlan.tabby")
	if hasDev, wantDev := err == nil, e.vx != v1.VXLANModeNever && vteps > 0; hasDev != wantDev {
		t.Errorf("%s: vxlan.tabby exists: %v, want %v", what, hasDev, wantDev)
	}
	if tunl, err := fk.LinkByName("tunl0"); err == nil {
		addrs, _ := fk.AddrList(tunl, unix.AF_INET)
		// This node holds an IPIP tunnel address until IPAM gives it a VTEP, and again once it
		// has released it.
		if wantAddr := e.vx == v1.VXLANModeNever && vteps == 0; (len(addrs) == 1) != wantAddr || len(addrs) > 1 {
			t.Errorf("%s: tunl0 addresses %v, want one: %v", what, addrs, wantAddr)
		}
	} else if e.vx == v1.VXLANModeNever {
		t.Errorf("%s: no tunl0", what)
	}
}

// changed counts the prefixes whose route differs between a and b: the writes a change needs.
func changed(a, b map[string]string) int {
	n := 0
	for dst, r := range a {
		if b[dst] != r {
			n++
		}
	}
	for dst := range b {
		if _, ok := a[dst]; !ok {
			n++
		}
	}
	return n
}

// TestPoolSwitchesBetweenIPIPAndVXLAN switches the pool from each IPIP mode to each VXLAN mode
// and back, the VTEPs coming (and going) in the pool's pass, all a pass later, or one node a
// pass (this node first), and looks at the kernel after every pass: every route to another
// node's prefix is the mode's, none is left on the old device, vxlan.tabby and its entries
// exist only under VXLAN, and a pass writes only the routes whose way changed.
func TestPoolSwitchesBetweenIPIPAndVXLAN(t *testing.T) {
	for _, from := range []v1.IPIPMode{v1.IPIPModeAlways, v1.IPIPModeCrossSubnet} {
		for _, to := range []v1.VXLANMode{v1.VXLANModeAlways, v1.VXLANModeCrossSubnet} {
			for _, order := range []string{"together", "vteps-later", "vteps-one-by-one"} {
				ipip, vx := encap{from, v1.VXLANModeNever}, encap{v1.IPIPModeNever, to}
				t.Run(fmt.Sprintf("%s-%s-%s", ipip, vx, order), func(t *testing.T) {
					f, fk := switchFelix(t, ipip)
					checkKernel(t, fk, "start", ipip, 0)
					step := func(what string, prev, cur encap, prevVTEPs, vteps int, msgs ...any) {
						t.Helper()
						before := routeWrites(fk)
						f.send(msgs...)
						f.mustApply(t)
						checkKernel(t, fk, what, cur, vteps)
						if got, want := routeWrites(fk)-before, changed(wantRoutes(prev, prevVTEPs), wantRoutes(cur, vteps)); got != want {
							t.Errorf("%s: %d route writes, want %d", what, got, want)
						}
					}
					switch order {
					case "together":
						step("pool to VXLAN", ipip, vx, 0, allVTEPs, append([]any{switchPool(vx.ipip, vx.vx)}, switchNodeUpdates(allVTEPs)...)...)
						step("pool back to IPIP", vx, ipip, allVTEPs, 0, append([]any{switchPool(ipip.ipip, ipip.vx)}, switchNodeUpdates(0)...)...)
						return
					case "vteps-later":
						step("pool to VXLAN", ipip, vx, 0, 0, switchPool(vx.ipip, vx.vx))
						step("VTEPs", vx, vx, 0, allVTEPs, switchNodeUpdates(allVTEPs)...)
					case "vteps-one-by-one":
						step("pool to VXLAN", ipip, vx, 0, 0, switchPool(vx.ipip, vx.vx))
						for k := 1; k <= allVTEPs; k++ {
							step(fmt.Sprintf("VTEP of node %d", k), vx, vx, k-1, k, switchNodeUpdate(k-1, true))
						}
					}
					step("pool back to IPIP", vx, ipip, allVTEPs, allVTEPs, switchPool(ipip.ipip, ipip.vx))
					step("VTEPs released", ipip, ipip, allVTEPs, 0, switchNodeUpdates(0)...)
				})
			}
		}
	}
}

// A write failing in the switch's pass leaves the old route where the new one failed, never a
// prefix without route, and the passes after it write only what failed (the route table tries a
// route that failed for good again a second later): then the kernel is the new mode's, with
// nothing of the old one left.
func TestPoolSwitchRetriesWhatFailed(t *testing.T) {
	ipip, vx := encap{v1.IPIPModeAlways, v1.VXLANModeNever}, encap{v1.IPIPModeNever, v1.VXLANModeAlways}
	f, fk := switchFelix(t, ipip)
	vtep4, _ := switchVTEP(3)
	fk.Fail(&nl.Failure{Op: "RouteReplace", Dst: "10.244.3.0/26", Err: unix.EINVAL, Times: 1})
	fk.Fail(&nl.Failure{Op: "NeighSet", Dst: vtep4.String(), Err: unix.EINVAL, Times: 1})
	f.send(append([]any{switchPool(vx.ipip, vx.vx)}, switchNodeUpdates(allVTEPs)...)...)
	if err := f.ApplyNow(context.Background()); err == nil {
		t.Fatal("the pass with failed writes reported no error")
	}
	if got, want := kernelRoutes(t, fk)["10.244.3.0/26"], wantRoutes(ipip, 0)["10.244.3.0/26"]; got != want {
		t.Errorf("after the failed replace: 10.244.3.0/26 %q, want the IPIP route kept, %q", got, want)
	}
	routes, neighs := routeWrites(fk), fk.Calls("NeighSet")
	testwait.Until(t, "the failed route written again", 10*time.Second, func() bool {
		if err := f.ApplyNow(context.Background()); err != nil {
			return false
		}
		return kernelRoutes(t, fk)["10.244.3.0/26"] == wantRoutes(vx, allVTEPs)["10.244.3.0/26"]
	})
	checkKernel(t, fk, "retried", vx, allVTEPs)
	if got := routeWrites(fk) - routes; got != 1 {
		t.Errorf("retries: %d route writes, want 1 (the failed one)", got)
	}
	if got := fk.Calls("NeighSet") - neighs; got != 1 {
		t.Errorf("retries: %d neighbour writes, want 1 (the failed one)", got)
	}
}
