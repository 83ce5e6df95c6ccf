package felix_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/internal/testwait"
)

const (
	podIP   = "10.244.0.5"
	podVeth = "cali" + "0000000000a" // a fixed cali name: unique per namespace is enough
)

// nodeLab is a node namespace wired like a real node: an uplink to a router namespace
// (198.51.100.0/24) behind which an "internet" namespace lives (203.0.113.0/24), and one pod
// namespace behind a cali veth.
type nodeLab struct {
	node, router, internet, pod *netNS
	f                           *felix.Felix
}

func newNodeLab(t *testing.T) *nodeLab {
	l := &nodeLab{node: newNetNS(t), router: newNetNS(t), internet: newNetNS(t), pod: newNetNS(t)}
	veth(t, l.node, "up0", "198.51.100.11/24", l.router, "down0", "198.51.100.1/24")
	veth(t, l.router, "out0", "203.0.113.1/24", l.internet, "eth0", "203.0.113.10/24")
	l.router.writeSysctl(t, "net.ipv4.ip_forward", "1")
	// A top-of-rack router knows the pod network (so without NAT the pod's own address is what
	// the far end sees, not a drop).
	l.router.addRoute(t, &netlink.Route{Dst: mustNet("10.244.0.0/16"), Gw: net.ParseIP("198.51.100.11"), LinkIndex: l.router.link(t, "down0").Attrs().Index})
	l.internet.addRoute(t, &netlink.Route{Gw: net.ParseIP("203.0.113.1"), LinkIndex: l.internet.link(t, "eth0").Attrs().Index})

	// The pod, wired as the CNI plugin does: /32 address, default via 169.254.1.1 answered by
	// proxy ARP on the host side.
	veth(t, l.pod, "eth0", podIP+"/32", l.node, podVeth, "")
	pe := l.pod.link(t, "eth0").Attrs().Index
	l.pod.addRoute(t, &netlink.Route{Dst: mustNet("169.254.1.1/32"), LinkIndex: pe, Scope: netlink.SCOPE_LINK})
	l.pod.addRoute(t, &netlink.Route{Gw: net.ParseIP("169.254.1.1"), LinkIndex: pe})
	return l
}

// start runs felix in the node namespace, with the managers made by extra added to its own.
func (l *nodeLab) start(t *testing.T, cfg felix.Config, extra ...func(felix.Writers) felix.Manager) {
	cfg.NodeName, cfg.UplinkInterface, cfg.NetNSPath = nodeName, ipfamily.PairOf("up0", ""), l.node.Path()
	f, err := felix.New(cfg)
	if err != nil {
		t.Fatalf("felix.New: %v", err)
	}
	for _, m := range extra {
		f.AddManager(m(f.Writers()))
	}
	l.f = f
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("felix.Run: %v", err)
		}
		f.Close()
	})
}

func mustNet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func TestFelixInNetns(t *testing.T) {
	requireRoot(t)
	l := newNodeLab(t)
	grace := 2 * time.Second
	l.start(t, felix.Config{WorkloadGracePeriod: grace, ResyncInterval: time.Hour})
	f, node := l.f, l.node

	send(f,
		thisNode("198.51.100.11/24", "", ""),
		pool("default", "10.244.0.0/16", v1.IPIPModeNever, true),
		localBlock("10.244.0.0/26"),
		workload(podVeth, podIP),
		learned("10.244.1.0/26", "198.51.100.12"),
		learned("10.244.2.0/26", "203.0.113.7"),
		learned("172.16.0.0/24", "198.51.100.12"),
	)

	up0 := node.link(t, "up0").Attrs().Index
	cali := node.link(t, podVeth).Attrs().Index
	testwait.Until(t, "local and same-subnet routes", 5*time.Second, func() bool {
		w, ok1 := node.route(podIP + "/32")
		b, ok2 := node.route("10.244.0.0/26")
		r, ok3 := node.route("10.244.1.0/26")
		return ok1 && ok2 && ok3 &&
			w.LinkIndex == cali && w.Scope == netlink.SCOPE_LINK && w.Protocol == v1.RouteProtocol &&
			b.Type == unix.RTN_BLACKHOLE && b.Protocol == v1.RouteProtocol &&
			r.LinkIndex == up0 && r.Gw.Equal(net.ParseIP("198.51.100.12")) && r.Protocol == v1.RouteProtocol
	})
	testwait.Until(t, "ready", 5*time.Second, f.Ready)
	if _, ok := node.route("172.16.0.0/24"); ok {
		t.Error("a prefix outside every pool was programmed")
	}

	t.Run("recursive next hop waits for a host route", func(t *testing.T) {
		if _, ok := node.route("10.244.2.0/26"); ok {
			t.Fatal("programmed without any route to the next hop")
		}
		if u := f.Unresolved(); !strings.Contains(u[netip.MustParsePrefix("10.244.2.0/26")], "no host route") {
			t.Fatalf("unresolved next hop not reported: %v", u)
		}
		// The operator adds the default route: the BGP route resolves through its gateway.
		node.addRoute(t, &netlink.Route{Gw: net.ParseIP("198.51.100.1"), LinkIndex: up0, Protocol: unix.RTPROT_STATIC})
		testwait.Until(t, "recursive route via the default gateway", 5*time.Second, func() bool {
			r, ok := node.route("10.244.2.0/26")
			return ok && r.Gw.Equal(net.ParseIP("198.51.100.1")) && r.LinkIndex == up0
		})
		if len(f.Unresolved()) != 0 {
			t.Fatalf("still unresolved: %v", f.Unresolved())
		}
	})

	t.Run("sysctls in the node namespace only", func(t *testing.T) {
		for key, want := range map[string]string{
			"net.ipv4.ip_forward":                        "1",
			"net.ipv4.conf." + podVeth + ".proxy_arp":    "1",
			"net.ipv4.conf." + podVeth + ".forwarding":   "1",
			"net.ipv4.neigh." + podVeth + ".proxy_delay": "0",
		} {
			if got := node.sysctl(t, key); got != want {
				t.Errorf("%s = %s, want %s", key, got, want)
			}
		}
		// The cali veth exists only in the node namespace: had felix written the root's
		// /proc/sys it would have failed; make sure the root has no such entry.
		if _, err := os.Stat("/proc/sys/net/ipv4/conf/" + podVeth); err == nil {
			t.Error("the test's cali interface is visible in the root namespace's /proc/sys")
		}
	})

	t.Run("drift repair", func(t *testing.T) {
		if err := node.h.RouteDel(&netlink.Route{Dst: mustNet("10.244.1.0/26"), Protocol: v1.RouteProtocol}); err != nil {
			t.Fatal(err)
		}
		node.addRoute(t, &netlink.Route{Dst: mustNet("10.244.7.0/26"), Type: unix.RTN_BLACKHOLE, Protocol: v1.RouteProtocol})
		node.addRoute(t, &netlink.Route{Dst: mustNet("10.99.0.0/24"), Gw: net.ParseIP("198.51.100.1"), LinkIndex: up0, Protocol: unix.RTPROT_STATIC})
		testwait.Until(t, "deleted route back, stale route gone", 5*time.Second, func() bool {
			_, back := node.route("10.244.1.0/26")
			_, stale := node.route("10.244.7.0/26")
			return back && !stale
		})
		// A full resync changes nothing that is not tabby's.
		f.QueueResync()
		if err := f.ApplyNow(context.Background()); err != nil {
			t.Fatalf("ApplyNow: %v", err)
		}
		if r, ok := node.route("10.99.0.0/24"); !ok || r.Protocol != unix.RTPROT_STATIC {
			t.Fatal("a static route on the uplink was touched")
		}
		// The default route and 10.99.0.0/24, both static, are still there.
		if rs, _ := node.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: unix.RTPROT_STATIC}, netlink.RT_FILTER_PROTOCOL); len(rs) != 2 {
			t.Fatalf("static routes: %v", rs)
		}
	})

	t.Run("grace period for an unknown workload route", func(t *testing.T) {
		other := newNetNS(t)
		veth(t, other, "eth0", "", node, "cali0000000000b", "")
		idx := node.link(t, "cali0000000000b").Attrs().Index
		// The CNI plugin's route for a pod felix has not heard of.
		node.addRoute(t, &netlink.Route{Dst: mustNet("10.244.0.9/32"), LinkIndex: idx, Scope: netlink.SCOPE_LINK, Protocol: v1.RouteProtocol})
		added := time.Now()
		f.QueueResync()
		testwait.Until(t, "unknown route removed", grace+5*time.Second, func() bool {
			_, ok := node.route("10.244.0.9/32")
			return !ok
		})
		if lived := time.Since(added); lived < grace-100*time.Millisecond {
			t.Fatalf("removed after %s, grace period is %s", lived, grace)
		}
		// A pod felix knows: removed at once when it goes.
		node.addRoute(t, &netlink.Route{Dst: mustNet("10.244.0.10/32"), LinkIndex: idx, Scope: netlink.SCOPE_LINK, Protocol: v1.RouteProtocol})
		send(f, workload("cali0000000000b", "10.244.0.10"))
		if err := f.ApplyNow(context.Background()); err != nil {
			t.Fatal(err)
		}
		send(f, model.WorkloadRemove{Interface: "cali0000000000b"})
		start := time.Now()
		testwait.Until(t, "gone pod's route removed", 5*time.Second, func() bool {
			_, ok := node.route("10.244.0.10/32")
			return !ok
		})
		if time.Since(start) > grace/2 {
			t.Fatalf("a known pod's route waited %s", time.Since(start))
		}
	})

	t.Run("nat outgoing", func(t *testing.T) {
		srv := udpServer(t, l.internet)
		if got := srv.sourceOf(t, l.pod, "nat on"); got != "198.51.100.11" {
			t.Fatalf("with natOutgoing the internet saw %s, want the node's 198.51.100.11", got)
		}
		save := node.exec(t, "iptables-save", "-t", "nat")
		if n := strings.Count(save, "-A POSTROUTING -j tabby-POSTROUTING"); n != 1 {
			t.Fatalf("%d jumps to tabby-POSTROUTING:\n%s", n, save)
		}
		if !strings.Contains(save, "--match-set tabby-masq-ipam-pools src -m set ! --match-set tabby-all-ipam-pools dst -j MASQUERADE") {
			t.Fatalf("masquerade rule missing:\n%s", save)
		}
		// Someone else's rule in POSTROUTING survives everything felix does.
		node.exec(t, "iptables", "-t", "nat", "-A", "POSTROUTING", "-d", "203.0.113.99/32", "-j", "RETURN")
		send(f, pool("default", "10.244.0.0/16", v1.IPIPModeNever, false))
		testwait.Until(t, "nat removed", 5*time.Second, func() bool {
			var rules, sets []byte
			_ = node.Do(func(ns.NetNS) error {
				rules, _ = exec.Command("iptables-save", "-t", "nat").Output()
				sets, _ = exec.Command("ipset", "list", "-n").Output()
				return nil
			})
			return !strings.Contains(string(rules), "tabby") && !strings.Contains(string(sets), "tabby")
		})
		if save := node.exec(t, "iptables-save", "-t", "nat"); !strings.Contains(save, "-A POSTROUTING -d 203.0.113.99/32 -j RETURN") {
			t.Fatalf("foreign rule removed:\n%s", save)
		}
		if got := srv.sourceOf(t, l.pod, "nat off"); got != podIP {
			t.Fatalf("without natOutgoing the internet saw %s, want the pod's %s", got, podIP)
		}
	})

	t.Run("metrics and root namespace untouched", func(t *testing.T) {
		body := scrape(t, f)
		for _, want := range []string{`tabby_felix_routes_programmed{kind="workload"} 1`, `tabby_felix_routes_programmed{kind="blackhole"} 1`, `tabby_felix_routes_programmed{kind="remote"} 2`, "tabby_felix_unresolved_next_hops 0"} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: v1.RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Dst != nil && (r.Dst.String() == "10.244.1.0/26" || r.Dst.String() == "10.244.0.0/26") {
				t.Errorf("felix's route %s in the root namespace", r.Dst)
			}
		}
		for _, bin := range []string{"iptables-legacy-save", "iptables-nft-save"} {
			if out, _ := exec.Command(bin, "-t", "nat").Output(); strings.Contains(string(out), "tabby-nat-outgoing") {
				t.Errorf("%s shows tabby chains in the root namespace", bin)
			}
		}
	})
}

func TestFelixTunnelUnsupportedKernel(t *testing.T) {
	requireRoot(t)
	l := newNodeLab(t)
	l.start(t, felix.Config{ResyncInterval: time.Hour})
	send(l.f,
		thisNode("198.51.100.11/24", "", "10.244.9.1"),
		pool("ipip", "10.244.0.0/16", v1.IPIPModeCrossSubnet, false),
		workload(podVeth, podIP),
		learned("10.244.1.0/26", "198.51.100.12"),
		learned("10.244.2.0/26", "203.0.113.7"),
	)
	// Where the kernel has ipip, tunl0 comes up and both routes work; here it cannot: the
	// same-subnet route is still programmed and the error is reported, not fatal.
	testwait.Until(t, "same-subnet route despite no tunl0", 5*time.Second, func() bool {
		_, ok := l.node.route("10.244.1.0/26")
		return ok && l.f.Ready()
	})
	if _, err := l.node.h.LinkByName("tunl0"); err == nil {
		if _, ok := l.node.route("10.244.2.0/26"); !ok {
			testwait.Until(t, "tunnel route", 5*time.Second, func() bool { _, ok := l.node.route("10.244.2.0/26"); return ok })
		}
		return
	}
	err := l.f.ApplyNow(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ipip") {
		t.Fatalf("ApplyNow error %v, want the missing ipip support named", err)
	}
	if body := scrape(t, l.f); !strings.Contains(body, "tabby_felix_tunnel_errors_total") || strings.Contains(body, "tabby_felix_tunnel_errors_total 0") {
		t.Fatalf("tunnel errors not counted:\n%s", body)
	}
}
