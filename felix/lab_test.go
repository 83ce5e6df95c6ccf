package felix_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netNS is a namespace a test made, with a netlink handle inside it.
type netNS struct {
	ns.NetNS
	h *netlink.Handle
}

func requireRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("netns test skipped in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("netns test needs root")
	}
}

func newNetNS(t *testing.T) *netNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("create netns: %v", err)
	}
	t.Cleanup(func() {
		n.Close()
		_ = testutils.UnmountNS(n)
	})
	nsh, err := netns.GetFromPath(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	return &netNS{NetNS: n, h: h}
}

// veth connects a (name) to b (peer), with optional addresses, both up.
func veth(t *testing.T, a *netNS, name, addrA string, b *netNS, peer, addrB string) {
	t.Helper()
	err := a.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1400}, PeerName: peer, PeerNamespace: netlink.NsFd(int(b.Fd()))})
	if err != nil {
		t.Fatalf("veth %s/%s: %v", name, peer, err)
	}
	for _, side := range []struct {
		n    *netNS
		name string
		addr string
	}{{a, name, addrA}, {b, peer, addrB}} {
		l, err := side.n.h.LinkByName(side.name)
		if err != nil {
			t.Fatal(err)
		}
		if side.addr != "" {
			ad, err := netlink.ParseAddr(side.addr)
			if err != nil {
				t.Fatal(err)
			}
			if ad.IP.To4() == nil {
				ad.Flags |= unix.IFA_F_NODAD // usable at once, not tentative for a second
			}
			if err := side.n.h.AddrAdd(l, ad); err != nil {
				t.Fatalf("addr %s on %s: %v", side.addr, side.name, err)
			}
		}
		if err := side.n.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *netNS) link(t *testing.T, name string) netlink.Link {
	t.Helper()
	l, err := n.h.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return l
}

func (n *netNS) addRoute(t *testing.T, r *netlink.Route) {
	t.Helper()
	if err := n.h.RouteAdd(r); err != nil {
		t.Fatalf("route add %v: %v", r, err)
	}
}

// route finds the main-table route to dst (any protocol).
func (n *netNS) route(dst string) (netlink.Route, bool) {
	_, d, _ := net.ParseCIDR(dst)
	family := netlink.FAMILY_V4
	if d.IP.To4() == nil {
		family = netlink.FAMILY_V6
	}
	rs, err := n.h.RouteListFiltered(family, &netlink.Route{Dst: d, Table: 254}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil || len(rs) == 0 {
		return netlink.Route{}, false
	}
	return rs[0], true
}

// sysctl reads a /proc/sys value as seen from inside n.
func (n *netNS) sysctl(t *testing.T, key string) string {
	t.Helper()
	var v string
	err := n.Do(func(ns.NetNS) error {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
		v = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		t.Fatalf("sysctl %s: %v", key, err)
	}
	return v
}

func (n *netNS) writeSysctl(t *testing.T, key, val string) {
	t.Helper()
	err := n.Do(func(ns.NetNS) error {
		return os.WriteFile("/proc/sys/"+strings.ReplaceAll(key, ".", "/"), []byte(val), 0o644)
	})
	if err != nil {
		t.Fatalf("sysctl %s=%s: %v", key, val, err)
	}
}

// exec runs a command inside n (iptables, ipset act on the calling thread's namespace).
func (n *netNS) exec(t *testing.T, name string, args ...string) string {
	t.Helper()
	var out []byte
	err := n.Do(func(ns.NetNS) error {
		var err error
		out, err = exec.Command(name, args...).CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

type udpSink struct {
	conn *net.UDPConn
}

// udpServer listens on 203.0.113.10:5301 inside n; the socket stays in that namespace.
func udpServer(t *testing.T, n *netNS) *udpSink {
	t.Helper()
	var conn *net.UDPConn
	err := n.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("203.0.113.10"), Port: 5301})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &udpSink{conn: conn}
}

// sourceOf sends datagrams from inside pod until one arrives, and returns its source address.
func (s *udpSink) sourceOf(t *testing.T, pod *netNS, tag string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, 64)
	for time.Now().Before(deadline) {
		err := pod.Do(func(ns.NetNS) error {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP("203.0.113.10"), Port: 5301})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte(tag))
			return err
		})
		if err != nil {
			t.Fatalf("send from pod: %v", err)
		}
		_ = s.conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, from, err := s.conn.ReadFromUDP(buf)
			if err != nil {
				break
			}
			if string(buf[:n]) == tag {
				return from.IP.String()
			}
		}
	}
	t.Fatalf("no datagram %q reached the internet namespace", tag)
	return ""
}

func scrape(t *testing.T, f interface{ MetricsHandler() http.Handler }) string {
	t.Helper()
	rec := httptest.NewRecorder()
	f.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
