package autodetect

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func TestMain(m *testing.M) { netnstest.Main(m) }

func TestParse(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{"", ""}, {"kubernetes-internal-ip", ""}, {"cidr=198.51.100.0/24", ""}, {"cidr=198.51.100.0/24, 203.0.113.0/24", ""},
		{"interface=eth.*", ""}, {"can-reach=203.0.113.1", ""}, {"none", ""},
		{"cidr=nope", `"nope" is not an IPv4 CIDR`}, {"interface=(", "error parsing regexp"},
		{"can-reach=x", `"x" is not an IPv4 address`}, {"cidr=2001:db8:100::/64", `is not an IPv4 CIDR`}, {"first-found", "want kubernetes-internal-ip"}, {"bogus=1", `unknown kind "bogus"`},
	} {
		_, err := Parse(c.in)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Parse(%q) = %v, want error containing %q", c.in, err, c.err)
		}
	}
}

// veth adds a veth pair inside the test namespace, with addresses on the first end.
func veth(t *testing.T, name string, addrs ...string) {
	t.Helper()
	la := netlink.NewLinkAttrs()
	la.Name = name
	v := &netlink.Veth{LinkAttrs: la, PeerName: name + "p"}
	if err := netlink.LinkAdd(v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(v) })
	for _, a := range addrs {
		addr, _ := netlink.ParseAddr(a)
		if addr.IP.To4() == nil {
			addr.Flags |= unix.IFA_F_NODAD
		}
		if strings.HasPrefix(name, "deprecated") {
			addr.PreferedLft, addr.ValidLft = 0, 3600 // deprecated at once: kept, never chosen
		}
		if err := netlink.AddrAdd(v, addr); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{name, name + "p"} {
		l, _ := netlink.LinkByName(n)
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDetect(t *testing.T) {
	netnstest.Require(t)
	veth(t, "uplink0", "198.51.100.11/24")
	veth(t, "storage0", "203.0.113.5/28")
	veth(t, "multi0", "203.0.113.65/27", "203.0.113.97/27")
	// A route via storage0 for can-reach.
	l, _ := netlink.LinkByName("storage0")
	_, dst, _ := net.ParseCIDR("203.0.113.128/25")
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP("203.0.113.1")}); err != nil {
		t.Fatal(err)
	}
	nodeIP := netip.MustParseAddr("198.51.100.11")
	for _, c := range []struct{ method, want, err string }{
		{"", "198.51.100.11/24", ""},
		{"cidr=198.51.100.0/24", "198.51.100.11/24", ""},
		{"cidr=10.0.0.0/8", "", "no interface address matches; candidates: 198.51.100.11/24 on uplink0"},
		{"cidr=203.0.113.0/24", "", "ambiguous, 3 addresses match: 203.0.113.5/28 on storage0, 203.0.113.65/27 on multi0, 203.0.113.97/27 on multi0"},
		{"interface=^uplink", "198.51.100.11/24", ""},
		{"interface=^multi", "", "ambiguous, 2 addresses match"},
		{"can-reach=203.0.113.200", "203.0.113.5/28", ""},
		{"can-reach=198.51.100.99", "198.51.100.11/24", ""},
	} {
		m, err := Parse(c.method)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Detect(m, nodeIP)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %v, %v; want error containing %q", c.method, got, err, c.err)
			}
			continue
		}
		if err != nil || got.String() != c.want {
			t.Errorf("%q: got %v, %v; want %s", c.method, got, err, c.want)
		}
	}
	if _, err := Detect(Method{Kind: KubernetesInternalIP}, netip.Addr{}); err == nil || !strings.Contains(err.Error(), "no IPv4 InternalIP") {
		t.Errorf("no InternalIP: %v", err)
	}
}

func TestParseIPv6(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{"", ""}, {"none", ""}, {"cidr=2001:db8:100::/64", ""}, {"can-reach=2001:db8:203::1", ""}, {"interface=eth.*", ""},
		{"cidr=198.51.100.0/24", `"198.51.100.0/24" is not an IPv6 CIDR`},
		{"cidr=::ffff:198.51.100.0/120", "is not an IPv6 CIDR"},
		{"can-reach=203.0.113.1", `"203.0.113.1" is not an IPv6 address`},
	} {
		_, err := ParseFamily(ipfamily.IPv6, c.in)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseFamily(IPv6, %q) = %v, want error containing %q", c.in, err, c.err)
		}
	}
}

// IPv6 detection finds global, preferred addresses only: never a link-local, never a deprecated
// (or tentative) one, which the kernel would not choose as a source either.
func TestDetectIPv6(t *testing.T) {
	netnstest.Require(t)
	veth(t, "uplink6", "198.51.100.11/24", "2001:db8:100::11/64")
	veth(t, "deprecated6", "2001:db8:101::11/64")
	veth(t, "other6", "2001:db8:200::5/64")
	l, _ := netlink.LinkByName("other6")
	_, dst, _ := net.ParseCIDR("2001:db8:203::/48")
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP("2001:db8:200::1")}); err != nil {
		t.Fatal(err)
	}
	nodeIP := netip.MustParseAddr("2001:db8:100::11")
	for _, c := range []struct{ method, want, err string }{
		{"", "2001:db8:100::11/64", ""},
		{"none", "invalid Prefix", ""},
		{"cidr=2001:db8:100::/48", "2001:db8:100::11/64", ""},
		{"cidr=2001:db8:101::/64", "", "no interface address matches"}, // only a deprecated address there
		{"interface=^uplink6$", "2001:db8:100::11/64", ""},
		{"interface=^uplink", "2001:db8:100::11/64", ""}, // fe80:: link-locals never count
		{"can-reach=2001:db8:203::1", "2001:db8:200::5/64", ""},
	} {
		m, err := ParseFamily(ipfamily.IPv6, c.method)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Detect(m, nodeIP)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "IPv6") {
				t.Errorf("%q: got %v, %v; want an IPv6 error containing %q", c.method, got, err, c.err)
			}
			continue
		}
		if err != nil || got.String() != c.want {
			t.Errorf("%q: got %v, %v; want %s", c.method, got, err, c.want)
		}
	}
}
