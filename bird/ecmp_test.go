package bird

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/felix/bgproutes"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// dataplane is felix's part of a node in the test's namespace: the learned routes' manager over
// the real kernel's route table, fed the BGP agent's routes as felix's loop feeds them.
type dataplane struct {
	mu   sync.Mutex
	msgs []any
	kick chan struct{}
	errs chan error
}

func startDataplane(t *testing.T, node model.Node, uplink string, pools ...netip.Prefix) *dataplane {
	t.Helper()
	h, err := nl.NewReal("")
	if err != nil {
		t.Fatal(err)
	}
	rt := routetable.New(h, routetable.Options{Protocol: v1.RouteProtocol, Log: testLogger()})
	mgr := bgproutes.New(rt, bgproutes.Options{NodeName: node.Name, Uplink: ipfamily.PairOf(uplink, uplink), Log: testLogger()})
	mgr.OnUpdate(model.NodeUpdate{Node: node})
	for i, p := range pools {
		mgr.OnUpdate(model.PoolUpdate{Pool: model.Pool{Name: fmt.Sprint("pool", i), CIDR: p, IPIPMode: v1.IPIPModeNever}})
	}
	d := &dataplane{kick: make(chan struct{}, 1), errs: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			d.mu.Lock()
			msgs := d.msgs
			d.msgs = nil
			d.mu.Unlock()
			for _, m := range msgs {
				mgr.OnUpdate(m)
			}
			// The host's routes are read again each time: the test changes them behind the
			// table's back, as an operator would.
			rt.QueueResync()
			if err := rt.Sync(); err == nil && rt.HostRoutesChanged() {
				mgr.OnUpdate(routetable.HostRoutesUpdate{Routes: rt.HostRoutes()})
			}
			_ = mgr.CompleteDeferredWork(ctx, false)
			_, _ = rt.Apply() // a held-back route is the test's to look at, not an error here
			select {
			case <-ctx.Done():
				return
			case <-d.kick:
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		// What the table programmed goes with the test.
		var left []netlink.Route
		_ = h.RouteListFilteredIter(netlink.FAMILY_ALL, &netlink.Route{Protocol: v1.RouteProtocol}, netlink.RT_FILTER_PROTOCOL, func(r netlink.Route) bool {
			left = append(left, r)
			return true
		})
		for _, r := range left {
			_ = h.RouteDel(&r)
		}
		h.Close()
	})
	return d
}

func (d *dataplane) apply(msg any) {
	d.mu.Lock()
	d.msgs = append(d.msgs, msg)
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// kernelHops are the gateways of the kernel's route to dst of protocol proto (0: any), sorted.
func kernelHops(t *testing.T, dst netip.Prefix, proto int) []string {
	t.Helper()
	family := unix.AF_INET
	if dst.Addr().Is6() {
		family = unix.AF_INET6
	}
	routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range routes {
		d := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if family == unix.AF_INET6 {
			d = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		if r.Dst != nil {
			d = netip.MustParsePrefix(r.Dst.String())
		}
		if d != dst || proto != 0 && int(r.Protocol) != proto {
			continue
		}
		if r.Gw != nil {
			out = append(out, r.Gw.String())
		}
		for _, h := range r.MultiPath {
			out = append(out, h.Gw.String())
		}
	}
	slices.Sort(out)
	return out
}

func waitKernelHops(t *testing.T, what string, dst netip.Prefix, want []string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := kernelHops(t, dst, v1.RouteProtocol)
		if slices.Equal(got, want) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			out, _ := exec.Command("ip", "route", "show", "table", "main").CombinedOutput()
			out6, _ := exec.Command("ip", "-6", "route", "show", "table", "main").CombinedOutput()
			t.Fatalf("%s: the kernel's route to %s goes via %v, want %v after %v\n%s%s", what, dst, got, want, timeout, out, out6)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ping checks that addr answers from this namespace.
func ping(t *testing.T, what string, addr netip.Addr) {
	t.Helper()
	var out []byte
	var err error
	for range 5 { // the first packet may wait for neighbour discovery
		if out, err = exec.Command("ping", "-c", "1", "-W", "1", addr.String()).CombinedOutput(); err == nil {
			return
		}
	}
	t.Fatalf("%s: ping %s: %v\n%s", what, addr, err, out)
}

// ecmpToR is an FRR ToR in a namespace of its own, on the node's bridge, announcing the
// external prefixes from AS as, with the address behind them on its loopback.
type ecmpToR struct {
	ns, veth string
	addr     netip.Addr
	addr6    netip.Addr
	vtysh    func(string) string
}

func startECMPToR(t *testing.T, i int, as uint32, bridge string, node model.Node, behind []netip.Prefix) *ecmpToR {
	t.Helper()
	tor := &ecmpToR{
		ns:    fmt.Sprintf("tabby-test-ecmp%d-%d", i, os.Getpid()),
		veth:  fmt.Sprintf("ecmp%d-%d", i, os.Getpid()%100000),
		addr:  netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", 240+i)),
		addr6: netip.MustParseAddr(fmt.Sprintf("2001:db8:100::%d", 240+i)),
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	addNetns(t, tor.ns)
	run("ip", "link", "add", tor.veth, "type", "veth", "peer", "name", "eth0", "netns", tor.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", tor.veth).Run() })
	run("ip", "link", "set", tor.veth, "master", bridge, "up")
	in := func(args ...string) { t.Helper(); run(append([]string{"ip", "netns", "exec", tor.ns}, args...)...) }
	in("ip", "addr", "add", netip.PrefixFrom(tor.addr, 24).String(), "dev", "eth0")
	in("ip", "addr", "add", netip.PrefixFrom(tor.addr6, 64).String(), "dev", "eth0", "nodad")
	// A link going down keeps its IPv6 address, as it keeps its IPv4 one.
	in("sysctl", "-qw", "net.ipv6.conf.eth0.keep_addr_on_down=1")
	in("ip", "link", "set", "eth0", "up")
	in("ip", "link", "set", "lo", "up")
	for _, p := range behind {
		if p.Bits() > 0 {
			in("ip", "addr", "add", netip.PrefixFrom(p.Addr().Next(), p.Addr().BitLen()).String(), "dev", "lo")
		}
	}
	tor.vtysh = frrToR(t, tor.ns, tor.addr, as, v1.DefaultASNumber, addr4(node), addr6(node))
	var conf strings.Builder
	fmt.Fprintf(&conf, "configure terminal\nrouter bgp %d\nno bgp network import-check\n", as)
	for _, fam := range []string{"ipv4", "ipv6"} {
		fmt.Fprintf(&conf, "address-family %s unicast\n", fam)
		for _, p := range behind {
			if p.Addr().Is4() == (fam == "ipv4") {
				fmt.Fprintf(&conf, "network %s\n", p)
			}
		}
		conf.WriteString("exit-address-family\n")
	}
	// bgpd takes a moment to open its vty socket.
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := strings.TrimSpace(tor.vtysh(conf.String()))
		if out == "" {
			break
		}
		if !strings.Contains(out, "failed to connect") || time.Now().After(deadline) {
			t.Fatalf("ToR %d configuration: %s", i, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return tor
}

// setLink brings the ToR's own end of its link down or up.
func (tor *ecmpToR) setLink(t *testing.T, state string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", tor.ns, "ip", "link", "set", "eth0", state).CombinedOutput(); err != nil {
		t.Fatalf("link %s: %v: %s", state, err, out)
	}
}

// TestECMPOverTwoFRRToRs: two FRR ToRs (each in its own AS and namespace, on the node's link)
// announce the same external prefixes, a default route among them. The node's kernel gets one
// multipath route over both for each, IPv4 and IPv6; when one ToR's link goes down the route
// narrows to the other once the session ends, and widens again when it is back; the address
// behind both answers all along. maxPaths 1 makes it a single path. The host's own default
// route is never displaced: BGP's goes in only once the host's has gone.
func TestECMPOverTwoFRRToRs(t *testing.T) {
	netnstest.Require(t)
	if _, err := os.Stat("/usr/lib/frr/bgpd"); err != nil {
		t.Fatalf("FRR is not installed (hack/install-deps.sh installs it): %v", err)
	}
	node := withIPv6Address(mkNode(81, nil, ""), netip.MustParsePrefix("2001:db8:100::81/64"))
	bridge := fmt.Sprintf("ecmpbr%d", os.Getpid()%100000)
	for _, c := range [][]string{
		{"ip", "link", "add", bridge, "type", "bridge"},
		{"ip", "addr", "add", node.BGPAddress.Get(ipfamily.IPv4).String(), "dev", bridge},
		{"ip", "addr", "add", node.BGPAddress.Get(ipfamily.IPv6).String(), "dev", bridge, "nodad"},
		{"ip", "link", "set", bridge, "up"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", bridge).Run() })

	ext4, ext6, def := netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:ff::/48"), netip.MustParsePrefix("0.0.0.0/0")
	behind := []netip.Prefix{ext4, ext6, def}
	tors := []*ecmpToR{startECMPToR(t, 1, 65001, bridge, node, behind), startECMPToR(t, 2, 65002, bridge, node, behind)}

	// The host's own default route, as DHCP would leave it: BGP's must not displace it.
	if out, err := exec.Command("ip", "route", "add", "default", "via", "198.51.100.254", "dev", bridge, "metric", "100").CombinedOutput(); err != nil {
		t.Fatalf("host default route: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", "default", "via", "198.51.100.254").Run() })

	var bgpPeers []v1.BGPPeer
	for i, tor := range tors {
		for _, a := range []netip.Addr{tor.addr, tor.addr6} {
			bgpPeers = append(bgpPeers, v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tor%d-%s", i+1, ipfamily.OfAddr(a))},
				Spec: v1.BGPPeerSpec{PeerIP: a.String(), ASNumber: 65001 + uint32(i), Filters: []string{"tors"}}})
		}
	}
	// The network team's filter: the ToRs' prefixes outside the pools are taken.
	eq := v1.BGPFilterEqual
	accept := filterUpdate(t, "tors", v1.BGPFilterSpec{
		ImportV4: []v1.BGPFilterRuleV4{{CIDR: ext4.String(), MatchOperator: eq, Action: v1.BGPFilterAccept}, {CIDR: def.String(), MatchOperator: eq, Action: v1.BGPFilterAccept}},
		ImportV6: []v1.BGPFilterRuleV6{{CIDR: ext6.String(), MatchOperator: eq, Action: v1.BGPFilterAccept}},
	})
	dp := startDataplane(t, node, bridge, pool, pool6)
	n := startNode(t, node, []model.Node{node}, func(b *Bird) {
		send(b, accept)
		send(b, peerUpdates(bgpPeers...)...)
		send(b, poolUpdate(pool6))
	}, func(c *Config) { c.Routes = dp.apply })
	for _, tor := range tors {
		n.waitPeer(t, tor.addr, "established", 30*time.Second)
		n.waitPeer(t, tor.addr6, "established", 30*time.Second)
	}

	both4 := []string{tors[0].addr.String(), tors[1].addr.String()}
	both6 := []string{tors[0].addr6.String(), tors[1].addr6.String()}
	waitKernelHops(t, "ECMP IPv4", ext4, both4, 30*time.Second)
	waitKernelHops(t, "ECMP IPv6", ext6, both6, 30*time.Second)
	ping(t, "over both ToRs", ext4.Addr().Next())
	ping(t, "over both ToRs", ext6.Addr().Next())
	if got := kernelHops(t, def, v1.RouteProtocol); len(got) != 0 {
		t.Fatalf("BGP's default route displaced the host's: via %v", got)
	}
	// The status (tabbyctl node status) lists the routes over both ToRs.
	st, err := n.bird.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, r := range st.Learned {
		if r.External {
			listed[r.Prefix] = len(r.NextHops)
		}
	}
	if st.RoutesMultipath < 3 || listed[ext4.String()] != 2 || listed[ext6.String()] != 2 {
		t.Fatalf("status: %d routes over several paths, external routes listed %v", st.RoutesMultipath, listed)
	}

	// The host's default route goes: BGP's takes its place, over both ToRs.
	if out, err := exec.Command("ip", "route", "del", "default", "via", "198.51.100.254").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	waitKernelHops(t, "ECMP default route once the host's went", def, both4, 30*time.Second)

	// ToR 1's link goes down: once its sessions end (hold time), the other ToR alone.
	tors[0].setLink(t, "down")
	d := waitKernelHops(t, "ToR 1 down", ext4, []string{tors[1].addr.String()}, 60*time.Second)
	waitKernelHops(t, "ToR 1 down", ext6, []string{tors[1].addr6.String()}, 30*time.Second)
	waitKernelHops(t, "ToR 1 down", def, []string{tors[1].addr.String()}, 30*time.Second)
	t.Logf("one path left %v after the link went down (BGP hold time; BFD shortens it)", d.Round(time.Millisecond))
	ping(t, "over ToR 2 alone", ext4.Addr().Next())
	ping(t, "over ToR 2 alone", ext6.Addr().Next())

	tors[0].setLink(t, "up")
	n.waitPeer(t, tors[0].addr, "established", 60*time.Second)
	n.waitPeer(t, tors[0].addr6, "established", 60*time.Second)
	waitKernelHops(t, "ToR 1 back", ext4, both4, 60*time.Second)
	waitKernelHops(t, "ToR 1 back", ext6, both6, 30*time.Second)
	ping(t, "over both ToRs again", ext4.Addr().Next())
	ping(t, "over both ToRs again", ext6.Addr().Next())

	// maxPaths 1: the best path alone; unset again: both.
	one := int32(1)
	send(n.bird, confUpdate(&v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{MaxPaths: &one}}))
	for _, p := range []netip.Prefix{ext4, ext6} {
		deadline := time.Now().Add(30 * time.Second)
		for len(kernelHops(t, p, v1.RouteProtocol)) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("maxPaths 1: %s via %v", p, kernelHops(t, p, v1.RouteProtocol))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ping(t, "maxPaths 1", ext4.Addr().Next())
	send(n.bird, confUpdate(nil))
	waitKernelHops(t, "maxPaths back to its default", ext4, both4, 30*time.Second)
	waitKernelHops(t, "maxPaths back to its default", ext6, both6, 30*time.Second)
}

// TestECMPPoolRoutesAcrossRacks: in an AS-per-rack design without a mesh, a node learns another
// rack's block from its two ToRs, each its own AS: one route over both, the best path's next
// hop among them; with one ToR gone, over the other; maxPaths 1, over the best alone.
func TestECMPPoolRoutesAcrossRacks(t *testing.T) {
	netnstest.Require(t)
	a, b := mkNode(83, nil, ""), mkNode(84, nil, "")
	b.ASN = 64513 // another rack
	all := []model.Node{a, b}
	tor1, tor2 := netip.MustParseAddr("198.51.100.231"), netip.MustParseAddr("198.51.100.232")
	nodes := map[netip.Addr]uint32{addr4(a): v1.DefaultASNumber, addr4(b): 64513}
	r1 := startRouter(t, tor1, 65001, nodes)
	startRouter(t, tor2, 65002, nodes)
	var bgpPeers []v1.BGPPeer
	for i, tor := range []netip.Addr{tor1, tor2} {
		bgpPeers = append(bgpPeers, v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("tor", i+1)}, Spec: v1.BGPPeerSpec{PeerIP: tor.String(), ASNumber: 65001 + uint32(i)}})
	}
	setup := func(bd *Bird) {
		send(bd, confUpdate(meshOff()))
		send(bd, peerUpdates(bgpPeers...)...)
	}
	na := startNode(t, a, all, setup)
	nb := startNode(t, b, all, setup)
	both := []netip.Addr{tor1, tor2}
	na.routes.waitHops(t, nb.block, both, 30*time.Second)
	nb.routes.waitHops(t, na.block, both, 30*time.Second)

	// tor1 goes: its session ends (deleted at the router), the route narrows to tor2.
	if err := r1.srv.DeletePeer(context.Background(), &api.DeletePeerRequest{Address: addr4(a).String()}); err != nil {
		t.Fatal(err)
	}
	na.routes.waitHops(t, nb.block, []netip.Addr{tor2}, 30*time.Second)

	one := int32(1)
	send(nb.bird, confUpdate(&v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{NodeToNodeMeshEnabled: meshOff().Spec.NodeToNodeMeshEnabled, MaxPaths: &one}}))
	nb.routes.wait(t, "maxPaths 1: one next hop", 30*time.Second, func(map[netip.Prefix]netip.Addr) bool {
		u, ok := nb.routes.full[na.block]
		return ok && len(u.Hops()) == 1
	})
}
