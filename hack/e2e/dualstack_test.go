package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
)

// TestDualStack: three nodes in a mesh, every pod with an IPv4 and an IPv6 address from the
// chart's two pools. Every pod reaches every pod at both addresses and every node at its IPv6
// one; each node holds exactly the expected routes of both families; an IPv6 pod reaches the
// internet through its node's ip6tables masquerade (the router knows no pod route); a deleted
// pod gives both addresses back.
func TestDualStack(t *testing.T) {
	l := startLab(t, lab.Options{Families: lab.DualStack})
	ctx := testCtx(t, 4*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(3)...)
	pods := addPodsPerNode(t, ctx, l, nodes, 2)
	for _, p := range pods {
		if !p.IP.Is4() || !lab.PodCIDR.Contains(p.IP) || !lab.PodCIDR6.Contains(p.IP6) {
			t.Fatalf("pod %s: addresses %s and %s, want one from each pool", p.Key(), p.IP, p.IP6)
		}
	}
	requireReach(t, ctx, "pod to pod, IPv4", podEndpoints(pods), podEndpoints(pods), 45*time.Second)
	requireReach(t, ctx, "pod to pod, IPv6", l.PodEndpoints6(), l.PodEndpoints6(), 45*time.Second)
	requireReach(t, ctx, "pod to node, IPv6", l.PodEndpoints6(), l.NodeEndpoints6(), 30*time.Second)
	requireRoutes(t, ctx, l, 30*time.Second)
	requireNAT6(t, ctx, l, pods[0])

	// The operator's view of the IPv6 side of IPAM, from the real cluster.
	p6 := pods[0]
	if out, err := l.Tabbyctl(ctx, "ipam", "show", "--ip", p6.IP6.String()); err != nil || !strings.Contains(out, "is allocated to pod default/"+p6.Name) {
		t.Errorf("ipam show --ip %s: %v\n%s", p6.IP6, err, out)
	}
	if out, err := l.Tabbyctl(ctx, "ipam", "release", "--ip", p6.IP6.String()); err == nil || !strings.Contains(out, "in use by live pod") {
		t.Errorf("ipam release of a live pod's IPv6 address: %v\n%s", err, out)
	}
	if out, err := l.Tabbyctl(ctx, "ipam", "show", "--show-blocks"); err != nil || !strings.Contains(out, lab.DefaultPool6Name) || !strings.Contains(out, "/122") {
		t.Errorf("ipam show --show-blocks: %v\n%s", err, out)
	}

	requireDualStackReadout(t, ctx, l, nodes)

	gone := pods[len(pods)-1]
	if err := l.DeletePod(ctx, gone.Key()); err != nil {
		t.Fatal(err)
	}
	for _, a := range gone.Addrs() {
		if err := allocated(ctx, l, a); err != nil {
			t.Errorf("after DEL: %v", err)
		}
	}
	requireRoutes(t, ctx, l, 30*time.Second)
	if out, err := l.Tabbyctl(ctx, "ipam", "check"); err != nil || !strings.Contains(out, "No problems found") {
		t.Errorf("ipam check of a dual-stack cluster: %v\n%s", err, out)
	}
}

// requireDualStackReadout: what an operator reads of a dual-stack cluster says so. The IPv6
// routes travel over the IPv4 sessions, each node's IPv6 address is in its row, the IPv6 pool's
// size reads as a power of two, and the agents' version is known without the chart.
func requireDualStackReadout(t *testing.T, ctx context.Context, l *lab.Lab, nodes []*lab.Node) {
	t.Helper()
	out, err := nodes[0].NodeStatus(ctx)
	if err != nil || !strings.Contains(out, "No IPv6 peers: IPv6 routes travel over the IPv4 sessions") {
		t.Errorf("node status of a dual-stack node: %v\n%s", err, out)
	}
	out, err = l.Tabbyctl(ctx, "get", "node")
	if err != nil || !strings.Contains(out, "IPV6-ADDRESS") {
		t.Errorf("get node: %v\n%s", err, out)
	}
	for _, n := range nodes {
		if !strings.Contains(out, n.IP6().String()+"/") {
			t.Errorf("get node: no IPv6 address %s for %s:\n%s", n.IP6(), n.Name, out)
		}
	}
	if out, err := l.Tabbyctl(ctx, "ipam", "show"); err != nil || !strings.Contains(out, " 2^80 ") {
		t.Errorf("ipam show of a /48: want its size as 2^80: %v\n%s", err, out)
	}
	want := fmt.Sprintf(" on %d of %d nodes (", len(nodes), len(nodes))
	if out, err := l.Tabbyctl(ctx, "version"); err != nil || !strings.Contains(out, "(what tabby-node runs)") || !strings.Contains(out, want) {
		t.Errorf("version of a cluster installed without the chart: want what tabby-node runs, %q: %v\n%s", want, err, out)
	}
}

// TestIPv6OnlyPods: an IPv6-only cluster: the chart's IPv6 pool alone, and nodes with no IPv4
// BGP address (--bgp-address=none). Pods get an IPv6 address and no IPv4 one, reach each other
// across nodes and the internet through NAT66, the nodes program no IPv4 pod route at all, and
// their BGP sessions run over IPv6.
func TestIPv6OnlyPods(t *testing.T) {
	l := startLab(t, lab.Options{Families: lab.IPv6Only})
	ctx := testCtx(t, 4*time.Minute)
	if _, err := l.Client.IPPools().Get(ctx, lab.DefaultPoolName); err == nil {
		t.Fatalf("an IPv6-only lab has the IPv4 pool %s", lab.DefaultPoolName)
	}
	nodes := addNodes(t, ctx, l, nodeSpecs(2)...)
	pods := addPodsPerNode(t, ctx, l, nodes, 2)
	for _, p := range pods {
		if !p.IP.Is6() || p.IP != p.IP6 || !lab.PodCIDR6.Contains(p.IP) {
			t.Fatalf("pod %s: address %s (IPv6 %s), want only one from %s", p.Key(), p.IP, p.IP6, lab.PodCIDR6)
		}
		out, err := p.Exec(ctx, "ip", "-4", "-o", "addr", "show", "scope", "global")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Fatalf("pod %s has IPv4 addresses: %q %v", p.Key(), out, err)
		}
	}
	requireReach(t, ctx, "pod to pod, IPv6", l.PodEndpoints6(), l.PodEndpoints6(), 45*time.Second)
	requireRoutes(t, ctx, l, 30*time.Second)
	for _, n := range nodes {
		rs, err := n.TabbyRoutes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 0 {
			t.Errorf("node %s: IPv4 tabby routes in an IPv6-only cluster: %v", n.Name, lab.RouteStrings(rs))
		}
	}
	requireNAT6(t, ctx, l, pods[0])
	// The nodes mesh over IPv6: tabby never saw their IPv4 addresses.
	for _, n := range nodes {
		var others []netip.Addr
		for _, o := range nodes {
			if o != n {
				others = append(others, o.IP6())
			}
		}
		if err := n.WaitPeers(ctx, 10*time.Second, others...); err != nil {
			t.Error(err)
		}
	}
}

// TestDualStackRouteReflectorsToR: nodes on two subnets with the mesh off, a route reflector
// on each, and the router between the subnets as the ToR (FRR with zebra) peering with both
// reflectors: over IPv4 with both families (MP-BGP), and with rr-b also over an IPv6 session
// (BGPPeer peerIP 2001:db8:180::1). The ToR learns every node's IPv6 blocks with the node's own
// IPv6 next hop, installs them, and so carries IPv6 pod traffic between the subnets natively;
// IPv4 crosses the same way.
func TestDualStackRouteReflectorsToR(t *testing.T) {
	l := startLab(t, lab.Options{Families: lab.DualStack, TwoSubnets: true})
	ctx := testCtx(t, 5*time.Minute)
	if err := l.UseRouteReflectors(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := addNodes(t, ctx, l,
		lab.NodeSpec{Name: "rr-a", Subnet: lab.A, RouteReflectorClusterID: rrClusterID},
		lab.NodeSpec{Name: "rr-b", Subnet: lab.B, RouteReflectorClusterID: rrClusterID},
		lab.NodeSpec{Name: "a-1", Subnet: lab.A},
		lab.NodeSpec{Name: "b-1", Subnet: lab.B},
	)
	if err := l.Router().StartFRR(ctx, lab.FRROptions{Zebra: true, Neighbors: []lab.BGPNeighbor{
		{Addr: nodes[0].IP(), ASN: v1.DefaultASNumber}, {Addr: nodes[1].IP(), ASN: v1.DefaultASNumber},
		{Addr: nodes[1].IP6(), ASN: v1.DefaultASNumber},
	}}); err != nil {
		t.Fatal(err)
	}
	// The reflectors peer with the ToR once it runs: a configured peer that is not there yet
	// holds a node's readiness for the in-sync grace, waiting for its End-of-RIB.
	for name, p := range map[string]v1.BGPPeerSpec{
		"tor-a":  {Node: "rr-a", PeerIP: lab.RouterA.String(), ASNumber: lab.DefaultToRASN, KeepOriginalNextHop: true},
		"tor-b":  {Node: "rr-b", PeerIP: lab.RouterB.String(), ASNumber: lab.DefaultToRASN, KeepOriginalNextHop: true},
		"tor-b6": {Node: "rr-b", PeerIP: "[" + lab.RouterB6.String() + "]:179", ASNumber: lab.DefaultToRASN, KeepOriginalNextHop: true},
	} {
		if _, err := l.Client.BGPPeers().Create(ctx, &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: p}); err != nil {
			t.Fatal(err)
		}
	}
	pods := addPodsPerNode(t, ctx, l, nodes, 1)

	// What the ToR installed: every node's IPv6 block via that node's IPv6 address.
	err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		blocks, err := l.Blocks(ctx)
		if err != nil {
			return err
		}
		rs, err := lab.Routes6(ctx, l.Router().NS, 0)
		if err != nil {
			return err
		}
		via := map[string]string{}
		for _, r := range rs {
			via[r.Dst] = r.Gateway
		}
		for node, bs := range blocks {
			for _, b := range bs {
				if !b.Addr().Is6() {
					continue
				}
				if want := l.Node(node).IP6().String(); via[b.String()] != want {
					return fmt.Errorf("ToR: %s of %s via %q, want via %s", b, node, via[b.String()], want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	requireReach(t, ctx, "pod to pod across the ToR, IPv6", l.PodEndpoints6(), l.PodEndpoints6(), 45*time.Second)
	requireReach(t, ctx, "pod to pod across the ToR, IPv4", podEndpoints(pods), podEndpoints(pods), 45*time.Second)
	// Clients hold sessions to the reflectors only, over IPv4, with IPv6 carried inside; rr-b
	// also has its IPv6 session to the ToR.
	for _, c := range nodes[2:] {
		if err := c.WaitPeers(ctx, 10*time.Second, ips(nodes[:2]...)...); err != nil {
			t.Error(err)
		}
	}
	if err := nodes[1].WaitPeers(ctx, 10*time.Second, nodes[0].IP(), nodes[2].IP(), nodes[3].IP(), lab.RouterB, lab.RouterB6); err != nil {
		t.Error(err)
	}
	if out, err := nodes[1].NodeStatus(ctx); err != nil || !strings.Contains(out, "IPv6 BGP status") || !strings.Contains(out, "ipv6 ") {
		t.Errorf("rr-b node status: %v\n%s", err, out)
	} else {
		t.Logf("rr-b:\n%s", out)
	}
}

// requireNAT6 checks that the pod reaches the IPv6 internet as its node: the router has no
// route to the pod range, so an answer at all proves the masquerade.
func requireNAT6(t *testing.T, ctx context.Context, l *lab.Lab, pod *lab.Pod) {
	t.Helper()
	rs, err := lab.Routes6(ctx, l.Router().NS, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if p, err := netip.ParsePrefix(r.Dst); err == nil && p.Overlaps(lab.PodCIDR6) {
			t.Fatalf("the router routes %s: the NAT check would prove nothing", r)
		}
	}
	inet := l.InternetEndpoint6()
	echo, err := lab.StartEcho(inet.NS, netip.AddrPortFrom(inet.IP, 7777))
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	err = lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		seen, err := lab.SourceSeenBy(ctx, pod.NS, echo.Addr)
		if err != nil {
			return fmt.Errorf("no answer from %s: %w", echo.Addr, err)
		}
		if seen != pod.Node.IP6() {
			return fmt.Errorf("the internet saw %s, want the node's %s", seen, pod.Node.IP6())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("IPv6 natOutgoing: %v", err)
	}
	t.Logf("IPv6 natOutgoing: %s reached %s as %s", pod.Key(), echo.Addr, pod.Node.IP6())
}
