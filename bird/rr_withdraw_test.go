package bird

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/bird/speaker"
)

// TestRouteReflectorsWithdraw: two reflectors of one cluster peering with each other, clients
// 11 and 12 peering with both, client 13 with rr1 only and client 14 with rr2 only (found by
// hack/bench/mesh: with the reflectors as plain mutual clients, each kept the other's reflected
// copy of a withdrawn client route for good, and so did every client). Prefixes added at a
// client are learned by every speaker, and once withdrawn they are gone from every speaker's
// RIB (GoBGP's own API) and from every OnRoute table.
func TestRouteReflectorsWithdraw(t *testing.T) {
	netnstest.Require(t)
	const rrKey = "tabby.dev/route-reflector"
	rr := func(site string) map[string]string { return map[string]string{rrKey: "true", "site": site} }
	all := []model.Node{
		mkNode(101, rr("a"), "244.0.0.1"), mkNode(102, rr("b"), "244.0.0.1"),
		mkNode(11, map[string]string{"dual": "true"}, ""), mkNode(12, map[string]string{"dual": "true"}, ""),
		mkNode(13, map[string]string{"site": "a"}, ""), mkNode(14, map[string]string{"site": "b"}, ""),
		// Above the reflectors' addresses: on router ID alone they would prefer each other's
		// copy of its routes to the client's own.
		mkNode(121, map[string]string{"dual": "true"}, ""),
	}
	bgpPeers := []v1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "rr-mesh"}, Spec: v1.BGPPeerSpec{NodeSelector: "has(" + rrKey + ")", PeerSelector: "has(" + rrKey + ")"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dual"}, Spec: v1.BGPPeerSpec{NodeSelector: "dual == 'true'", PeerSelector: "has(" + rrKey + ")"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "site-a"}, Spec: v1.BGPPeerSpec{NodeSelector: "site == 'a' && !has(" + rrKey + ")", PeerSelector: "site == 'a' && has(" + rrKey + ")"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "site-b"}, Spec: v1.BGPPeerSpec{NodeSelector: "site == 'b' && !has(" + rrKey + ")", PeerSelector: "site == 'b' && has(" + rrKey + ")"}},
	}
	setup := func(b *Bird) { send(b, confUpdate(meshOff())); send(b, peerUpdates(bgpPeers...)...) }
	var tns []*testNode
	apis := map[string]string{}
	for i, n := range all {
		api := fmt.Sprintf("127.0.0.1:%d", 50161+i)
		apis[n.Name] = api
		tns = append(tns, startNode(t, n, all, setup, func(c *Config) { c.GoBGPAPI = api }))
	}
	// Every block everywhere, the one-reflector clients' included, with the owner as next hop.
	for _, a := range tns {
		for _, b := range tns {
			if a != b {
				a.routes.waitRoute(t, b.block, addr4(b.Node), 15*time.Second)
			}
		}
	}

	rrs := tns[:2]
	for _, owner := range []*testNode{tns[2], tns[6], tns[4], tns[5]} { // dual-homed (2), rr1-only, rr2-only
		dual := owner.Labels["dual"] == "true"
		var i int
		fmt.Sscanf(addr4(owner.Node).String(), "198.51.100.%d", &i)
		var added []netip.Prefix
		for j := 0; j < 8; j++ {
			added = append(added, netip.MustParsePrefix(fmt.Sprintf("10.244.%d.%d/29", 100+i, 8*j)))
		}
		for _, p := range added {
			send(owner.bird, claim(p, owner.Name))
		}
		for _, tn := range tns {
			if tn == owner {
				continue
			}
			for _, p := range added {
				tn.routes.waitRoute(t, p, addr4(owner.Node), 15*time.Second)
			}
		}
		if owner == tns[5] {
			// Client 13 has client 14's routes from rr1, which has them from its sibling only:
			// they reach the client without the tag that marks a sibling's copy inside rr1
			// (as received: the client's import policy would remove it too).
			for _, p := range added {
				paths := gobgpAdjIn(t, apis[tns[4].Name], addr4(rrs[0].Node).String(), p)
				if len(paths) != 1 {
					t.Errorf("node13 received %d paths for %s from rr1, want 1", len(paths), p)
				}
				for _, path := range paths {
					if slices.Contains(communities(path), siblingTag) {
						t.Errorf("node13's path for %s from %s carries the sibling tag %s", p, path.NeighborIp, speaker.LearnedSiblingCommunity)
					}
				}
			}
		}
		if dual {
			// The case that stuck: each reflector holds the owner's path and its sibling's copy.
			for i, r := range rrs {
				sibling := addr4(rrs[1-i].Node).String()
				for _, p := range added {
					waitPaths(t, r.Name, apis[r.Name], p, func(paths []*api.Path) bool {
						return slices.ContainsFunc(paths, func(x *api.Path) bool { return x.NeighborIp == sibling })
					})
				}
			}
		}
		// What the one-reflector clients receive from their reflector while the routes go.
		var watches []*adjInWatch
		if dual {
			watches = []*adjInWatch{
				watchAdjIn(t, tns[4].Name, apis[tns[4].Name], addr4(rrs[0].Node).String(), added),
				watchAdjIn(t, tns[5].Name, apis[tns[5].Name], addr4(rrs[1].Node).String(), added),
			}
		}
		for _, p := range added {
			send(owner.bird, release(p))
		}
		for _, tn := range tns {
			for _, p := range added {
				tn.routes.waitGone(t, p, 15*time.Second)
			}
		}
		// One round: a reflector whose client withdrew a route withdraws it at once, and never
		// passes on its sibling's copy in between (that copy is about to be withdrawn too).
		for _, w := range watches {
			if got := w.announced(); len(got) > 0 {
				t.Errorf("%s: after %s withdrew its routes, %s still announced %v", w.node, owner.Name, w.neighbor, got)
			}
		}
		// OnRoute follows the best path; the RIBs must be empty too (a copy that is not best
		// would come back as soon as something else changed).
		for _, tn := range tns {
			for _, p := range added {
				waitPaths(t, tn.Name, apis[tn.Name], p, func(paths []*api.Path) bool { return len(paths) == 0 })
			}
		}
		// The owner's block is untouched.
		for _, tn := range tns {
			if tn != owner {
				tn.routes.waitRoute(t, owner.block, addr4(owner.Node), 5*time.Second)
			}
		}
	}
}

// siblingTag is speaker.LearnedSiblingCommunity as GoBGP's API shows it.
const siblingTag = 202

func communities(p *api.Path) []uint32 {
	for _, a := range p.Pattrs {
		if c := a.GetCommunities(); c != nil {
			return c.GetCommunities()
		}
	}
	return nil
}

// waitPaths polls a speaker's RIB for prefix until cond holds.
func waitPaths(t *testing.T, name, apiAddr string, prefix netip.Prefix, cond func([]*api.Path) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		paths := gobgpPaths(t, apiAddr, prefix)
		if cond(paths) {
			return
		}
		if time.Now().After(deadline) {
			var held []string
			for _, p := range paths {
				orig, clusters, nh := attrs(p)
				held = append(held, fmt.Sprintf("from %s (originator %s, cluster list %v, next hop %s, best %v)", p.NeighborIp, orig, clusters, nh, p.Best))
			}
			t.Fatalf("%s: %s paths after 10s: %v", name, prefix, held)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adjInWatch records what one node receives from one neighbor (before its import policy) for
// some prefixes, from the moment watchAdjIn returns.
type adjInWatch struct {
	node, neighbor string
	mu             sync.Mutex
	announces      []string
}

// watchAdjIn starts the watch and returns once GoBGP has sent the node's current routes from
// neighbor (every prefix of want among them): later events are news.
func watchAdjIn(t *testing.T, node, apiAddr, neighbor string, want []netip.Prefix) *adjInWatch {
	t.Helper()
	conn, err := grpc.NewClient(apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); conn.Close() })
	stream, err := api.NewGoBgpServiceClient(conn).WatchEvent(ctx, &api.WatchEventRequest{Table: &api.WatchEventRequest_Table{
		Filters: []*api.WatchEventRequest_Table_Filter{{Type: api.WatchEventRequest_Table_Filter_TYPE_ADJIN, Init: true, PeerAddress: neighbor}}}})
	if err != nil {
		t.Fatal(err)
	}
	w := &adjInWatch{node: node, neighbor: neighbor}
	watched := map[string]bool{}
	for _, p := range want {
		watched[p.String()] = true
	}
	initial := map[string]bool{}
	ready := make(chan struct{})
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			for _, p := range r.GetTable().GetPaths() {
				pfx := fmt.Sprintf("%s/%d", p.GetNlri().GetPrefix().GetPrefix(), p.GetNlri().GetPrefix().GetPrefixLen())
				if !watched[pfx] || p.NeighborIp != neighbor {
					continue
				}
				if initial != nil {
					initial[pfx] = true
					if len(initial) == len(watched) {
						initial = nil
						close(ready)
					}
					continue
				}
				if !p.IsWithdraw {
					orig, clusters, _ := attrs(p)
					w.mu.Lock()
					w.announces = append(w.announces, fmt.Sprintf("%s (originator %s, cluster list %v)", pfx, orig, clusters))
					w.mu.Unlock()
				}
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: GoBGP did not list %v from %s within 10s", node, want, neighbor)
	}
	return w
}

func (w *adjInWatch) announced() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.announces)
}
