package bird

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/bgpwire"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// nextHopCluster is a dual-stack cluster with the mesh off: two route reflectors of one cluster
// and two clients, every node with an IPv4 and an IPv6 BGP address and a block of each family.
// External routers peer over IPv4 (IPv6 unicast inside, MP-BGP) with the two reflectors, which
// relay every other node's blocks, and with the first client, which relays the blocks it learned
// from the reflectors: no sender of any block to them is its owner but for its own block.
type nextHopCluster struct {
	nodes   []*testNode
	senders []*testNode // the nodes the external routers peer with
	tors    []netip.Addr
	rr      bool // route reflectors, not the mesh
}

var nextHopIDs = []int{131, 132, 133, 134}

func nextHopNodes(rr bool) []model.Node {
	all := []model.Node{mkNode(131, rrLabel, "244.0.0.4"), mkNode(132, rrLabel, "244.0.0.4"), mkNode(133, nil, ""), mkNode(134, nil, "")}
	if !rr {
		all[0], all[1] = mkNode(131, nil, ""), mkNode(132, nil, "")
	}
	for i, id := range nextHopIDs {
		all[i].BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix(fmt.Sprintf("2001:db8:100::%d/64", id)))
	}
	return all
}

// torPeers are the BGPPeers of the external routers at addrs (AS 65000) with the senders, and
// the reflectors' (rr).
func torPeers(addrs []netip.Addr, keep, rr bool) []v1.BGPPeer {
	var out []v1.BGPPeer
	if rr {
		out = calicoRRPeers()
	}
	for i, a := range addrs {
		for _, id := range nextHopIDs[:3] {
			out = append(out, v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tor%d-node%d", i, id)},
				Spec: v1.BGPPeerSpec{Node: fmt.Sprintf("node%d", id), PeerIP: a.String(), ASNumber: 65000, KeepOriginalNextHop: keep}})
		}
	}
	return out
}

// startNextHopCluster starts the nodes, as route reflectors and clients or (mesh) a full mesh,
// with BGPPeers to the external routers at tors.
func startNextHopCluster(t *testing.T, tors []netip.Addr, mesh bool) nextHopCluster {
	t.Helper()
	all := nextHopNodes(!mesh)
	bgpPeers := torPeers(tors, false, !mesh)
	var c nextHopCluster
	for _, n := range all {
		c.nodes = append(c.nodes, startNode(t, n, all, func(b *Bird) {
			if !mesh {
				send(b, confUpdate(meshOff()))
			}
			send(b, peerUpdates(bgpPeers...)...)
			send(b, poolUpdate(pool6))
			send(b, claims6(nextHopIDs...)...)
		}))
	}
	c.senders, c.tors, c.rr = c.nodes[:3], tors, !mesh
	return c
}

// waitToRs waits for every sender's sessions with the external routers.
func (c nextHopCluster) waitToRs(t *testing.T) {
	t.Helper()
	for _, s := range c.senders {
		for _, tor := range c.tors {
			s.waitPeer(t, tor, "established", 30*time.Second)
		}
	}
}

// setKeep switches keepOriginalNextHop on every ToR BGPPeer.
func (c nextHopCluster) setKeep(keep bool) {
	for _, n := range c.nodes {
		send(n.bird, peerUpdates(torPeers(c.tors, keep, c.rr)...)...)
	}
}

// wantNextHops is what each sender must announce: every node's block of each family, with the
// sender's own address of that family as next hop (eBGP next-hop-self), or the owner's with
// keepOriginalNextHop.
func (c nextHopCluster) wantNextHops(keep bool) map[string]map[netip.Prefix]netip.Addr {
	want := map[string]map[netip.Prefix]netip.Addr{}
	for _, s := range c.senders {
		m := map[netip.Prefix]netip.Addr{}
		for _, owner := range c.nodes {
			var id int
			fmt.Sscanf(owner.Name, "node%d", &id)
			via, via6 := addr4(s.Node), addr6(s.Node)
			if keep {
				via, via6 = addr4(owner.Node), addr6(owner.Node)
			}
			m[blockOf(id)], m[block6Of(id)] = via, via6
		}
		want[addr4(s.Node).String()] = m
	}
	return want
}

// diffNextHops lists what got lacks or has wrong against want (sender → prefix → next hop).
func diffNextHops(want, got map[string]map[netip.Prefix]netip.Addr) []string {
	var bad []string
	for sender, m := range want {
		for p, nh := range m {
			if g, ok := got[sender][p]; !ok {
				bad = append(bad, fmt.Sprintf("%s from %s: missing (want via %s)", p, sender, nh))
			} else if g != nh {
				bad = append(bad, fmt.Sprintf("%s from %s: via %s, want %s", p, sender, g, nh))
			}
		}
	}
	return bad
}

// birdPaths reads BIRD's tables: sender (the protocol's neighbour) → prefix → next hop, every
// path, best or not. A path BIRD found invalid is not in its table.
func birdPaths(birdc func(...string) string, protoAddr map[string]string) map[string]map[netip.Prefix]netip.Addr {
	got := map[string]map[netip.Prefix]netip.Addr{}
	for _, table := range []string{"master4", "master6"} {
		out := birdc("show", "route", "table", table)
		var net netip.Prefix
		var proto string
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			line := sc.Text()
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if p, err := netip.ParsePrefix(f[0]); err == nil {
				net, f = p, f[1:]
			}
			if len(f) >= 2 && f[0] == "unicast" && strings.HasPrefix(f[1], "[") {
				proto = strings.TrimPrefix(f[1], "[")
				continue
			}
			if len(f) >= 2 && f[0] == "via" && net.IsValid() {
				sender := protoAddr[proto]
				if got[sender] == nil {
					got[sender] = map[netip.Prefix]netip.Addr{}
				}
				if nh, err := netip.ParseAddr(f[1]); err == nil {
					got[sender][net] = nh
				}
			}
		}
	}
	return got
}

// TestIPv6NextHopOverIPv4ToBIRD2: a BIRD2 ToR in its own AS peers over IPv4 sessions carrying
// both families with the two route reflectors and a client. With the default BGPPeer every
// block of every node reaches it from each of them with that sender's address of the block's
// family as next hop, and BIRD logs no invalid NEXT_HOP: a relayed IPv6 route carrying the
// session's IPv4 address would be dropped ("mismatched address family"). With
// keepOriginalNextHop the next hop is the owner's address of the family.
func TestIPv6NextHopOverIPv4ToBIRD2(t *testing.T) {
	netnstest.Require(t)
	all := nextHopNodes(true)
	tor, tor6 := netip.MustParseAddr("198.51.100.239"), netip.MustParseAddr("2001:db8:100::239")
	ns := torNamespace6(t, addr4(all[0]), tor, all[0].BGPAddress.Get(ipfamily.IPv6), tor6)
	birdc, birdLog := birdToR{Addr: tor, Node: addr4(all[0]), More: []netip.Addr{addr4(all[1]), addr4(all[2])},
		AS: 65000, NodeAS: v1.DefaultASNumber, IPv6: true}.startLogged(t, ns)
	c := startNextHopCluster(t, []netip.Addr{tor}, false)
	c.waitToRs(t)
	protos := map[string]string{"node": addr4(all[0]).String(), "node2": addr4(all[1]).String(), "node3": addr4(all[2]).String()}
	for _, keep := range []bool{false, true} {
		if keep {
			c.setKeep(true)
		}
		want := c.wantNextHops(keep)
		deadline := time.Now().Add(20 * time.Second)
		for {
			bad := diffNextHops(want, birdPaths(birdc, protos))
			if len(bad) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("keepOriginalNextHop=%v: BIRD2's routes after 20s:\n%s\n%s\n%s", keep, strings.Join(bad, "\n"),
					birdc("show", "route", "all"), birdLog())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if log := birdLog(); strings.Contains(log, "Invalid NEXT_HOP") || strings.Contains(log, "Invalid route") {
		t.Errorf("BIRD2 refused routes:\n%s", log)
	}
}

// TestIPv6NextHopOverIPv4ToFRR: the same with FRR as the ToR (IPv6 unicast activated on its
// IPv4 neighbours): every path of every IPv6 block is valid in FRR with the sender's (or, with
// keepOriginalNextHop, the owner's) global IPv6 address as next hop.
func TestIPv6NextHopOverIPv4ToFRR(t *testing.T) {
	netnstest.Require(t)
	if _, err := os.Stat("/usr/lib/frr/bgpd"); err != nil {
		t.Fatalf("FRR is not installed (hack/install-deps.sh installs it): %v", err)
	}
	all := nextHopNodes(true)
	tor, tor6 := netip.MustParseAddr("198.51.100.237"), netip.MustParseAddr("2001:db8:100::237")
	ns := torNamespace6(t, addr4(all[0]), tor, all[0].BGPAddress.Get(ipfamily.IPv6), tor6)
	vtysh := startFRRToR(t, ns, tor, 65000, v1.DefaultASNumber, true, []netip.Addr{addr4(all[0]), addr4(all[1]), addr4(all[2])})
	c := startNextHopCluster(t, []netip.Addr{tor}, false)
	c.waitToRs(t)
	for _, keep := range []bool{false, true} {
		if keep {
			c.setKeep(true)
		}
		want := c.wantNextHops(keep)
		for _, m := range want {
			for p := range m {
				if p.Addr().Is4() {
					delete(m, p)
				}
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			table, raw := frrRoutes6(vtysh)
			got := map[string]map[netip.Prefix]netip.Addr{}
			for p, bySender := range table {
				for sender, nh := range bySender {
					if got[sender] == nil {
						got[sender] = map[netip.Prefix]netip.Addr{}
					}
					got[sender][netip.MustParsePrefix(p)] = netip.MustParseAddr(nh)
				}
			}
			bad := diffNextHops(want, got)
			if len(bad) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("keepOriginalNextHop=%v: FRR's IPv6 routes after 20s:\n%s\n%s", keep, strings.Join(bad, "\n"), raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestIPv6NextHopOnTheWire reads the UPDATEs themselves, so that a lenient receiver cannot hide
// a regression: a raw BGP peer offering IPv4 and IPv6 unicast on an IPv4 session to each sender
// gets every IPv6 block in an MP_REACH_NLRI whose next hop is the sender's global IPv6 address
// (16 bytes, not IPv4 nor IPv4-mapped) and every IPv4 block with the sender's IPv4 address. The
// same over the full mesh, where a node passes on its mesh peers' blocks.
func TestIPv6NextHopOnTheWire(t *testing.T) {
	for _, mesh := range []bool{false, true} {
		t.Run(fmt.Sprintf("mesh=%v", mesh), func(t *testing.T) {
			netnstest.Require(t)
			tor := netip.MustParseAddr("198.51.100.236")
			netnstest.AddLoopback(t, tor)
			c := startNextHopCluster(t, []netip.Addr{tor}, mesh)
			c.waitMeshed(t)
			for _, s := range c.senders {
				sess := dialWire(t, tor, addr4(s.Node))
				want := c.wantNextHops(false)[addr4(s.Node).String()]
				deadline := time.Now().Add(15 * time.Second)
				for {
					got, bad := wireNextHops(sess.Received())
					var missing []string
					for p, nh := range want {
						if got[p] != nh {
							missing = append(missing, fmt.Sprintf("%s: via %v, want %s", p, got[p], nh))
						}
					}
					if len(bad) > 0 {
						t.Fatalf("%s sent malformed next hops:\n%s", s.Name, strings.Join(bad, "\n"))
					}
					if len(missing) == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s's UPDATEs after 15s:\n%s", s.Name, strings.Join(missing, "\n"))
					}
					time.Sleep(50 * time.Millisecond)
				}
				sess.Close()
			}
		})
	}
}

// waitMeshed waits until every node has every other node's blocks.
func (c nextHopCluster) waitMeshed(t *testing.T) {
	t.Helper()
	for _, n := range c.nodes {
		for _, o := range c.nodes {
			if n != o {
				n.routes.waitRoute(t, o.block, addr4(o.Node), 20*time.Second)
				n.routes.waitRoute(t, block6Of(blockID(o)), addr6(o.Node), 20*time.Second)
			}
		}
	}
}

func blockID(n *testNode) int {
	var id int
	fmt.Sscanf(n.Name, "node%d", &id)
	return id
}

// dialWire opens a raw session from local (AS 65000) to node, offering both families.
func dialWire(t *testing.T, local, node netip.Addr) *bgpwire.Session {
	t.Helper()
	var sess *bgpwire.Session
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := bgpwire.Dial(ctx, bgpwire.Config{Local: local, Remote: node, ASN: 65000, IPv6: true, GracefulRestart: true, RouterID: netip.MustParseAddr("198.51.100.235")})
		cancel()
		if err == nil {
			sess = s
			break
		}
		// The node may refuse the first attempts while its own dial towards us fails and it
		// sits in Idle (GoBGP's 5 s): try again.
		if time.Now().After(deadline) {
			t.Fatalf("raw session to %s: %v", node, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// wireNextHops replays UPDATEs into prefix → next hop, and lists every next hop that is not a
// single address of the prefix's family (an IPv4-mapped IPv6 address counts as IPv4).
func wireNextHops(us []bgpwire.Received) (map[netip.Prefix]netip.Addr, []string) {
	got := map[netip.Prefix]netip.Addr{}
	var bad []string
	for _, u := range us {
		if u.Err != nil {
			bad = append(bad, u.Err.Error())
			continue
		}
		for _, p := range append(u.Withdrawn, u.MPUnreach...) {
			delete(got, p)
		}
		if len(u.NLRI) > 0 {
			nh, ok := netip.AddrFromSlice(u.NextHop)
			if !ok || len(u.NextHop) != 4 {
				bad = append(bad, fmt.Sprintf("NEXT_HOP %x for %v", u.NextHop, u.NLRI))
			}
			for _, p := range u.NLRI {
				got[p] = nh
			}
		}
		for _, m := range u.MPReach {
			nhs, err := m.NextHops()
			switch {
			case err != nil:
				bad = append(bad, fmt.Sprintf("MP_REACH AFI %d: %v", m.AFI, err))
				continue
			case m.AFI == 2 && (len(m.NextHop) < 16 || nhs[0].Is4In6() || nhs[0].IsLinkLocalUnicast()):
				bad = append(bad, fmt.Sprintf("MP_REACH IPv6 next hop %v (%d bytes) for %v", nhs, len(m.NextHop), m.NLRI))
			case m.AFI == 1:
				bad = append(bad, fmt.Sprintf("IPv4 routes %v in MP_REACH with next hop %v: extended next hop was not negotiated", m.NLRI, nhs))
			}
			for _, p := range m.NLRI {
				got[p] = nhs[0]
			}
		}
	}
	return got, bad
}

// TestIPv6SessionCarriesNoIPv4 reads the UPDATEs of an IPv6 session whose peer offers both
// families: tabby offers IPv6 unicast alone there, so no IPv4 route (which would need RFC
// 8950's extended next hop, not negotiated) is ever sent, only the IPv6 blocks.
func TestIPv6SessionCarriesNoIPv4(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(135, nil, "")}
	all[0].BGPAddress.Set(ipfamily.IPv6, netip.MustParsePrefix("2001:db8:100::135/64"))
	peer6 := netip.MustParseAddr("2001:db8:100::235")
	netnstest.AddLoopback(t, peer6)
	n := startNode(t, all[0], all, func(b *Bird) {
		send(b, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "raw6"}, Spec: v1.BGPPeerSpec{PeerIP: peer6.String(), ASNumber: 65000}})...)
		send(b, poolUpdate(pool6))
		send(b, claims6(135)...)
	})
	sess := dialWire(t, peer6, addr6(n.Node))
	deadline := time.Now().Add(15 * time.Second)
	for {
		us := sess.Received()
		got, bad := wireNextHops(us)
		if len(bad) > 0 {
			t.Fatalf("malformed next hops: %v", bad)
		}
		eor6 := false
		for _, u := range us {
			if len(u.NLRI) > 0 || u.EndOfRIB == 1 {
				t.Fatalf("IPv4 on an IPv6 session: %+v", u)
			}
			eor6 = eor6 || u.EndOfRIB == 2
		}
		// End-of-RIB follows the initial table: by then every IPv4 route would have come too.
		if eor6 && got[block6Of(135)] == addr6(n.Node) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15s: %v, IPv6 End-of-RIB %v", got, eor6)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
