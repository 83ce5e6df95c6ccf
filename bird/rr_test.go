package bird

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

var rrLabel = map[string]string{"tabby.dev/route-reflector": "true"}

// calicoRRPeers is how Calico users write a route-reflector topology.
func calicoRRPeers() []v1.BGPPeer {
	return []v1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "peer-with-rrs"}, Spec: v1.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "has(tabby.dev/route-reflector)"}},
	}
}

func meshOff() *v1.BGPConfiguration {
	f := false
	return &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{NodeToNodeMeshEnabled: &f}}
}

// gobgpPaths lists a node's paths for prefix (IPv4 or IPv6) through GoBGP's own API (served on
// loopback only).
func gobgpPaths(t *testing.T, apiAddr string, prefix netip.Prefix) []*api.Path {
	t.Helper()
	return listPaths(t, apiAddr, api.TableType_TABLE_TYPE_GLOBAL, "", prefix)
}

// gobgpAdjIn lists the paths for prefix a node received from neighbor, before its import policy.
func gobgpAdjIn(t *testing.T, apiAddr, neighbor string, prefix netip.Prefix) []*api.Path {
	t.Helper()
	return listPaths(t, apiAddr, api.TableType_TABLE_TYPE_ADJ_IN, neighbor, prefix)
}

func listPaths(t *testing.T, apiAddr string, table api.TableType, neighbor string, prefix netip.Prefix) []*api.Path {
	t.Helper()
	conn, err := grpc.NewClient(apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	family := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if prefix.Addr().Is6() {
		family.Afi = api.Family_AFI_IP6
	}
	stream, err := api.NewGoBgpServiceClient(conn).ListPath(ctx, &api.ListPathRequest{
		TableType: table,
		Name:      neighbor,
		Family:    family,
		Prefixes:  []*api.TableLookupPrefix{{Prefix: prefix.String()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*api.Path
	for {
		r, err := stream.Recv()
		if err != nil {
			break
		}
		out = append(out, r.Destination.Paths...)
	}
	return out
}

func attrs(p *api.Path) (originator string, clusters []string, nextHop string) {
	for _, a := range p.Pattrs {
		switch {
		case a.GetOriginatorId() != nil:
			originator = a.GetOriginatorId().GetId()
		case a.GetClusterList() != nil:
			clusters = a.GetClusterList().GetIds()
		case a.GetNextHop() != nil:
			nextHop = a.GetNextHop().GetNextHop()
		case len(a.GetMpReach().GetNextHops()) > 0: // IPv6: the global next hop first
			nextHop = a.GetMpReach().GetNextHops()[0]
		}
	}
	return
}

// TestRouteReflectors: two RRs (one cluster) and clients, mesh off, Calico-style BGPPeer.
// Reflected routes keep the owner as next hop and carry ORIGINATOR_ID and CLUSTER_LIST; a client
// joining later learns everything and is learned everywhere, with nothing restarted.
func TestRouteReflectors(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{
		mkNode(101, rrLabel, "244.0.0.1"), mkNode(102, rrLabel, "244.0.0.1"),
		mkNode(11, nil, ""), mkNode(12, nil, ""), mkNode(13, nil, ""),
	}
	setup := func(b *Bird) { send(b, confUpdate(meshOff())); send(b, peerUpdates(calicoRRPeers()...)...) }
	var tns []*testNode
	for i, n := range all {
		cfg := func(c *Config) {}
		if n.Name == "node11" {
			cfg = func(c *Config) { c.GoBGPAPI = "127.0.0.1:50151" }
		}
		_ = i
		tns = append(tns, startNode(t, n, all, setup, cfg))
	}
	clients := tns[2:]
	for _, a := range clients {
		for _, b := range clients {
			if a != b {
				a.routes.waitRoute(t, b.block, addr4(b.Node), 15*time.Second)
			}
		}
	}
	// The RRs' own blocks reach the clients too.
	clients[0].routes.waitRoute(t, tns[0].block, addr4(tns[0].Node), 5*time.Second)

	// Until a reflector has node12's route first hand (its session with node12 may come up
	// after the sibling's), it passes on the sibling's copy, cluster list [244.0.0.1 sibling]:
	// wait for the settled state, in which each reflector passes on its own.
	deadline := time.Now().Add(10 * time.Second)
	for {
		paths := gobgpPaths(t, "127.0.0.1:50151", clients[1].block)
		var bad []string
		for _, p := range paths {
			orig, clusters, nh := attrs(p)
			if orig != addr4(clients[1].Node).String() || fmt.Sprint(clusters) != "[244.0.0.1]" || nh != addr4(clients[1].Node).String() {
				bad = append(bad, fmt.Sprintf("reflected path from %s: originator %q cluster list %v next hop %q", p.NeighborIp, orig, clusters, nh))
			}
		}
		if len(paths) == 2 && len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node11's paths for node12's block after 10s: %d paths, %v; want one from each reflector, originator and next hop %s, cluster list [244.0.0.1]",
				len(paths), bad, addr4(clients[1].Node))
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := map[string]string{}
	for _, p := range clients[0].bird.Peers() {
		st[p.Address] = p.Type
	}
	if st["198.51.100.101"] != "route-reflector" || len(st) != 2 {
		t.Errorf("client's sessions: %v, want the two route reflectors only", st)
	}
	for _, p := range tns[0].bird.Peers() {
		if p.Node == "node11" && p.Type != "route-reflector-client" {
			t.Errorf("RR's session with node11 has type %q", p.Type)
		}
	}

	// A client joins late.
	n14 := mkNode(14, nil, "")
	all14 := append(all[:len(all):len(all)], n14)
	for _, tn := range tns {
		send(tn.bird, model.NodeUpdate{Node: n14})
	}
	t14 := startNode(t, n14, all14, setup)
	for _, c := range clients {
		t14.routes.waitRoute(t, c.block, addr4(c.Node), 15*time.Second)
		c.routes.waitRoute(t, t14.block, addr4(t14.Node), 15*time.Second)
	}
}

// TestRouteReflectorGracefulStop: a reflector's graceful stop ends every session with the
// restart NOTIFICATION and nothing before it: its clients, which have each other's blocks
// from it alone, keep them all, with no update. (Reset one after the other, each session that
// ended first made GoBGP withdraw that client's block from the clients still up.)
func TestRouteReflectorGracefulStop(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(111, rrLabel, "244.0.0.1")}
	for i := 31; i < 39; i++ {
		all = append(all, mkNode(i, nil, ""))
	}
	setup := func(b *Bird) { send(b, confUpdate(meshOff())); send(b, peerUpdates(calicoRRPeers()...)...) }
	rr := startNode(t, all[0], all, setup)
	var clients []*testNode
	for _, n := range all[1:] {
		clients = append(clients, startNode(t, n, all, setup))
	}
	for _, a := range clients {
		for _, b := range clients {
			if a != b {
				a.routes.waitRoute(t, b.block, addr4(b.Node), 15*time.Second)
			}
		}
	}
	before := make([]int, len(clients))
	for i, c := range clients {
		c.routes.mu.Lock()
		before[i] = c.routes.updates
		c.routes.mu.Unlock()
	}
	rr.stop(t, true)
	for _, c := range clients {
		c.waitPeer(t, addr4(rr.Node), "down", 5*time.Second)
	}
	for i, c := range clients {
		c.routes.mu.Lock()
		updates, routes := c.routes.updates-before[i], fmt.Sprint(c.routes.routes)
		c.routes.mu.Unlock()
		if updates != 0 {
			t.Errorf("%s: %d route updates across the reflector's graceful stop, want none; routes now %s", c.Name, updates, routes)
		}
	}
}
