package bird

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// TestServiceAdvertisement: the BGPConfiguration's serviceClusterIPs and serviceExternalIPs are
// announced by every node to the external routers (the ToR gets one path per node: ECMP), never
// to another node, and never learned from anyone, even when a range lies inside a pool; removing
// a range withdraws it.
func TestServiceAdvertisement(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(81, nil, ""), mkNode(82, nil, "")}
	tor := netip.MustParseAddr("198.51.100.253")
	n81, n82 := addr4(all[0]), addr4(all[1])
	// A cluster IP range outside the pools, and external IPs inside one.
	clusterIPs, externalIPs := netip.MustParsePrefix("203.0.113.192/27"), netip.MustParsePrefix("10.244.250.0/24")
	conf := func(external bool) *v1.BGPConfiguration {
		c := &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: v1.BGPConfigurationSpec{ServiceClusterIPs: []v1.ServiceCIDR{{CIDR: clusterIPs.String()}}}}
		if external {
			c.Spec.ServiceExternalIPs = []v1.ServiceCIDR{{CIDR: externalIPs.String()}}
		}
		return c
	}
	peers := []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: tor.String(), ASNumber: 65003}}}
	// The ToR announces one external IP (a more specific route inside the range, as a
	// misconfigured router might): it must not pull that service's traffic off the nodes.
	hijack := netip.MustParsePrefix("10.244.250.5/32")
	r := startRouter(t, tor, 65003, map[netip.Addr]uint32{n81: 64512, n82: 64512}, hijack.String())
	// node82 has not seen the configuration yet (a rollout): it must not get the services from
	// node81, where it would route them away (the external IPs lie in a pool).
	a := startNode(t, all[0], all, func(b *Bird) { send(b, peerUpdates(peers...)...); send(b, confUpdate(conf(true))) })
	b := startNode(t, all[1], all, func(b *Bird) { send(b, peerUpdates(peers...)...) })
	for _, p := range []netip.Prefix{clusterIPs, externalIPs} {
		r.waitReceived(t, n81, p, n81.String())
	}
	b.routes.waitRoute(t, a.block, n81, 15*time.Second)
	a.routes.waitRoute(t, b.block, n82, 15*time.Second)
	r.waitReceived(t, n82, a.block, n82.String())
	for _, p := range []netip.Prefix{clusterIPs, externalIPs, hijack} {
		if nh, ok := a.routes.get(p); ok {
			t.Errorf("node81 learned service route %s via %s", p, nh)
		}
	}
	for _, p := range []netip.Prefix{clusterIPs, externalIPs} {
		if nh, ok := b.routes.get(p); ok {
			t.Errorf("node82 learned service range %s via %s", p, nh)
		}
	}
	if got := r.received(t, n82); got[clusterIPs] != "" || got[externalIPs] != "" {
		t.Fatalf("node82 passed node81's services on to the ToR: %v", got)
	}

	// Every node announces them: one path per node at the ToR; the ToR's /32 that node82 had
	// learned while it did not know the range is dropped.
	send(b.bird, confUpdate(conf(true)))
	for _, p := range []netip.Prefix{clusterIPs, externalIPs} {
		r.waitReceived(t, n82, p, n82.String())
	}
	b.routes.wait(t, "the ToR's route inside the service range withdrawn", 15*time.Second, func(m map[netip.Prefix]netip.Addr) bool {
		_, ok := m[hijack]
		return !ok
	})

	// External IPs no longer advertised: gone from the ToR, the cluster IPs stay.
	send(a.bird, confUpdate(conf(false)))
	send(b.bird, confUpdate(conf(false)))
	deadline := time.Now().Add(15 * time.Second)
	for {
		got81, got82 := r.received(t, n81), r.received(t, n82)
		_, has81 := got81[externalIPs]
		_, has82 := got82[externalIPs]
		if !has81 && !has82 {
			if got81[clusterIPs] != n81.String() || got82[clusterIPs] != n82.String() {
				t.Fatalf("cluster IPs lost with the external IPs: %v %v", got81, got82)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("external IPs still advertised 15 s after their removal: %v %v", got81, got82)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServiceAdvertisementIPv6: an IPv6 service CIDR is announced to an external router like an
// IPv4 one, with the node's IPv6 address as next hop, over the IPv4 session (MP-BGP) or an IPv6
// one; removed from the configuration, it is withdrawn and the IPv4 one stays.
func TestServiceAdvertisementIPv6(t *testing.T) {
	netnstest.Require(t)
	tor, nodeAddr := netip.MustParseAddr("198.51.100.244"), netip.MustParseAddr("198.51.100.88")
	tor6, node6 := netip.MustParseAddr("2001:db8:100::244"), netip.MustParsePrefix("2001:db8:100::88/64")
	svc4, svc6 := netip.MustParsePrefix("203.0.113.192/27"), netip.MustParsePrefix("2001:db8:96::/112")
	conf := func(svc ...netip.Prefix) *v1.BGPConfiguration {
		c := &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		for _, p := range svc {
			c.Spec.ServiceClusterIPs = append(c.Spec.ServiceClusterIPs, v1.ServiceCIDR{CIDR: p.String()})
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		peerIP netip.Addr
		tor    birdToR
	}{
		{"MP-BGP over the IPv4 session", tor, birdToR{Node: nodeAddr, IPv6: true, Addr6: tor6}},
		{"IPv6 session", tor6, birdToR{Addr6: tor6, Node6: node6.Addr()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := torNamespace6(t, nodeAddr, tor, node6, tor6)
			r := tc.tor
			r.Addr, r.AS, r.NodeAS = tor, 65000, v1.DefaultASNumber
			birdc := r.start(t, ns)
			n := withIPv6Address(mkNode(88, nil, ""), node6)
			a := startNode(t, n, []model.Node{n}, func(b *Bird) {
				send(b, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: tc.peerIP.String(), ASNumber: 65000}})...)
				send(b, poolUpdate(pool6))
				send(b, confUpdate(conf(svc4, svc6)))
			})
			a.waitPeer(t, tc.peerIP, "established", 30*time.Second)
			waitBIRDRoute(t, birdc, "", svc6, node6.Addr())
			over4 := tc.peerIP.Is4()
			if over4 {
				waitBIRDRoute(t, birdc, "", svc4, nodeAddr)
			}

			send(a.bird, confUpdate(conf(svc4)))
			deadline := time.Now().Add(10 * time.Second)
			for {
				out := birdc("show", "route", svc6.String())
				if !strings.Contains(out, svc6.String()) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("BIRD2 still has %s 10 s after its removal:\n%s", svc6, out)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if over4 {
				waitBIRDRoute(t, birdc, "", svc4, nodeAddr)
			}
		})
	}
}

// TestServiceRoutesFollowEndpoints: a LoadBalancer address is announced as a /32 to the ToR by
// every node while its Service's externalTrafficPolicy is Cluster, and only by the nodes with a
// ready endpoint while it is Local: the route moves with the endpoint and goes with the
// Service. No node passes it to another or learns it.
func TestServiceRoutesFollowEndpoints(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(141, nil, ""), mkNode(142, nil, "")}
	tor := netip.MustParseAddr("198.51.100.230")
	n141, n142 := addr4(all[0]), addr4(all[1])
	lbPool := model.Pool{Name: "lb", CIDR: netip.MustParsePrefix("203.0.113.160/28"), Uses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}
	lbIP := netip.MustParseAddr("203.0.113.161")
	host := netip.PrefixFrom(lbIP, 32)
	svc := model.Service{Key: "default/web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, LoadBalancerIPs: []netip.Addr{lbIP}}
	peers := []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: tor.String(), ASNumber: 65003}}}
	r := startRouter(t, tor, 65003, map[netip.Addr]uint32{n141: 64512, n142: 64512})
	setup := func(b *Bird) {
		send(b, peerUpdates(peers...)...)
		send(b, model.LoadBalancerPoolUpdate{Pool: lbPool}, model.ServiceUpdate{Service: svc})
	}
	a := startNode(t, all[0], all, setup)
	b := startNode(t, all[1], all, setup)

	// Cluster: both nodes announce it, the ToR has a path over each.
	r.waitReceived(t, n141, host, n141.String())
	r.waitReceived(t, n142, host, n142.String())
	b.routes.waitRoute(t, a.block, n141, 15*time.Second)
	announced := func(from netip.Addr) bool { _, ok := r.received(t, from)[host]; return ok }
	waitAnnounced := func(what string, want141, want142 bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for announced(n141) != want141 || announced(n142) != want142 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the ToR has %s from node141 %v (want %v), from node142 %v (want %v)", what, host, announced(n141), want141, announced(n142), want142)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Local, the endpoint on node141 alone.
	local := svc
	local.Local = true
	here := local
	here.LocalEndpoint = true
	send(a.bird, model.ServiceUpdate{Service: here})
	send(b.bird, model.ServiceUpdate{Service: local})
	waitAnnounced("Local, endpoint on node141", true, false)
	// The status says why node142 holds it back.
	if st, err := b.bird.Status(context.Background()); err != nil || len(st.Services) != 1 || st.Services[0].Reason != reasonNoEndpoint || st.ServiceRoutes != 0 {
		t.Fatalf("node142's status: %+v, %v", st, err)
	}
	// The endpoint moves to node142.
	send(b.bird, model.ServiceUpdate{Service: here})
	send(a.bird, model.ServiceUpdate{Service: local})
	waitAnnounced("Local, endpoint moved to node142", false, true)
	// Back to Cluster, then the Service goes.
	send(a.bird, model.ServiceUpdate{Service: svc})
	send(b.bird, model.ServiceUpdate{Service: svc})
	waitAnnounced("Cluster again", true, true)
	for _, n := range []*testNode{a, b} {
		if nh, ok := n.routes.get(host); ok {
			t.Errorf("a node learned the Service's route via %s", nh)
		}
	}
	send(a.bird, model.ServiceRemove{Key: svc.Key})
	send(b.bird, model.ServiceRemove{Key: svc.Key})
	waitAnnounced("Service removed", false, false)
	if st, err := a.bird.Status(context.Background()); err != nil || st.ServiceRoutes != 0 {
		t.Fatalf("status after the removal: %+v, %v", st, err)
	}
}

// TestServiceAdvertisementAttributes: prefixAdvertisements steer a Service's route at the ToRs:
// its communities reach every router, its LOCAL_PREF the routers of the cluster's AS alone
// (eBGP carries none).
func TestServiceAdvertisementAttributes(t *testing.T) {
	netnstest.Require(t)
	n := mkNode(143, nil, "")
	ibgp, ebgp := netip.MustParseAddr("198.51.100.228"), netip.MustParseAddr("198.51.100.229")
	node := addr4(n)
	lbPool := model.Pool{Name: "lb", CIDR: netip.MustParsePrefix("203.0.113.144/28"), Uses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}
	lbIP := netip.MustParseAddr("203.0.113.145")
	host := netip.PrefixFrom(lbIP, 32)
	pref := uint32(200)
	conf := &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{
		PrefixAdvertisements: []v1.PrefixAdvertisement{{CIDR: lbPool.CIDR.String(), Communities: []v1.CommunityRef{"65001:100"}, LocalPref: &pref}}}}
	rI := startRouter(t, ibgp, v1.DefaultASNumber, map[netip.Addr]uint32{node: v1.DefaultASNumber})
	rE := startRouter(t, ebgp, 65004, map[netip.Addr]uint32{node: v1.DefaultASNumber})
	startNode(t, n, []model.Node{n}, func(b *Bird) {
		send(b, peerUpdates(
			v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-ibgp"}, Spec: v1.BGPPeerSpec{PeerIP: ibgp.String(), ASNumber: v1.DefaultASNumber}},
			v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-ebgp"}, Spec: v1.BGPPeerSpec{PeerIP: ebgp.String(), ASNumber: 65004}})...)
		send(b, confUpdate(conf), model.LoadBalancerPoolUpdate{Pool: lbPool},
			model.ServiceUpdate{Service: model.Service{Key: "default/web", LoadBalancerIPs: []netip.Addr{lbIP}}})
	})
	for _, tc := range []struct {
		r         *router
		localPref string
	}{{rI, "200"}, {rE, "none"}} {
		tc.r.waitReceived(t, node, host, node.String())
		community, localPref := "none", "none"
		for _, a := range tc.r.attrs(t, node, host) {
			switch a := a.(type) {
			case *bgp.PathAttributeCommunities:
				community = strings.TrimSuffix(strings.TrimPrefix(a.String(), "{Communities: "), "}")
			case *bgp.PathAttributeLocalPref:
				localPref = fmt.Sprint(a.Value)
			}
		}
		if community != "65001:100" || localPref != tc.localPref {
			t.Errorf("router %s: community %s, LOCAL_PREF %s; want 65001:100 and %s", tc.r.addr, community, localPref, tc.localPref)
		}
	}
}
