package felix_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/vxlan"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/internal/testwait"
)

// vxNode is one node of the VXLAN lab: its namespace, a pod behind a cali veth, its VTEPs and
// blocks, and its felix.
type vxNode struct {
	name           string
	ns, pod        *netNS
	bgp4, bgp6     string // underlay address with its subnet
	vtep4, vtep6   string
	mac            byte // the VTEPs' MACs end in mac,4 and mac,6
	block4, block6 string
	pod4, pod6     string
	veth           string
	f              *felix.Felix
	stop           func()
}

func (n *vxNode) model() model.Node {
	m := model.Node{Name: n.name}
	m.BGPAddress = ipfamily.PairOf(netip.MustParsePrefix(n.bgp4), netip.MustParsePrefix(n.bgp6))
	m.VXLANTunnelAddr = ipfamily.PairOf(netip.MustParseAddr(n.vtep4), netip.MustParseAddr(n.vtep6))
	m.VXLANMAC = ipfamily.PairOf(model.MAC{0x66, 0x1f, 0, 0, n.mac, 4}, model.MAC{0x66, 0x1f, 0, 0, n.mac, 6})
	return m
}

func (n *vxNode) macOf(fam ipfamily.Family) string { return n.model().VXLANMAC.Get(fam).String() }

func (n *vxNode) addr(fam ipfamily.Family) string {
	return netip.MustParsePrefix(map[ipfamily.Family]string{ipfamily.IPv4: n.bgp4, ipfamily.IPv6: n.bgp6}[fam]).Addr().String()
}

// vxLab is three nodes: a and b on one subnet behind a bridge (198.51.100.0/24,
// 2001:db8:100::/64), c on another (203.0.113.0/24, 2001:db8:203::/64), a router between.
type vxLab struct {
	router  *netNS
	a, b, c *vxNode
}

func addAddr6(t *testing.T, n *netNS, dev, cidr string) {
	t.Helper()
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	a.Flags |= unix.IFA_F_NODAD
	if err := n.h.AddrAdd(n.link(t, dev), a); err != nil {
		t.Fatalf("addr %s on %s: %v", cidr, dev, err)
	}
}

func newVXLab(t *testing.T) *vxLab {
	l := &vxLab{router: newNetNS(t)}
	r := l.router
	if err := r.h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0", MTU: 1400}}); err != nil {
		t.Fatal(err)
	}
	br := r.link(t, "br0")
	if err := r.h.AddrAdd(br, &netlink.Addr{IPNet: mustNet6("198.51.100.1/24")}); err != nil {
		t.Fatal(err)
	}
	addAddr6(t, r, "br0", "2001:db8:100::1/64")
	if err := r.h.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	r.writeSysctl(t, "net.ipv4.ip_forward", "1")
	r.writeSysctl(t, "net.ipv6.conf.all.forwarding", "1")

	l.a = &vxNode{name: "node-a", bgp4: "198.51.100.11/24", bgp6: "2001:db8:100::11/64", vtep4: "10.244.0.0", vtep6: "fd00:10:244::",
		mac: 0xa, block4: "10.244.0.0/26", block6: "fd00:10:244::/122", pod4: "10.244.0.5", pod6: "fd00:10:244::5"}
	l.b = &vxNode{name: "node-b", bgp4: "198.51.100.12/24", bgp6: "2001:db8:100::12/64", vtep4: "10.244.1.0", vtep6: "fd00:10:244::40",
		mac: 0xb, block4: "10.244.1.0/26", block6: "fd00:10:244::40/122", pod4: "10.244.1.5", pod6: "fd00:10:244::45"}
	l.c = &vxNode{name: "node-c", bgp4: "203.0.113.13/24", bgp6: "2001:db8:203::13/64", vtep4: "10.244.2.0", vtep6: "fd00:10:244::80",
		mac: 0xc, block4: "10.244.2.0/26", block6: "fd00:10:244::80/122", pod4: "10.244.2.5", pod6: "fd00:10:244::85"}
	for i, n := range []*vxNode{l.a, l.b, l.c} {
		n.ns, n.pod = newNetNS(t), newNetNS(t)
		gw4, gw6 := "198.51.100.1", "2001:db8:100::1"
		if n == l.c {
			veth(t, r, "down1", "203.0.113.1/24", n.ns, "up0", n.bgp4)
			addAddr6(t, r, "down1", "2001:db8:203::1/64")
			gw4, gw6 = "203.0.113.1", "2001:db8:203::1"
		} else {
			port := fmt.Sprintf("port%d", i)
			veth(t, r, port, "", n.ns, "up0", n.bgp4)
			if err := r.h.LinkSetMaster(r.link(t, port), br); err != nil {
				t.Fatal(err)
			}
		}
		addAddr6(t, n.ns, "up0", n.bgp6)
		up0 := n.ns.link(t, "up0").Attrs().Index
		n.ns.addRoute(t, &netlink.Route{Gw: net.ParseIP(gw4), LinkIndex: up0, Protocol: unix.RTPROT_STATIC})
		n.ns.addRoute(t, &netlink.Route{Dst: mustNet6("::/0"), Gw: net.ParseIP(gw6), LinkIndex: up0, Protocol: unix.RTPROT_STATIC})

		// The pod, wired as the CNI plugin does for both families, its MTU the VXLAN device's
		// over an IPv6 underlay (the smaller).
		n.veth = fmt.Sprintf("cali%011x", 0xa0+i)
		veth(t, n.pod, "eth0", n.pod4+"/32", n.ns, n.veth, "")
		addAddr6(t, n.pod, "eth0", n.pod6+"/128")
		addAddr6(t, n.ns, n.veth, gateway6+"/64")
		for _, side := range []struct {
			ns  *netNS
			dev string
		}{{n.pod, "eth0"}, {n.ns, n.veth}} {
			if err := side.ns.h.LinkSetMTU(side.ns.link(t, side.dev), 1400-vxlan.Overhead(ipfamily.IPv6)); err != nil {
				t.Fatal(err)
			}
		}
		pe := n.pod.link(t, "eth0").Attrs().Index
		n.pod.addRoute(t, &netlink.Route{Dst: mustNet("169.254.1.1/32"), LinkIndex: pe, Scope: netlink.SCOPE_LINK})
		n.pod.addRoute(t, &netlink.Route{Gw: net.ParseIP("169.254.1.1"), LinkIndex: pe})
		n.pod.addRoute(t, &netlink.Route{Dst: mustNet6("::/0"), Gw: net.ParseIP(gateway6), LinkIndex: pe})
	}
	return l
}

func (l *vxLab) nodes() []*vxNode { return []*vxNode{l.a, l.b, l.c} }

// messages are what the syncer sends every node's felix: the nodes, the pools, the blocks and,
// for n, its pod.
func (l *vxLab) messages(n *vxNode, mode v1.VXLANMode) []any {
	msgs := []any{
		model.PoolUpdate{Pool: model.Pool{Name: "vx4", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever, VXLANMode: mode}},
		model.PoolUpdate{Pool: model.Pool{Name: "vx6", CIDR: netip.MustParsePrefix("fd00:10:244::/48"), IPIPMode: v1.IPIPModeNever, VXLANMode: mode}},
	}
	for _, o := range l.nodes() {
		msgs = append(msgs, model.NodeUpdate{Node: o.model()},
			model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix(o.block4), Node: o.name}},
			model.BlockUpdate{Block: model.Block{CIDR: netip.MustParsePrefix(o.block6), Node: o.name}})
	}
	return append(msgs, workload(n.veth, n.pod4, n.pod6), model.InSync{})
}

// start runs n's felix on its namespace.
func (n *vxNode) start(t *testing.T, cfg felix.Config, opts ...felix.Option) {
	cfg.NodeName, cfg.UplinkInterface, cfg.NetNSPath = n.name, ipfamily.PairOf("up0", "up0"), n.ns.Path()
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = time.Hour
	}
	f, err := felix.New(cfg, opts...)
	if err != nil {
		t.Fatalf("felix.New: %v", err)
	}
	n.f = f
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	stopped := false
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("felix.Run on %s: %v", n.name, err)
		}
		f.Close()
	}
	t.Cleanup(n.stop)
}

// ping tells whether from reaches addr (one echo, a second to answer).
func ping(from *netNS, addr string) bool {
	var err error
	_ = from.Do(func(ns.NetNS) error {
		err = exec.Command("ping", "-n", "-c1", "-W1", addr).Run()
		return nil
	})
	return err == nil
}

// pingAll waits until every pod reaches every other, over both families.
func (l *vxLab) pingAll(t *testing.T, what string) {
	t.Helper()
	for _, from := range l.nodes() {
		for _, to := range l.nodes() {
			if from == to {
				continue
			}
			for _, dst := range []string{to.pod4, to.pod6} {
				testwait.Until(t, fmt.Sprintf("%s: pod on %s reaches %s on %s", what, from.name, dst, to.name), 15*time.Second,
					func() bool { return ping(from.pod, dst) })
			}
		}
	}
}

// has waits until the command's output inside n contains every line of want.
func has(t *testing.T, n *netNS, want []string, cmd ...string) {
	t.Helper()
	var out []byte
	testwait.Until(t, fmt.Sprintf("%q shows %q", strings.Join(cmd, " "), want), 10*time.Second, func() bool {
		_ = n.Do(func(ns.NetNS) error {
			out, _ = exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
			return nil
		})
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				return false
			}
		}
		return true
	})
}

// Three nodes, VXLAN over IPv4 and IPv6 underlays: felix makes the devices, neighbours, FDB
// entries and routes from the model's messages alone, the pods reach each other, and what
// someone deletes comes back.
func TestVXLANInNetns(t *testing.T) {
	requireRoot(t)
	l := newVXLab(t)
	a, b, c := l.a, l.b, l.c
	// What is not tabby's: a neighbour and an FDB entry on the uplink, and another protocol's
	// routes, one of them inside the pool.
	foreign := [][]string{
		{"ip", "neigh", "replace", "198.51.100.99", "lladdr", "02:00:00:00:00:99", "dev", "up0", "nud", "permanent"},
		{"ip", "-6", "neigh", "replace", "2001:db8:100::99", "lladdr", "02:00:00:00:00:99", "dev", "up0", "nud", "permanent"},
		{"bridge", "fdb", "replace", "02:00:00:00:00:98", "dev", "up0", "self", "permanent"},
		{"ip", "route", "replace", "10.244.200.0/24", "via", "198.51.100.1", "dev", "up0", "proto", "static"},
		{"ip", "-6", "route", "replace", "fd00:10:244:200::/64", "via", "2001:db8:100::1", "dev", "up0", "proto", "static"},
	}
	for _, cmd := range foreign {
		a.ns.exec(t, cmd[0], cmd[1:]...)
	}
	for _, n := range l.nodes() {
		n.start(t, felix.Config{})
		send(n.f, l.messages(n, v1.VXLANModeAlways)...)
	}
	l.pingAll(t, "VXLAN always")

	t.Run("kernel objects", func(t *testing.T) {
		has(t, a.ns, []string{"vxlan id 4096", "local 198.51.100.11", "dstport 4789", "nolearning", "mtu 1350", "link/ether " + a.macOf(ipfamily.IPv4), "UP"},
			"ip", "-d", "link", "show", "vxlan.tabby")
		has(t, a.ns, []string{"vxlan id 4096", "local 2001:db8:100::11", "dstport 4789", "nolearning", "mtu 1330", "link/ether " + a.macOf(ipfamily.IPv6)},
			"ip", "-d", "link", "show", "vxlan-v6.tabby")
		has(t, a.ns, []string{"inet 10.244.0.0/32"}, "ip", "addr", "show", "vxlan.tabby")
		has(t, a.ns, []string{"inet6 fd00:10:244::/128"}, "ip", "addr", "show", "vxlan-v6.tabby")
		for _, o := range []*vxNode{b, c} {
			has(t, a.ns, []string{o.vtep4 + " lladdr " + o.macOf(ipfamily.IPv4) + " PERMANENT"}, "ip", "neigh", "show", "dev", "vxlan.tabby")
			has(t, a.ns, []string{o.vtep6 + " lladdr " + o.macOf(ipfamily.IPv6) + " PERMANENT"}, "ip", "-6", "neigh", "show", "dev", "vxlan-v6.tabby")
			has(t, a.ns, []string{o.macOf(ipfamily.IPv4) + " dst " + o.addr(ipfamily.IPv4) + " self permanent"}, "bridge", "fdb", "show", "dev", "vxlan.tabby")
			has(t, a.ns, []string{o.macOf(ipfamily.IPv6) + " dst " + o.addr(ipfamily.IPv6) + " self permanent"}, "bridge", "fdb", "show", "dev", "vxlan-v6.tabby")
			has(t, a.ns, []string{o.block4 + " via " + o.vtep4 + " dev vxlan.tabby proto 201 onlink"}, "ip", "route", "show", o.block4)
			has(t, a.ns, []string{o.block6 + " via " + o.vtep6 + " dev vxlan-v6.tabby proto 201", "onlink"}, "ip", "-6", "route", "show", o.block6)
		}
		if body := scrape(t, a.f); !strings.Contains(body, `tabby_felix_vxlan_peers{family="IPv4"} 2`) ||
			!strings.Contains(body, `tabby_felix_vxlan_peers{family="IPv6"} 2`) || !strings.Contains(body, `tabby_felix_routes_programmed{kind="vxlan"} 4`) {
			t.Errorf("metrics:\n%s", grepLines(body, "vxlan"))
		}
	})

	// The devices' MTUs leave room for the encapsulation over the 1,400-byte underlay: a DF
	// packet of exactly the device's (and the pod's) MTU crosses the router to node-c, one byte
	// more is refused where it starts.
	t.Run("DF pings at the MTU's edge", func(t *testing.T) {
		for _, tc := range []struct {
			what     string
			from     *netNS
			dst      string
			mtu, hdr int
		}{
			{"pod to pod, IPv4", a.pod, c.pod4, 1330, 28},
			{"pod to pod, IPv6", a.pod, c.pod6, 1330, 48},
			{"node to VTEP over vxlan.tabby", a.ns, c.vtep4, 1350, 28},
			{"node to VTEP over vxlan-v6.tabby", a.ns, c.vtep6, 1330, 48},
		} {
			size := tc.mtu - tc.hdr
			if out, err := pingDF(tc.from, tc.dst, size, 5); err != nil {
				t.Errorf("%s: %d bytes with DF: %v\n%s", tc.what, tc.mtu, err, out)
			}
			if out, err := pingDF(tc.from, tc.dst, size+1, 1); err == nil || !strings.Contains(strings.ToLower(out), "message too long") {
				t.Errorf("%s: %d bytes with DF: %v, want \"message too long\"\n%s", tc.what, tc.mtu+1, err, out)
			}
		}
	})

	t.Run("TCP with checksums verified", func(t *testing.T) {
		for _, fam := range ipfamily.All {
			tcpTransfer(t, a.pod, c.pod, map[ipfamily.Family]string{ipfamily.IPv4: c.pod4, ipfamily.IPv6: c.pod6}[fam])
		}
		for _, n := range []*netNS{a.pod, c.pod, a.ns, c.ns} {
			if errs := csumErrors(t, n); errs != 0 {
				t.Errorf("%d checksum errors", errs)
			}
		}
	})

	t.Run("drift repaired", func(t *testing.T) {
		a.ns.exec(t, "bridge", "fdb", "del", b.macOf(ipfamily.IPv4), "dev", "vxlan.tabby", "dst", b.addr(ipfamily.IPv4))
		a.ns.exec(t, "ip", "neigh", "del", c.vtep6, "dev", "vxlan-v6.tabby")
		has(t, a.ns, []string{b.macOf(ipfamily.IPv4) + " dst " + b.addr(ipfamily.IPv4) + " self permanent"}, "bridge", "fdb", "show", "dev", "vxlan.tabby")
		has(t, a.ns, []string{c.vtep6 + " lladdr " + c.macOf(ipfamily.IPv6) + " PERMANENT"}, "ip", "-6", "neigh", "show", "dev", "vxlan-v6.tabby")
		a.ns.exec(t, "ip", "-6", "route", "del", c.block6)
		has(t, a.ns, []string{c.block6 + " via " + c.vtep6 + " dev vxlan-v6.tabby proto 201", "onlink"}, "ip", "-6", "route", "show", c.block6)
		a.ns.exec(t, "ip", "link", "del", "vxlan.tabby")
		has(t, a.ns, []string{c.vtep4 + " lladdr " + c.macOf(ipfamily.IPv4) + " PERMANENT"}, "ip", "neigh", "show", "dev", "vxlan.tabby")
		has(t, a.ns, []string{c.block4 + " via " + c.vtep4 + " dev vxlan.tabby proto 201 onlink"}, "ip", "route", "show", c.block4)
		l.pingAll(t, "after the device was deleted")
	})

	t.Run("CrossSubnet", func(t *testing.T) {
		for _, n := range l.nodes() {
			send(n.f, l.messages(n, v1.VXLANModeCrossSubnet)...)
		}
		has(t, a.ns, []string{b.block4 + " via " + b.addr(ipfamily.IPv4) + " dev up0 proto 201"}, "ip", "route", "show", b.block4)
		has(t, a.ns, []string{b.block6 + " via " + b.addr(ipfamily.IPv6) + " dev up0 proto 201"}, "ip", "-6", "route", "show", b.block6)
		has(t, a.ns, []string{c.block4 + " via " + c.vtep4 + " dev vxlan.tabby proto 201 onlink"}, "ip", "route", "show", c.block4)
		l.pingAll(t, "VXLAN cross-subnet")
	})

	t.Run("a node leaves", func(t *testing.T) {
		for _, n := range []*vxNode{a, b} {
			send(n.f, model.NodeRemove{Name: c.name}, model.BlockRemove{CIDR: netip.MustParsePrefix(c.block4)}, model.BlockRemove{CIDR: netip.MustParsePrefix(c.block6)})
		}
		for _, n := range []*vxNode{a, b} {
			testwait.Until(t, "node-c's entries and routes gone on "+n.name, 10*time.Second, func() bool {
				kernel := n.ns.exec(t, "ip", "neigh", "show", "dev", "vxlan.tabby") + n.ns.exec(t, "ip", "-6", "neigh", "show", "dev", "vxlan-v6.tabby") +
					n.ns.exec(t, "bridge", "fdb", "show", "dev", "vxlan.tabby") + n.ns.exec(t, "bridge", "fdb", "show", "dev", "vxlan-v6.tabby") +
					n.ns.exec(t, "ip", "route") + n.ns.exec(t, "ip", "-6", "route")
				for _, gone := range []string{c.vtep4, c.vtep6 + " ", c.macOf(ipfamily.IPv4), c.macOf(ipfamily.IPv6), c.block4, c.block6} {
					if strings.Contains(kernel, gone) {
						return false
					}
				}
				return true
			})
		}
		has(t, a.ns, []string{b.macOf(ipfamily.IPv6) + " dst " + b.addr(ipfamily.IPv6) + " self permanent"}, "bridge", "fdb", "show", "dev", "vxlan-v6.tabby")
		has(t, b.ns, []string{a.vtep4 + " lladdr " + a.macOf(ipfamily.IPv4) + " PERMANENT"}, "ip", "neigh", "show", "dev", "vxlan.tabby")
		if !ping(a.pod, b.pod4) || !ping(b.pod, a.pod6) {
			t.Fatal("node-a and node-b lost each other's pods")
		}
	})

	t.Run("restart writes nothing", func(t *testing.T) {
		a.stop()
		h, err := nl.NewReal(a.ns.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		w := &countingHandle{Handle: h}
		f, err := felix.New(felix.Config{NodeName: a.name, UplinkInterface: ipfamily.PairOf("up0", "up0"), NetNSPath: a.ns.Path(),
			ResyncInterval: time.Hour, WaitForInSync: true}, felix.WithNetlink(w))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		msgs := l.messages(a, v1.VXLANModeCrossSubnet)
		send(f, append(msgs[:len(msgs)-1], model.NodeRemove{Name: c.name}, model.BlockRemove{CIDR: netip.MustParsePrefix(c.block4)},
			model.BlockRemove{CIDR: netip.MustParsePrefix(c.block6)}, model.InSync{})...)
		if err := f.ApplyNow(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := w.writes.Load(); n != 0 {
			t.Fatalf("a restart on an unchanged kernel wrote %d times: %s", n, w.what())
		}
		if !ping(a.pod, b.pod6) {
			t.Fatal("node-a's pod lost node-b's")
		}
	})

	t.Run("what is not tabby's left alone", func(t *testing.T) {
		want := map[string][]string{
			"ip neigh show dev up0":         {"198.51.100.99 lladdr 02:00:00:00:00:99 PERMANENT"},
			"ip -6 neigh show dev up0":      {"2001:db8:100::99 lladdr 02:00:00:00:00:99 PERMANENT"},
			"bridge fdb show dev up0":       {"02:00:00:00:00:98 self permanent"},
			"ip route show proto static":    {"10.244.200.0/24 via 198.51.100.1 dev up0"},
			"ip -6 route show proto static": {"fd00:10:244:200::/64 via 2001:db8:100::1 dev up0"},
		}
		for cmd, lines := range want {
			out := a.ns.exec(t, strings.Fields(cmd)[0], strings.Fields(cmd)[1:]...)
			for _, line := range lines {
				if !strings.Contains(out, line) {
					t.Errorf("%s lost %q:\n%s", cmd, line, out)
				}
			}
		}
	})
}

// pingDF sends one echo of size payload bytes with DF set (IPv6 never fragments on the way),
// waiting up to wait seconds for the answer (ping reports a refused send when that ends), and
// returns ping's output.
func pingDF(from *netNS, addr string, size, wait int) (string, error) {
	var out []byte
	var err error
	_ = from.Do(func(ns.NetNS) error {
		out, err = exec.Command("ping", "-n", "-c1", "-W", strconv.Itoa(wait), "-M", "do", "-s", strconv.Itoa(size), addr).CombinedOutput()
		return nil
	})
	return string(out), err
}

// With tx checksum offload off (as Calico and flannel set it on old kernels), traffic flows and
// every checksum checks out.
func TestVXLANChecksumOffloadOffInNetns(t *testing.T) {
	requireRoot(t)
	l := newVXLab(t)
	for _, n := range []*vxNode{l.a, l.c} {
		n.start(t, felix.Config{VXLANChecksumOffload: vxlan.ChecksumOffloadOff})
		send(n.f, l.messages(n, v1.VXLANModeAlways)...)
	}
	h, err := nl.NewReal(l.a.ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, dev := range []string{"vxlan.tabby", "vxlan-v6.tabby"} {
		testwait.Until(t, dev+" with offload off", 10*time.Second, func() bool {
			on, err := h.TxChecksumOffload(dev)
			return err == nil && !on
		})
	}
	for _, dst := range []string{l.c.pod4, l.c.pod6} {
		testwait.Until(t, "the pods reach each other", 15*time.Second, func() bool { return ping(l.a.pod, dst) })
		tcpTransfer(t, l.a.pod, l.c.pod, dst)
	}
	for _, n := range []*netNS{l.a.pod, l.c.pod, l.a.ns, l.c.ns} {
		if errs := csumErrors(t, n); errs != 0 {
			t.Errorf("%d checksum errors", errs)
		}
	}
}

// tcpTransfer sends 4 MiB from a pod to a listener in another and checks they arrived whole.
func tcpTransfer(t *testing.T, from, to *netNS, dst string) {
	t.Helper()
	var ln net.Listener
	err := to.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(dst, "0"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		n   int64
		sum [32]byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		h := sha256.New()
		n, err := io.Copy(h, c)
		var r result
		r.n, r.err = n, err
		copy(r.sum[:], h.Sum(nil))
		got <- r
	}()
	payload := bytes.Repeat([]byte("tabby vxlan checksum "), 4<<20/21)
	err = from.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, err = c.Write(payload)
		return err
	})
	if err != nil {
		t.Fatalf("send to %s: %v", dst, err)
	}
	r := <-got
	if r.err != nil || r.n != int64(len(payload)) || r.sum != sha256.Sum256(payload) {
		t.Fatalf("to %s: %d of %d bytes arrived (%v), checksum ok %v", dst, r.n, len(payload), r.err, r.sum == sha256.Sum256(payload))
	}
}

// csumErrors is the namespace's count of TCP and UDP segments dropped for a bad checksum, both
// families (/proc/net/snmp and snmp6, read from a thread inside it).
func csumErrors(t *testing.T, n *netNS) int {
	t.Helper()
	total := 0
	err := n.Do(func(ns.NetNS) error {
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		var header []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 || (f[0] != "Tcp:" && f[0] != "Udp:") {
				continue
			}
			if header == nil || header[0] != f[0] {
				header = f
				continue
			}
			for i, name := range header {
				if name == "InCsumErrors" && i < len(f) {
					v, _ := strconv.Atoi(f[i])
					total += v
				}
			}
			header = nil
		}
		b6, err := os.ReadFile("/proc/thread-self/net/snmp6")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b6), "\n") {
			if f := strings.Fields(line); len(f) == 2 && strings.HasSuffix(f[0], "InCsumErrors") {
				v, _ := strconv.Atoi(f[1])
				total += v
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// countingHandle counts the writes felix makes through it.
type countingHandle struct {
	nl.Handle
	writes atomic.Int64
	ops    []string
}

func (c *countingHandle) count(op string, n int) {
	c.writes.Add(int64(n))
	if n > 0 {
		c.ops = append(c.ops, op)
	}
}

func (c *countingHandle) what() string { return strings.Join(c.ops, ", ") }

func (c *countingHandle) RouteBatch(ops []nl.RouteOp) []error {
	c.count("RouteBatch", len(ops))
	return c.Handle.RouteBatch(ops)
}
func (c *countingHandle) LinkAdd(l netlink.Link) error {
	c.count("LinkAdd", 1)
	return c.Handle.LinkAdd(l)
}
func (c *countingHandle) LinkDel(l netlink.Link) error {
	c.count("LinkDel", 1)
	return c.Handle.LinkDel(l)
}
func (c *countingHandle) LinkSetUp(l netlink.Link) error {
	c.count("LinkSetUp", 1)
	return c.Handle.LinkSetUp(l)
}
func (c *countingHandle) LinkSetMTU(l netlink.Link, mtu int) error {
	c.count("LinkSetMTU", 1)
	return c.Handle.LinkSetMTU(l, mtu)
}
func (c *countingHandle) LinkSetHardwareAddr(l netlink.Link, hw net.HardwareAddr) error {
	c.count("LinkSetHardwareAddr", 1)
	return c.Handle.LinkSetHardwareAddr(l, hw)
}
func (c *countingHandle) AddrReplace(l netlink.Link, a *netlink.Addr) error {
	c.count("AddrReplace", 1)
	return c.Handle.AddrReplace(l, a)
}
func (c *countingHandle) AddrDel(l netlink.Link, a *netlink.Addr) error {
	c.count("AddrDel", 1)
	return c.Handle.AddrDel(l, a)
}
func (c *countingHandle) NeighSet(n *netlink.Neigh) error {
	c.count("NeighSet", 1)
	return c.Handle.NeighSet(n)
}
func (c *countingHandle) NeighDel(n *netlink.Neigh) error {
	c.count("NeighDel", 1)
	return c.Handle.NeighDel(n)
}
func (c *countingHandle) SetTxChecksumOffload(name string, on bool) error {
	c.count("SetTxChecksumOffload", 1)
	return c.Handle.SetTxChecksumOffload(name, on)
}
