package routetable

import (
	"net/netip"
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/nl"
)

// TestIPv6NativeToOnlinkInRealKernel: a CrossSubnet pool's block routed natively via its node's
// underlay address becomes, once the pool is Always, a route via the node's VTEP (an address of
// that very block) onlink on the VXLAN device, and back. The kernel refuses to replace the
// IPv6 route in place (the onlink gateway is covered by the route being replaced, on another
// device); the table still gets there, in both directions.
func TestIPv6NativeToOnlinkInRealKernel(t *testing.T) {
	h := realNS(t, "eth0", "vx0")
	eth0, _ := h.LinkByName("eth0")
	if err := h.AddrReplace(eth0, &netlink.Addr{IPNet: ipnet("2001:db8:100::12/64"), Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatal(err)
	}

	rt := New(h, Options{Protocol: proto})
	block := netip.MustParsePrefix("fd00:10:244::40/122")
	native := calc.Route{Dst: block, Kind: calc.KindRemote, Dev: "eth0", Gw: netip.MustParseAddr("2001:db8:100::11")}
	vxlan := calc.Route{Dst: block, Kind: calc.KindVXLAN, Dev: "vx0", Gw: netip.MustParseAddr("fd00:10:244::41"), OnLink: true}
	for i, want := range []calc.Route{native, vxlan, native, vxlan} {
		rt.SetRoute(ClassVXLAN, want)
		res, err := rt.Apply()
		if err != nil {
			t.Fatalf("step %d, %s: %v (%+v)", i, want, err, res.Failed)
		}
		var got []netlink.Route
		if err := h.RouteListFilteredIter(unix.AF_INET6, &netlink.Route{Protocol: proto}, netlink.RT_FILTER_PROTOCOL, func(r netlink.Route) bool {
			got = append(got, r)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		link, _ := h.LinkByName(want.Dev)
		if len(got) != 1 || got[0].LinkIndex != link.Attrs().Index || !got[0].Gw.Equal(want.Gw.AsSlice()) || (got[0].Flags&unix.RTNH_F_ONLINK != 0) != want.OnLink {
			t.Fatalf("step %d, want %s: the kernel has %v", i, want, got)
		}
	}
}

// realNS is a new network namespace with lo and the named veths up, and a netlink handle into
// it; the test is skipped without root, and the namespace goes with the test.
func realNS(t *testing.T, veths ...string) *nl.Real {
	t.Helper()
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root and a network namespace")
	}
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); _ = testutils.UnmountNS(n) })
	h, err := nl.NewReal(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	for _, name := range append([]string{"lo"}, veths...) {
		if name != "lo" {
			if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	return h
}
