package nl

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestRealBatch writes a batch in a fresh namespace where one route is bad: each op gets its
// own answer and the bad one does not stop the others.
func TestRealBatch(t *testing.T) {
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
	defer h.Close()
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
	defer h.Close()
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
