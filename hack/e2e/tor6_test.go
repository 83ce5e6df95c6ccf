package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
)

// TestIPv6ToRNextHops: a dual-stack cluster with the mesh off, two route reflectors and two
// clients, and BIRD2 on the router as the ToR in its own AS, peering over IPv4 (both families
// inside, MP-BGP) with both reflectors and one client, with default BGPPeers. BIRD installs every
// node's IPv6 block with the IPv6 address of a node it peers with as next hop (next-hop-self) and
// logs no refused route, and the router reaches every pod at both addresses. The reflectors and
// the client pass on blocks that are not theirs: with the IPv4 session's address as their
// next hop BIRD would drop them ("Invalid NEXT_HOP attribute - mismatched address family")
// and the router lose the pods of the client it does not peer with. With keepOriginalNextHop
// every block is via its owner.
func TestIPv6ToRNextHops(t *testing.T) {
	l := startLab(t, lab.Options{Families: lab.DualStack})
	ctx := testCtx(t, 6*time.Minute)
	if err := l.UseRouteReflectors(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := addNodes(t, ctx, l,
		lab.NodeSpec{Name: "rr-1", RouteReflectorClusterID: rrClusterID},
		lab.NodeSpec{Name: "rr-2", RouteReflectorClusterID: rrClusterID},
		lab.NodeSpec{Name: "node-1"},
		lab.NodeSpec{Name: "node-2"},
	)
	// node-2 peers with the reflectors alone: the ToR learns its blocks only as passed on.
	peering := nodes[:3]
	var nbs []lab.BGPNeighbor
	for _, n := range peering {
		nbs = append(nbs, lab.BGPNeighbor{Addr: n.IP(), ASN: v1.DefaultASNumber})
	}
	rt := l.Router()
	if err := rt.StartBIRD(ctx, lab.BIRDOptions{Neighbors: nbs}); err != nil {
		t.Fatal(err)
	}
	var torPeers []string
	for _, n := range peering {
		p := &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-" + n.Name},
			Spec: v1.BGPPeerSpec{Node: n.Name, PeerIP: lab.RouterA.String(), ASNumber: lab.DefaultToRASN}}
		if _, err := l.Client.BGPPeers().Create(ctx, p); err != nil {
			t.Fatalf("BGPPeer %s: %v", p.Name, err)
		}
		torPeers = append(torPeers, p.Name)
	}
	pods := addPodsPerNode(t, ctx, l, nodes, 1)

	// BIRD installs its best path, whichever of the nodes it peers with that came from: any of
	// their addresses of the block's family is right, another family's never.
	senders := func(*lab.Node) []netip.Addr {
		var out []netip.Addr
		for _, n := range peering {
			out = append(out, n.IP(), n.IP6())
		}
		return out
	}
	requireToRNextHops(t, ctx, l, "next-hop-self", senders)
	requireToRPaths6(t, ctx, l, len(peering))
	requireNoRefusedRoutes(t, rt)
	requireReach(t, ctx, "ToR to pod, IPv6", []lab.Endpoint{rt.Endpoint6()}, l.PodEndpoints6(), 45*time.Second)
	requireReach(t, ctx, "ToR to pod, IPv4", []lab.Endpoint{rt.Endpoint()}, podEndpoints(pods), 45*time.Second)

	for _, name := range torPeers {
		p, err := l.Client.BGPPeers().Get(ctx, name)
		if err != nil {
			t.Fatalf("BGPPeer %s: %v", name, err)
		}
		p.Spec.KeepOriginalNextHop = true
		if _, err := l.Client.BGPPeers().Update(ctx, p); err != nil {
			t.Fatalf("BGPPeer %s: keepOriginalNextHop: %v", name, err)
		}
	}
	owner := func(n *lab.Node) []netip.Addr { return []netip.Addr{n.IP(), n.IP6()} }
	requireToRNextHops(t, ctx, l, "keepOriginalNextHop", owner)
	requireToRPaths6(t, ctx, l, len(peering))
	requireNoRefusedRoutes(t, rt)
	requireReach(t, ctx, "ToR to pod with original next hops, IPv6", []lab.Endpoint{rt.Endpoint6()}, l.PodEndpoints6(), 45*time.Second)
	requireReach(t, ctx, "ToR to pod with original next hops, IPv4", []lab.Endpoint{rt.Endpoint()}, podEndpoints(pods), 45*time.Second)
}

// requireToRNextHops waits until the router's kernel routes every block of every node via one
// of the addresses via(owner) of the block's family; an IPv4-mapped address is no IPv6 next hop.
// Every node must have a block of each family, or there would be nothing to check.
func requireToRNextHops(t *testing.T, ctx context.Context, l *lab.Lab, what string, via func(owner *lab.Node) []netip.Addr) {
	t.Helper()
	var installed []string
	err := lab.Eventually(ctx, 60*time.Second, func(ctx context.Context) error {
		installed = installed[:0]
		blocks, err := l.Blocks(ctx)
		if err != nil {
			return err
		}
		gw := map[string]string{}
		for _, routes := range []func(context.Context, string, int) ([]lab.Route, error){lab.Routes, lab.Routes6} {
			rs, err := routes(ctx, l.Router().NS, 0)
			if err != nil {
				return err
			}
			for _, r := range rs {
				gw[r.Dst] = r.Gateway
			}
		}
		var bad []string
		for _, n := range l.Nodes() {
			var has4, has6 bool
			for _, b := range blocks[n.Name] {
				has4, has6 = has4 || b.Addr().Is4(), has6 || b.Addr().Is6()
				var want []netip.Addr
				for _, a := range via(n) {
					if a.Is4() == b.Addr().Is4() {
						want = append(want, a)
					}
				}
				g, ok := gw[b.String()]
				if !ok {
					bad = append(bad, fmt.Sprintf("%s of %s: no route (want via one of %v)", b, n.Name, want))
					continue
				}
				if a, err := netip.ParseAddr(g); err != nil || a.Is4In6() || !slices.Contains(want, a) {
					bad = append(bad, fmt.Sprintf("%s of %s: via %q, want one of %v", b, n.Name, g, want))
				}
				installed = append(installed, fmt.Sprintf("%s of %s via %s", b, n.Name, g))
			}
			if !has4 || !has6 {
				bad = append(bad, fmt.Sprintf("%s: blocks %v, want one of each family", n.Name, blocks[n.Name]))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("the ToR's kernel routes:\n%s", strings.Join(bad, "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: the ToR routes every node's blocks via the expected next hops:\n%s", what, strings.Join(installed, "\n"))
}

// requireToRPaths6 waits until BIRD holds a path to every node's IPv6 block from each of its
// peers: the kernel has the best path alone, which one valid sender is enough for.
func requireToRPaths6(t *testing.T, ctx context.Context, l *lab.Lab, peers int) {
	t.Helper()
	var held string
	err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		blocks, err := l.Blocks(ctx)
		if err != nil {
			return err
		}
		nets := 0
		for _, bs := range blocks {
			for _, b := range bs {
				if b.Addr().Is6() {
					nets++
				}
			}
		}
		// The table holds BGP's routes alone: the ToR imports nothing from its kernel.
		out, err := l.Router().Birdc(ctx, "show", "route", "table", "master6", "count")
		if err != nil {
			return err
		}
		held = routeCount.FindString(out)
		if held == "" {
			return fmt.Errorf("no route count in BIRD's answer:\n%s", out)
		}
		if got, want := held, fmt.Sprintf("%d of %d routes for %d networks", nets*peers, nets*peers, nets); got != want {
			return fmt.Errorf("BIRD holds %s, want %s (every IPv6 block from each of %d peers)", got, want, peers)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BIRD holds %s in master6", held)
}

var routeCount = regexp.MustCompile(`\d+ of \d+ routes for \d+ networks`)

// requireNoRefusedRoutes fails the test if BIRD logged a route it refused: an invalid next hop
// does not reach the kernel, and a route of that prefix from another peer could hide it.
func requireNoRefusedRoutes(t *testing.T, r *lab.Router) {
	t.Helper()
	log, err := r.Log()
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "Invalid NEXT_HOP") || strings.Contains(line, "Invalid route") {
			refused = append(refused, line)
		}
	}
	if len(refused) > 0 {
		t.Fatalf("BIRD refused routes (%d lines):\n%s", len(refused), strings.Join(refused[:min(len(refused), 20)], "\n"))
	}
}
