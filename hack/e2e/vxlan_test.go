package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// bothFamilies are the families of a dual-stack lab, in the order the checks run.
var bothFamilies = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}

// TestVXLANWithoutBGP: no BGP anywhere (every tabby-node --bgp=none), nodes on two subnets
// joined by a router that knows no pod routes, and both families' pools with vxlanMode
// CrossSubnet. Every node publishes a VTEP address from the pool and a MAC per family on its
// Node, has them on vxlan.tabby and vxlan-v6.tabby, and holds every other node's VTEP as a
// permanent neighbour and FDB entry. Pods reach each other in both families: on the same subnet
// natively (routes via the node's address on eth0; nothing arrives on the other node's VXLAN
// device), across subnets through VXLAN (routes via the VTEP; the router forwards UDP 4789
// between the nodes and not one bare pod packet). The pods' MTU leaves room for VXLAN: a DF
// ping at the pod's edge size crosses the subnets, one byte more does not leave the pod, and a
// bulk TCP transfer of full-size segments arrives intact, also from the internet through a
// node's DNAT and masquerade (a NodePort's path) onto VXLAN. Always then encapsulates the same
// subnet too. A removed node's VTEPs are released in IPAM and the others lose its neighbour and
// FDB entries and routes.
func TestVXLANWithoutBGP(t *testing.T) {
	l := startLab(t, lab.Options{Families: lab.DualStack, TwoSubnets: true, NoBGP: true, VXLAN: v1.VXLANModeCrossSubnet})
	ctx := testCtx(t, 3*time.Minute)
	nodes := addNodes(t, ctx, l,
		lab.NodeSpec{Name: "a-1", Subnet: lab.A}, lab.NodeSpec{Name: "a-2", Subnet: lab.A}, lab.NodeSpec{Name: "b-1", Subnet: lab.B})
	a2, b1 := nodes[1], nodes[2]
	pods := addPodsPerNode(t, ctx, l, nodes, 1)
	pa1, pa2, pb1 := pods[0], pods[1], pods[2]

	vteps := requireVTEPs(t, ctx, l)
	requireVXLANPeers(t, ctx, l, 30*time.Second)
	requireRoutes(t, ctx, l, 30*time.Second)
	requireReach(t, ctx, "pod to pod, IPv4", podEndpoints(pods), podEndpoints(pods), 45*time.Second)
	requireReach(t, ctx, "pod to pod, IPv6", l.PodEndpoints6(), l.PodEndpoints6(), 45*time.Second)

	rt := l.Router()
	var vxlanUDP, bare [2]*lab.ForwardCounter
	for i, f := range bothFamilies {
		pool := poolCIDR(f)
		var err error
		if vxlanUDP[i], err = rt.CountForwarded(ctx, f, "vxlan-"+f.String(), "-p", "udp", "--dport", fmt.Sprint(v1.DefaultVXLANPort)); err != nil {
			t.Fatal(err)
		}
		if bare[i], err = rt.CountForwarded(ctx, f, "bare-"+f.String(), "-s", pool.String()); err != nil {
			t.Fatal(err)
		}
	}
	const pings = 5
	for i, f := range bothFamilies {
		// Across subnets: every echo and reply crossed the router in UDP 4789, none bare.
		before := packets(t, ctx, vxlanUDP[i])
		pingN(t, ctx, pa1, pb1, f, pings)
		if got := packets(t, ctx, vxlanUDP[i]) - before; got < 2*pings {
			t.Errorf("CrossSubnet, %s: the router forwarded %d VXLAN packets for %d pings across subnets, want at least %d", f, got, pings, 2*pings)
		}
		if got := packets(t, ctx, bare[i]); got != 0 {
			t.Errorf("CrossSubnet, %s: the router forwarded %d bare pod packets", f, got)
		}
		// Same subnet: natively, so nothing arrives on a-2's VXLAN device.
		if got := vxlanRx(t, ctx, a2, f, func() { pingN(t, ctx, pa1, pa2, f, pings) }); got != 0 {
			t.Errorf("CrossSubnet, %s: %d packets came in on a-2's %s while a-1's pod pinged a-2's, want them native", f, got, lab.VXLANDevice(f))
		}
	}
	requireVXLANMTU(t, ctx, pa1, pb1)
	requireDNATAcrossVXLAN(t, ctx, l, nodes[0], pb1)

	t.Log("vxlanMode Always: the same subnet through VXLAN too")
	for _, name := range []string{lab.DefaultPoolName, lab.DefaultPool6Name} {
		setVXLANMode(t, ctx, l, name, v1.VXLANModeAlways)
	}
	requireRoutes(t, ctx, l, 30*time.Second)
	for i, f := range bothFamilies {
		var got uint64
		err := lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			if got = vxlanRx(t, ctx, a2, f, func() { pingN(t, ctx, pa1, pa2, f, pings) }); got < pings {
				return fmt.Errorf("Always, %s: %d packets came in on a-2's %s for %d pings from a-1's pod", f, got, lab.VXLANDevice(f), pings)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		pingN(t, ctx, pa2, pb1, f, pings)
		if got := packets(t, ctx, bare[i]); got != 0 {
			t.Errorf("Always, %s: the router forwarded %d bare pod packets", f, got)
		}
	}

	t.Log("b-1 removed: its VTEPs released, its entries and routes gone everywhere")
	gone := vteps[b1.Name]
	if err := l.RemoveNode(ctx, b1.Name); err != nil {
		t.Fatal(err)
	}
	for _, f := range bothFamilies {
		vtep := gone.VXLANTunnelAddr.Get(f)
		if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error { return allocated(ctx, l, vtep) }); err != nil {
			t.Errorf("b-1's %s VTEP: %v", f, err)
		}
	}
	requireVXLANPeers(t, ctx, l, 30*time.Second)
	requireRoutes(t, ctx, l, 30*time.Second)
	requireReach(t, ctx, "pod to pod after b-1 left, IPv4", podEndpoints(l.Pods()), podEndpoints(l.Pods()), 30*time.Second)
	requireReach(t, ctx, "pod to pod after b-1 left, IPv6", l.PodEndpoints6(), l.PodEndpoints6(), 30*time.Second)
}

// requireVTEPs checks every node's VTEP of each family, as its Node publishes it and as its
// device holds it: an address of the family's pool, a MAC no other node has, the device's
// MTU the uplink's less VXLAN's overhead, and no BGP. It returns the nodes as tabby reads them.
func requireVTEPs(t *testing.T, ctx context.Context, l *lab.Lab) map[string]model.Node {
	t.Helper()
	out := map[string]model.Node{}
	err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		macs := map[model.MAC]string{}
		for _, n := range l.Nodes() {
			m, err := l.NodeModel(ctx, n.Name)
			if err != nil {
				return err
			}
			if !m.NoBGP {
				return fmt.Errorf("node %s does not say it runs without BGP (%s)", n.Name, v1.AnnotationNoBGP)
			}
			for _, f := range bothFamilies {
				pool := poolCIDR(f)
				vtep, mac := m.VXLANTunnelAddr.Get(f), m.VXLANMAC.Get(f)
				if !pool.Contains(vtep) || mac.IsZero() {
					return fmt.Errorf("node %s: %s VTEP %s, MAC %s on its Node, want an address of %s and a MAC", n.Name, f, vtep, mac, pool)
				}
				if other, dup := macs[mac]; dup {
					return lab.Stop(fmt.Errorf("nodes %s and %s have the same VXLAN MAC %s", other, n.Name, mac))
				}
				macs[mac] = n.Name
				dev, err := lab.Link(ctx, n.NS, lab.VXLANDevice(f))
				if err != nil {
					return err
				}
				wantMTU := 1500 - map[ipfamily.Family]int{ipfamily.IPv4: v1.VXLANOverhead, ipfamily.IPv6: v1.VXLANOverheadIPv6}[f]
				if dev.MAC != mac.String() || !slices.Equal(dev.Addrs, []netip.Addr{vtep}) || dev.MTU != wantMTU {
					return fmt.Errorf("node %s: %s has MAC %s, addresses %v, MTU %d; want %s, [%s], %d", n.Name, lab.VXLANDevice(f), dev.MAC, dev.Addrs, dev.MTU, mac, vtep, wantMTU)
				}
			}
			out[n.Name] = m
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range out {
		t.Logf("%s: VTEP %s (MAC %s), %s (MAC %s)", name, m.VXLANTunnelAddr.Get(ipfamily.IPv4), m.VXLANMAC.Get(ipfamily.IPv4), m.VXLANTunnelAddr.Get(ipfamily.IPv6), m.VXLANMAC.Get(ipfamily.IPv6))
	}
	return out
}

// requireVXLANPeers waits until every node's VXLAN devices hold exactly the other nodes'
// VTEPs: a permanent neighbour entry (VTEP address → MAC) and an FDB entry (MAC → the node's
// underlay address of the family) for each, nothing else.
func requireVXLANPeers(t *testing.T, ctx context.Context, l *lab.Lab, timeout time.Duration) {
	t.Helper()
	err := lab.Eventually(ctx, timeout, func(ctx context.Context) error {
		models := map[string]model.Node{}
		for _, n := range l.Nodes() {
			m, err := l.NodeModel(ctx, n.Name)
			if err != nil {
				return err
			}
			models[n.Name] = m
		}
		for _, n := range l.Nodes() {
			for _, f := range bothFamilies {
				want := lab.VXLANEntries{Neigh: map[netip.Addr]string{}, FDB: map[string]netip.Addr{}}
				for _, o := range l.Nodes() {
					if o == n {
						continue
					}
					m := models[o.Name]
					underlay := map[ipfamily.Family]netip.Addr{ipfamily.IPv4: o.IP(), ipfamily.IPv6: o.IP6()}[f]
					want.Neigh[m.VXLANTunnelAddr.Get(f)] = m.VXLANMAC.Get(f).String()
					want.FDB[m.VXLANMAC.Get(f).String()] = underlay
				}
				got, err := n.VXLANEntries(ctx, f)
				if err != nil {
					return err
				}
				if !maps.Equal(got.Neigh, want.Neigh) || !maps.Equal(got.FDB, want.FDB) {
					return fmt.Errorf("node %s, %s: entries %v, want %v", n.Name, lab.VXLANDevice(f), got, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// requireVXLANMTU checks, from a pod to a pod on another subnet, that the pod's MTU leaves room
// for VXLAN over IPv6 (the largest overhead of its pools), that a DF ping of the pod's edge size
// crosses in both families while one byte more does not leave the pod, and that a bulk transfer
// of full-size TCP segments arrives intact.
func requireVXLANMTU(t *testing.T, ctx context.Context, from, to *lab.Pod) {
	t.Helper()
	link, err := lab.Link(ctx, from.NS, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if want := 1500 - v1.VXLANOverheadIPv6; link.MTU != want {
		t.Fatalf("pod %s: MTU %d, want %d (the uplink's less VXLAN over IPv6)", from.Key(), link.MTU, want)
	}
	for _, f := range bothFamilies {
		dst := podAddr(to, f)
		ipHeader := map[ipfamily.Family]int{ipfamily.IPv4: 20, ipfamily.IPv6: 40}[f]
		edge := link.MTU - ipHeader - 8
		err := lab.Eventually(ctx, 10*time.Second, func(ctx context.Context) error { return lab.PingDF(ctx, from.NS, dst, edge) })
		if err != nil {
			t.Errorf("%s: DF ping of %d bytes from %s to %s: %v", f, edge, from.Key(), dst, err)
		}
		if err := lab.PingDF(ctx, from.NS, dst, edge+1); err == nil {
			t.Errorf("%s: a DF ping of %d bytes, one over the pod's MTU, got through from %s to %s", f, edge+1, from.Key(), dst)
		}
		tr, err := lab.SendTCP(ctx, from.NS, to.NS, netip.AddrPortFrom(dst, 5201), lab.TransferOptions{Bytes: 32 << 20, Verify: true})
		if err != nil {
			t.Fatalf("%s: bulk TCP from %s to %s: %v", f, from.Key(), dst, err)
		}
		// The segments were full-size: the MSS is the pod's MTU less the IP and TCP headers and
		// the timestamps option Linux puts on every segment.
		if want := link.MTU - ipHeader - 20 - 12; tr.MSS != want {
			t.Errorf("%s: bulk TCP from %s to %s used MSS %d, want %d", f, from.Key(), dst, tr.MSS, want)
		}
		t.Logf("%s: DF ping of %d bytes crosses, %d does not; bulk TCP across subnets: %s", f, edge, edge+1, tr)
	}
}

// requireDNATAcrossVXLAN sends a bulk TCP transfer from the internet host to a port of node n
// that n translates to a pod on another subnet and masquerades, as kube-proxy does for a
// NodePort: the path on which NAT once left the inner checksums of VXLAN packets wrong (Linux
// before 5.7, with the device's checksum offload on). The stream must arrive whole and intact.
func requireDNATAcrossVXLAN(t *testing.T, ctx context.Context, l *lab.Lab, n *lab.Node, pod *lab.Pod) {
	t.Helper()
	inet := l.InternetEndpoint()
	for _, f := range bothFamilies {
		dst := netip.AddrPortFrom(podAddr(pod, f), 5201)
		via := netip.AddrPortFrom(n.IP(), 30080)
		inetNS, from := inet.NS, inet.IP
		if f == ipfamily.IPv6 {
			via = netip.AddrPortFrom(n.IP6(), 30080)
			from = l.InternetEndpoint6().IP
		}
		ipt := f.IPTablesCommand()
		for _, rule := range [][]string{
			{ipt, "-w", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "-d", via.Addr().String(), "--dport", "30080", "-j", "DNAT", "--to-destination", dst.String()},
			{ipt, "-w", "-t", "nat", "-A", "POSTROUTING", "-p", "tcp", "-s", from.String(), "-d", dst.Addr().String(), "--dport", "5201", "-j", "MASQUERADE"},
		} {
			if out, err := n.Exec(ctx, rule...); err != nil {
				t.Fatalf("%s: %v: %s", n.Name, err, out)
			}
		}
		tr, err := lab.SendTCP(ctx, inetNS, pod.NS, dst, lab.TransferOptions{Bytes: 32 << 20, Verify: true, Via: via})
		if err != nil {
			t.Fatalf("%s: bulk TCP from the internet to %s, translated to %s: %v", f, via, dst, err)
		}
		t.Logf("%s: from the internet to %s, translated and masqueraded by %s to %s over VXLAN: %s", f, via, n.Name, dst, tr)
	}
}

// vxlanRx is how many packets came in on the node's VXLAN device of the family while do ran.
func vxlanRx(t *testing.T, ctx context.Context, n *lab.Node, f ipfamily.Family, do func()) uint64 {
	t.Helper()
	before, err := lab.Link(ctx, n.NS, lab.VXLANDevice(f))
	if err != nil {
		t.Fatal(err)
	}
	do()
	after, err := lab.Link(ctx, n.NS, lab.VXLANDevice(f))
	if err != nil {
		t.Fatal(err)
	}
	return after.RxPackets - before.RxPackets
}

// pingN pings n times from one pod to another at its address of the family; every echo must be
// answered.
func pingN(t *testing.T, ctx context.Context, from, to *lab.Pod, f ipfamily.Family, n int) {
	t.Helper()
	dst := podAddr(to, f)
	for range n {
		if err := lab.Ping(ctx, from.NS, dst); err != nil {
			t.Fatalf("ping %s from %s: %v", dst, from.Key(), err)
		}
	}
}

func packets(t *testing.T, ctx context.Context, c *lab.ForwardCounter) uint64 {
	t.Helper()
	n, err := c.Packets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func setVXLANMode(t *testing.T, ctx context.Context, l *lab.Lab, pool string, mode v1.VXLANMode) {
	t.Helper()
	err := lab.Eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		p, err := l.Client.IPPools().Get(ctx, pool)
		if err != nil {
			return err
		}
		p.Spec.VXLANMode = mode
		_, err = l.Client.IPPools().Update(ctx, p)
		return err
	})
	if err != nil {
		t.Fatalf("set %s's vxlanMode to %s: %v", pool, mode, err)
	}
}

func podAddr(p *lab.Pod, f ipfamily.Family) netip.Addr {
	if f == ipfamily.IPv6 {
		return p.IP6
	}
	return p.IP
}

func poolCIDR(f ipfamily.Family) netip.Prefix {
	if f == ipfamily.IPv6 {
		return lab.PodCIDR6
	}
	return lab.PodCIDR
}

// TestVXLANBesideBGP: a mixed cluster on one subnet: two nodes run BGP, one does not
// (--bgp=none). The chart's pool, routed natively, selects the BGP nodes; a pool with vxlanMode
// Always selects every node. Pods of the native pool reach each other over what BGP carries;
// pods of the VXLAN pool on all three nodes reach each other through VXLAN, every node's route
// to them via the VTEP whether or not BGP also carries them; the BGP nodes hold a session with
// each other and none with the node without BGP.
func TestVXLANBesideBGP(t *testing.T) {
	l := startLab(t, lab.Options{HelmSet: []string{"ipPool.cidr=10.244.0.0/17"}})
	ctx := testCtx(t, 3*time.Minute)
	vxlan := netip.MustParsePrefix("10.244.128.0/17")
	err := lab.Eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		p, err := l.Client.IPPools().Get(ctx, lab.DefaultPoolName)
		if err != nil {
			return err
		}
		p.Spec.NodeSelector = "routing == 'bgp'"
		_, err = l.Client.IPPools().Update(ctx, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client.IPPools().Create(ctx, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "vxlan"}, Spec: v1.IPPoolSpec{CIDR: vxlan.String(), VXLANMode: v1.VXLANModeAlways}}); err != nil {
		t.Fatal(err)
	}
	bgp := map[string]string{"routing": "bgp"}
	nodes := addNodes(t, ctx, l,
		lab.NodeSpec{Name: "bgp-1", Labels: bgp}, lab.NodeSpec{Name: "bgp-2", Labels: bgp}, lab.NodeSpec{Name: "vx-1", NoBGP: true})
	inPool := func(name string) map[string]string {
		return map[string]string{v1.AnnotationIPv4Pools: `["` + name + `"]`}
	}
	pods, err := l.AddPods(ctx,
		lab.PodSpec{Name: "native-1", Node: "bgp-1", Annotations: inPool(lab.DefaultPoolName)},
		lab.PodSpec{Name: "native-2", Node: "bgp-2", Annotations: inPool(lab.DefaultPoolName)},
		lab.PodSpec{Name: "vxlan-1", Node: "bgp-1", Annotations: inPool("vxlan")},
		lab.PodSpec{Name: "vxlan-2", Node: "bgp-2", Annotations: inPool("vxlan")},
		// The only pool that selects vx-1.
		lab.PodSpec{Name: "vxlan-3", Node: "vx-1"})
	if err != nil {
		t.Fatalf("add pods: %v", err)
	}
	native, inVXLAN := pods[:2], pods[2:]
	for _, p := range inVXLAN {
		if !vxlan.Contains(p.IP) {
			t.Fatalf("pod %s has %s, not an address of the VXLAN pool %s", p.Key(), p.IP, vxlan)
		}
	}
	requireRoutes(t, ctx, l, 30*time.Second)
	requireReach(t, ctx, "native pods over BGP", podEndpoints(native), podEndpoints(native), 45*time.Second)
	requireReach(t, ctx, "VXLAN pods, with and without BGP", podEndpoints(inVXLAN), podEndpoints(inVXLAN), 45*time.Second)
	for i, n := range nodes[:2] {
		other := nodes[1-i]
		if err := n.WaitPeers(ctx, 30*time.Second, other.IP()); err != nil {
			t.Error(err)
		}
		peers, err := n.Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			if p.Address == nodes[2].IP().String() {
				t.Errorf("node %s has a session to %s, which runs without BGP: %+v", n.Name, nodes[2].Name, p)
			}
		}
	}
}
