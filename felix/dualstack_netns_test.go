package felix_test

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/internal/testwait"
)

const (
	pod6     = "fd00:10:244::5"
	podVeth6 = "cali" + "0000000000c"
	// gateway6 is the host veth's link-local address, the pod's IPv6 default gateway.
	gateway6 = "fe80::ecee:eeff:feee:eeee"
)

// A dual-stack node: felix programs both families' routes from one set of inputs, turns on IPv6
// forwarding for the IPv6 pool, and masquerades IPv6 pod traffic leaving the pool with ip6tables.
// The router knows no pod route, so the pod reaches the internet only through the NAT.
func TestFelixDualStackInNetns(t *testing.T) {
	requireRoot(t)
	node, router, internet, pod := newNetNS(t), newNetNS(t), newNetNS(t), newNetNS(t)
	veth(t, node, "up0", "198.51.100.11/24", router, "down0", "198.51.100.1/24")
	up0 := node.link(t, "up0")
	if err := node.h.AddrAdd(up0, &netlink.Addr{IPNet: mustNet6("2001:db8:100::11/64"), Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatal(err)
	}
	if err := router.h.AddrAdd(router.link(t, "down0"), &netlink.Addr{IPNet: mustNet6("2001:db8:100::1/64"), Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatal(err)
	}
	veth(t, router, "out0", "2001:db8:203::1/64", internet, "eth0", "2001:db8:203::10/64")
	router.writeSysctl(t, "net.ipv6.conf.all.forwarding", "1")
	internet.addRoute(t, &netlink.Route{Dst: mustNet6("::/0"), Gw: net.ParseIP("2001:db8:203::1"), LinkIndex: internet.link(t, "eth0").Attrs().Index})
	node.addRoute(t, &netlink.Route{Dst: mustNet6("::/0"), Gw: net.ParseIP("2001:db8:100::1"), LinkIndex: up0.Attrs().Index, Protocol: unix.RTPROT_STATIC})

	// The pod as the CNI plugin wires it: a /128, default route via the host veth's link-local.
	veth(t, pod, "eth0", pod6+"/128", node, podVeth6, "")
	cali := node.link(t, podVeth6)
	if err := node.h.AddrAdd(cali, &netlink.Addr{IPNet: mustNet6(gateway6 + "/64"), Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatal(err)
	}
	pod.addRoute(t, &netlink.Route{Dst: mustNet6("::/0"), Gw: net.ParseIP(gateway6), LinkIndex: pod.link(t, "eth0").Attrs().Index})

	l := &nodeLab{node: node, router: router, internet: internet, pod: pod}
	l.start(t, felix.Config{ResyncInterval: time.Hour})
	f := l.f
	send(f,
		thisNode("198.51.100.11/24", "2001:db8:100::11/64", ""),
		pool("v4", "10.244.0.0/16", v1.IPIPModeNever, false),
		pool("v6", "fd00:10:244::/48", "", true),
		localBlock("10.244.0.0/26"), localBlock("fd00:10:244::/122"),
		workload(podVeth6, pod6),
		learned("fd00:10:244::40/122", "2001:db8:100::12"),
		learned("fd00:10:244::80/122", "2001:db8:300::13"),
		learned("10.244.1.0/26", "198.51.100.12"),
	)

	testwait.Until(t, "both families' routes", 5*time.Second, func() bool {
		w, ok1 := node.route(pod6 + "/128")
		b, ok2 := node.route("fd00:10:244::/122")
		r, ok3 := node.route("fd00:10:244::40/122")
		x, ok4 := node.route("fd00:10:244::80/122")
		r4, ok5 := node.route("10.244.1.0/26")
		return ok1 && ok2 && ok3 && ok4 && ok5 &&
			w.LinkIndex == cali.Attrs().Index && w.Protocol == v1.RouteProtocol &&
			b.Type == unix.RTN_BLACKHOLE && b.Protocol == v1.RouteProtocol &&
			r.LinkIndex == up0.Attrs().Index && r.Gw.Equal(net.ParseIP("2001:db8:100::12")) &&
			x.Gw.Equal(net.ParseIP("2001:db8:100::1")) && // across the router: via the host's default
			r4.Gw.Equal(net.ParseIP("198.51.100.12"))
	})
	if got := node.sysctl(t, "net.ipv6.conf.all.forwarding"); got != "1" {
		t.Errorf("IPv6 forwarding = %s with an IPv6 pool", got)
	}

	ping := func() bool {
		var err error
		_ = pod.Do(func(ns.NetNS) error {
			err = exec.Command("ping", "-6", "-n", "-c1", "-W1", "2001:db8:203::10").Run()
			return nil
		})
		return err == nil
	}
	testwait.Until(t, "the pod reaches the internet over IPv6 through the NAT", 10*time.Second, ping)
	if save := node.exec(t, "ip6tables-save", "-t", "nat"); !strings.Contains(save, "MASQUERADE") {
		t.Fatalf("no IPv6 masquerade rule:\n%s", save)
	}

	t.Run("withdrawal and natOutgoing off", func(t *testing.T) {
		send(f, withdrawn("fd00:10:244::40/122"), pool("v6", "fd00:10:244::/48", "", false))
		testwait.Until(t, "withdrawn IPv6 route removed", 5*time.Second, func() bool {
			_, ok := node.route("fd00:10:244::40/122")
			return !ok
		})
		testwait.Until(t, "IPv6 masquerade removed", 5*time.Second, func() bool {
			var out []byte
			_ = node.Do(func(ns.NetNS) error {
				out, _ = exec.Command("ip6tables-save", "-t", "nat").Output()
				return nil
			})
			return !strings.Contains(string(out), "MASQUERADE")
		})
		if ping() {
			t.Fatal("the pod still reaches the internet without NAT (the router has no route to the pool)")
		}
		// The kernel's own IPv6 routes are not felix's: the link-locals and the connected subnet stay.
		for _, dst := range []string{"2001:db8:100::/64", "fe80::/64"} {
			if _, ok := node.route(dst); !ok {
				t.Errorf("kernel route %s gone", dst)
			}
		}
	})
}

func mustNet6(s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}
