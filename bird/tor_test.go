package bird

import (
	"context"
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// router is a plain GoBGP playing a ToR: it accepts and announces everything.
type router struct {
	srv  *server.BgpServer
	addr netip.Addr
}

func startRouter(t *testing.T, addr netip.Addr, asn uint32, neighbors map[netip.Addr]uint32, announce ...string) *router {
	t.Helper()
	return startRouterMode(t, addr, asn, neighbors, false, announce...)
}

// startRouterMode is startRouter with a choice of passive sessions: a test that resets a
// session from tabby's side wants the router to wait, since two GoBGPs both dialling after a
// reset can miss each other for many seconds (docs/architecture.md, "Restart versus death").
func startRouterMode(t *testing.T, addr netip.Addr, asn uint32, neighbors map[netip.Addr]uint32, passive bool, announce ...string) *router {
	t.Helper()
	netnstest.AddLoopback(t, addr)
	ctx := context.Background()
	s := server.NewBgpServer() // GoBGP discards its logs without a logger
	go s.Serve()
	t.Cleanup(s.Stop)
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: asn, RouterId: addr.String(), ListenPort: 179, ListenAddresses: []string{addr.String()}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range announce {
		pfx := netip.MustParsePrefix(p)
		nlri, _ := bgp.NewIPAddrPrefix(pfx)
		nh, _ := bgp.NewPathAttributeNextHop(addr)
		path := &apiutil.Path{Family: bgp.RF_IPv4_UC, Nlri: nlri, Attrs: []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), nh}}
		if _, err := s.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}}); err != nil {
			t.Fatal(err)
		}
	}
	for n, as := range neighbors {
		err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
			Conf:      &api.PeerConf{NeighborAddress: n.String(), PeerAsn: as},
			Transport: &api.Transport{LocalAddress: addr.String(), PassiveMode: passive},
			Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1}},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return &router{srv: s, addr: addr}
}

// received lists the prefixes the router accepted from neighbor, with their next hops.
func (r *router) received(t *testing.T, neighbor netip.Addr) map[netip.Prefix]string {
	t.Helper()
	out := map[netip.Prefix]string{}
	err := r.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: neighbor.String(), Family: bgp.RF_IPv4_UC}, func(n bgp.NLRI, paths []*apiutil.Path) {
		p := netip.MustParsePrefix(n.String())
		for _, path := range paths {
			for _, a := range path.Attrs {
				if nh, ok := a.(*bgp.PathAttributeNextHop); ok {
					out[p] = nh.Value.String()
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// attrs are the path attributes of the router's path to p from neighbor (none: no path).
func (r *router) attrs(t *testing.T, neighbor netip.Addr, p netip.Prefix) []bgp.PathAttributeInterface {
	t.Helper()
	var out []bgp.PathAttributeInterface
	err := r.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: neighbor.String(), Family: bgp.RF_IPv4_UC}, func(n bgp.NLRI, paths []*apiutil.Path) {
		if n.String() == p.String() && len(paths) > 0 {
			out = paths[0].Attrs
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (r *router) waitReceived(t *testing.T, neighbor netip.Addr, p netip.Prefix, nh string) map[netip.Prefix]string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := r.received(t, neighbor)
		if got[p] == nh {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("router %s: no %s via %s from %s: %v", r.addr, p, nh, neighbor, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExternalRouters: ToR routes inside a pool are learned; anything else, and any ToR route
// for one of our own prefixes, is refused; nothing learned from a ToR reaches the mesh or the
// other ToR; the ToRs learn the blocks with the node as next hop.
func TestExternalRouters(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(71, nil, ""), mkNode(72, nil, "")}
	tor1, tor2 := netip.MustParseAddr("198.51.100.251"), netip.MustParseAddr("198.51.100.252")
	n71 := addr4(all[0])
	torRoute, hostRoute := netip.MustParsePrefix("10.244.99.0/26"), netip.MustParsePrefix("172.16.0.0/16")
	bgpPeers := []v1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "tor1"}, Spec: v1.BGPPeerSpec{Node: "node71", PeerIP: tor1.String(), ASNumber: 65001}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tor2"}, Spec: v1.BGPPeerSpec{Node: "node71", PeerIP: tor2.String(), ASNumber: 65002, KeepOriginalNextHop: true}},
	}
	r1 := startRouter(t, tor1, 65001, map[netip.Addr]uint32{n71: 64512}, torRoute.String(), hostRoute.String(), blockOf(71).String())
	r2 := startRouter(t, tor2, 65002, map[netip.Addr]uint32{n71: 64512})
	a := startNode(t, all[0], all, func(b *Bird) { send(b, peerUpdates(bgpPeers...)...) })
	b := startNode(t, all[1], all, func(b *Bird) { send(b, peerUpdates(bgpPeers...)...) })

	a.routes.waitRoute(t, torRoute, tor1, 15*time.Second)
	b.routes.waitRoute(t, a.block, n71, 5*time.Second)
	got2 := r2.waitReceived(t, n71, a.block, n71.String()) // our own: next hop is us anyway
	// keepOriginalNextHop: the mesh route reaches tor2 with its owner as next hop; tor1 gets
	// this node as next hop.
	r2.waitReceived(t, n71, b.block, addr4(b.Node).String())
	r1.waitReceived(t, n71, a.block, n71.String())
	got1 := r1.waitReceived(t, n71, b.block, n71.String())
	for _, p := range []netip.Prefix{torRoute, hostRoute} {
		if nh, ok := got2[p]; ok {
			t.Errorf("ToR route %s leaked to the other ToR (next hop %s)", p, nh)
		}
	}
	if len(got1) != 2 {
		t.Errorf("tor1 received %v, want node71's and node72's blocks only", got1)
	}
	a.routes.mu.Lock()
	defer a.routes.mu.Unlock()
	if nh, ok := a.routes.routes[hostRoute]; ok {
		t.Errorf("route outside the pools accepted from a ToR: via %s", nh)
	}
	if nh, ok := a.routes.routes[a.block]; ok {
		t.Errorf("ToR overrode node71's own block: via %s", nh)
	}
	if _, ok := b.routes.get(torRoute); ok {
		t.Error("ToR route leaked into the mesh")
	}
	st := map[string]string{}
	for _, p := range a.bird.Peers() {
		st[p.Address] = p.Type + "/" + p.State
	}
	if st[tor1.String()] != "node-specific/established" {
		t.Errorf("status of tor1: %q", st[tor1.String()])
	}
}
