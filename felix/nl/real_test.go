package nl

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestRealBatch writes a batch in a fresh namespace where one route is bad: each op gets its
// own answer and the bad one does not stop the others.
func TestRealBatch(t *testing.T) {
	h := newRealNS(t)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cali1"}, PeerName: "p1"}); err != nil {
		t.Fatal(err)
	}
	l, _ := h.LinkByName("cali1")
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	dst := func(s string) *net.IPNet { _, d, _ := net.ParseCIDR(s); return d }
	// An onlink gateway is checked against the local table, which a namespace has only once lo
	// is up: without it the kernel answers "Nexthop has invalid gateway".
	lo, _ := h.LinkByName("lo")
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	ops := []RouteOp{
		{Route: &netlink.Route{Dst: dst("10.244.0.1/32"), LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK, Protocol: 201}},
		{Route: &netlink.Route{Dst: dst("10.244.0.2/32"), LinkIndex: 9999, Scope: netlink.SCOPE_LINK, Protocol: 201}},
		{Route: &netlink.Route{Dst: dst("10.244.1.0/26"), Type: unix.RTN_BLACKHOLE, Protocol: 201}},
		{Route: &netlink.Route{Dst: dst("10.244.2.0/26"), Gw: net.ParseIP("198.51.100.12"), LinkIndex: l.Attrs().Index, Flags: int(netlink.FLAG_ONLINK), Protocol: 201}},
		{Del: true, Route: &netlink.Route{Dst: dst("10.244.3.0/26"), Protocol: 201}},
	}
	errs := h.RouteBatch(ops)
	if errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("good ops failed: %v", errs)
	}
	if !errors.Is(errs[1], unix.ENODEV) || !IsNotFound(errs[4]) {
		t.Fatalf("bad ops: %v", errs)
	}
	var got []netlink.Route
	if err := h.RouteListFilteredIter(unix.AF_INET, &netlink.Route{Protocol: 201}, netlink.RT_FILTER_PROTOCOL, func(r netlink.Route) bool {
		got = append(got, r)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("routes %v", got)
	}
	for _, r := range got {
		if r.Dst.String() == "10.244.2.0/26" && r.Flags&unix.RTNH_F_ONLINK == 0 {
			t.Fatalf("onlink flag lost: %+v", r)
		}
	}
	// Delete all three in one batch.
	for i := range ops {
		ops[i].Del = true
	}
	errs = h.RouteBatch([]RouteOp{ops[0], ops[2], ops[3]})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("delete: %v", errs)
		}
	}
}

// The batch encodes IPv6 routes as the kernel expects them (16-byte addresses, AF_INET6), and
// refuses a gateway of the other family before it reaches the kernel.
func TestRealBatchIPv6(t *testing.T) {
	h := newRealNS(t)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cali1"}, PeerName: "p1"}); err != nil {
		t.Fatal(err)
	}
	l, _ := h.LinkByName("cali1")
	for _, link := range []string{"cali1", "lo"} {
		ll, _ := h.LinkByName(link)
		if err := h.LinkSetUp(ll); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("2001:db8:100::11"), Mask: net.CIDRMask(64, 128)}, Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatal(err)
	}
	dst := func(s string) *net.IPNet { _, d, _ := net.ParseCIDR(s); return d }
	ops := []RouteOp{
		{Route: &netlink.Route{Dst: dst("fd00:10:244::5/128"), LinkIndex: l.Attrs().Index, Protocol: 201}},
		{Route: &netlink.Route{Dst: dst("fd00:10:244::/122"), Type: unix.RTN_BLACKHOLE, Protocol: 201}},
		{Route: &netlink.Route{Dst: dst("fd00:10:244::40/122"), Gw: net.ParseIP("2001:db8:100::12"), LinkIndex: l.Attrs().Index, Protocol: 201}},
		{Route: &netlink.Route{Dst: dst("fd00:10:244::80/122"), Gw: net.ParseIP("198.51.100.12"), LinkIndex: l.Attrs().Index, Protocol: 201}},
	}
	errs := h.RouteBatch(ops)
	if errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("good ops failed: %v", errs)
	}
	if errs[3] == nil || !strings.Contains(errs[3].Error(), "IPv4 gateway") {
		t.Fatalf("an IPv4 gateway for an IPv6 prefix: %v", errs[3])
	}
	var got []string
	if err := h.RouteListFilteredIter(unix.AF_INET6, &netlink.Route{Protocol: 201}, netlink.RT_FILTER_PROTOCOL, func(r netlink.Route) bool {
		got = append(got, r.Dst.String())
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("IPv6 routes %v, want 3", got)
	}
	for i := range ops[:3] {
		ops[i].Del = true
	}
	for _, err := range h.RouteBatch(ops[:3]) {
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
}

// A VXLAN device of each underlay family through the real handle: made with its VNI, port, local
// address, MAC and MTU and no learning, read back as made, its MAC and MTU changed; its
// neighbour and FDB entries set (twice: replacing is idempotent), listed per link and family,
// seen as events, deleted; its tx checksum offload read and turned off.
func TestRealVXLANDevices(t *testing.T) {
	for _, tc := range []struct {
		name, local, vtep, remote string
		family                    int
	}{
		{"vxlan.tabby", "198.51.100.11", "10.244.1.0", "198.51.100.12", unix.AF_INET},
		{"vxlan-v6.tabby", "2001:db8:100::11", "fd00:10:244::40", "2001:db8:100::12", unix.AF_INET6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRealNS(t)
			mac, _ := net.ParseMAC("66:1f:00:00:00:01")
			vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: tc.name, MTU: 1350, HardwareAddr: mac},
				VxlanId: 4096, Port: 4789, SrcAddr: net.ParseIP(tc.local), Learning: false}
			if err := h.LinkAdd(vx); err != nil {
				t.Fatal(err)
			}
			l := readVXLAN(t, h, tc.name)
			if l.VxlanId != 4096 || l.Port != 4789 || l.Learning || !l.SrcAddr.Equal(net.ParseIP(tc.local)) ||
				l.MTU != 1350 || l.HardwareAddr.String() != mac.String() {
				t.Fatalf("device read back as VNI %d port %d learning %v local %v MTU %d MAC %v",
					l.VxlanId, l.Port, l.Learning, l.SrcAddr, l.MTU, l.HardwareAddr)
			}
			mac2, _ := net.ParseMAC("66:1f:00:00:00:09")
			if err := h.LinkSetHardwareAddr(l, mac2); err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetMTU(l, 1330); err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
			if l = readVXLAN(t, h, tc.name); l.MTU != 1330 || l.HardwareAddr.String() != mac2.String() {
				t.Fatalf("after the change: MTU %d MAC %v", l.MTU, l.HardwareAddr)
			}

			done := make(chan struct{})
			defer close(done)
			events := make(chan netlink.NeighUpdate, 16)
			// Closing done breaks the subscription's socket on purpose: only an error before
			// that counts.
			onErr := func(err error) {
				select {
				case <-done:
				default:
					t.Errorf("subscription: %v", err)
				}
			}
			if err := h.SubscribeNeigh(done, events, onErr); err != nil {
				t.Fatal(err)
			}
			peer, _ := net.ParseMAC("66:1f:00:00:00:02")
			idx := l.Attrs().Index
			neigh := &netlink.Neigh{LinkIndex: idx, Family: tc.family, State: netlink.NUD_PERMANENT, IP: net.ParseIP(tc.vtep), HardwareAddr: peer}
			fdb := &netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF, State: netlink.NUD_PERMANENT, IP: net.ParseIP(tc.remote), HardwareAddr: peer}
			for _, e := range []*netlink.Neigh{neigh, neigh, fdb, fdb} {
				if err := h.NeighSet(e); err != nil {
					t.Fatalf("set %v: %v", e, err)
				}
			}
			ns, err := h.NeighList(idx, tc.family)
			if err != nil || len(ns) != 1 || !ns[0].IP.Equal(neigh.IP) || ns[0].State&netlink.NUD_PERMANENT == 0 || ns[0].HardwareAddr.String() != peer.String() {
				t.Fatalf("neighbours %v %v", ns, err)
			}
			fs, err := h.NeighList(idx, unix.AF_BRIDGE)
			if err != nil || len(fs) != 1 || !fs[0].IP.Equal(fdb.IP) || fs[0].HardwareAddr.String() != peer.String() || fs[0].State&netlink.NUD_PERMANENT == 0 {
				t.Fatalf("FDB %v %v", fs, err)
			}
			seen := map[int]bool{}
			for deadline := time.After(10 * time.Second); !seen[tc.family] || !seen[unix.AF_BRIDGE]; {
				select {
				case u := <-events:
					if u.LinkIndex == idx && u.Type == unix.RTM_NEWNEIGH {
						seen[u.Family] = true
					}
				case <-deadline:
					t.Fatalf("events of families %v, want the neighbour's and the FDB entry's", seen)
				}
			}
			for _, e := range []*netlink.Neigh{neigh, fdb} {
				if err := h.NeighDel(e); err != nil {
					t.Fatalf("delete %v: %v", e, err)
				}
				if err := h.NeighDel(e); !IsNotFound(err) {
					t.Fatalf("deleting again: %v, want not found", err)
				}
			}
			for _, fam := range []int{tc.family, unix.AF_BRIDGE} {
				if left, err := h.NeighList(idx, fam); err != nil || len(left) != 0 {
					t.Fatalf("after deleting, family %d: %v %v", fam, left, err)
				}
			}

			if on, err := h.TxChecksumOffload(tc.name); err != nil || !on {
				t.Fatalf("offload %v %v, want the kernel's default, on", on, err)
			}
			if err := h.SetTxChecksumOffload(tc.name, false); err != nil {
				t.Fatal(err)
			}
			if on, err := h.TxChecksumOffload(tc.name); err != nil || on {
				t.Fatalf("offload %v %v after turning it off", on, err)
			}
			if _, err := h.TxChecksumOffload("nosuchdev"); err == nil {
				t.Fatal("offload of a device that does not exist")
			}
			if err := h.LinkDel(l); err != nil {
				t.Fatal(err)
			}
			if _, err := h.LinkByName(tc.name); !IsNotFound(err) {
				t.Fatalf("after LinkDel: %v, want not found", err)
			}
		})
	}
}

// The handle's ethtool calls act on its namespace only: a device of the same name in the test's
// own namespace would answer otherwise, and none exists there.
func TestRealOffloadStaysInNamespace(t *testing.T) {
	h := newRealNS(t)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "tabbyoffl0"}, PeerName: "tabbyoffl1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.TxChecksumOffload("tabbyoffl0"); err != nil {
		t.Fatalf("inside the handle's namespace: %v", err)
	}
	if _, err := netlink.LinkByName("tabbyoffl0"); err == nil {
		t.Fatal("the device is in the test's own namespace")
	}
}

// newRealNS is a real handle on a fresh namespace, both gone when the test ends.
func newRealNS(t *testing.T) *Real {
	t.Helper()
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root and a network namespace")
	}
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); _ = testutils.UnmountNS(n) })
	h, err := NewReal(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func readVXLAN(t *testing.T, h *Real, name string) *netlink.Vxlan {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	vx, ok := l.(*netlink.Vxlan)
	if !ok {
		t.Fatalf("%s read back as %T", name, l)
	}
	return vx
}
