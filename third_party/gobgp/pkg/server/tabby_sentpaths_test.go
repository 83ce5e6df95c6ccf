package server

// Tests of tabby's changes to GoBGP (TABBY.md).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/internal/pkg/table"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// What a peer was sent is recorded per destination in the shared set for path identifier 0
// (no add-path), and withdrawing it from one peer leaves the others' record and the shared set
// alone.
func TestSentPathsShareTheIDZeroSet(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	newTestPeer := func() *peer { return &peer{fsm: newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)} }
	a, b := newTestPeer(), newTestPeer()
	p1, p2 := testPath(t, "10.244.1.0/26")[0], testPath(t, "10.244.2.0/26")[0]
	a.updateRoutes(p1, p2)
	b.updateRoutes(p1)
	for _, c := range []struct {
		peer *peer
		path *table.Path
		want bool
	}{{a, p1, true}, {a, p2, true}, {b, p1, true}, {b, p2, false}} {
		if got := c.peer.hasPathAlreadyBeenSent(c.path); got != c.want {
			t.Fatalf("sent %v: %v, want %v", c.path.GetNlri(), got, c.want)
		}
	}
	a.updateRoutes(p1.Clone(true)) // withdrawn from a
	if a.hasPathAlreadyBeenSent(p1) || !a.hasPathAlreadyBeenSent(p2) || !b.hasPathAlreadyBeenSent(p1) {
		t.Fatal("a withdrawal from one peer changed another destination or peer")
	}
	if a.getRoutesCount(bgp.RF_IPv4_UC, p2.GetNlri().String()) != 1 || b.getRoutesCount(bgp.RF_IPv4_UC, p1.GetNlri().String()) != 1 {
		t.Fatal("a sent destination does not count one path")
	}
	if len(sentWithIDZero) != 1 {
		t.Fatalf("the shared set was modified: %v", sentWithIDZero)
	}
	if n := b.sentPaths.Len(); n != 1 {
		t.Fatalf("b has %d destinations, want 1", n)
	}
	a.resetAdvertisedRoutes()
	if a.sentPaths.Len() != 0 || a.hasPathAlreadyBeenSent(p2) || !b.hasPathAlreadyBeenSent(p1) {
		t.Fatal("a reset of one peer's record left it or touched another's")
	}
}

// The record of what peers were sent behaves as a map per peer from destination to the set of
// identifiers (the model), under random stores, deletes and resets on several peers, and the
// destinations' numbers go back once no peer holds them: a peer that is gone holds none, and
// records nothing more.
func TestSentPathsNumbered(t *testing.T) {
	keys := make([]table.PathDestLocalKey, 40)
	for i := range keys {
		keys[i] = table.PathDestLocalKey{Family: bgp.RF_IPv4_UC, Prefix: fmt.Sprintf("10.244.%d.0/26", 100+i)}
	}
	keys[1].Family = bgp.RF_IPv6_UC // the same prefix string in another family is another destination
	sets := []pathIDSet{sentWithIDZero, {0: {}}, {0: {}, 5: {}}, {7: {}}}
	rnd := rand.New(rand.NewPCG(1, 2))
	peers := make([]sentPathsMap, 4)
	model := make([]map[table.PathDestLocalKey]pathIDSet, len(peers))
	for i := range model {
		model[i] = map[table.PathDestLocalKey]pathIDSet{}
	}
	for step := range 20000 {
		p, k := rnd.IntN(len(peers)), keys[rnd.IntN(len(keys))]
		switch op := rnd.IntN(100); {
		case op < 55:
			v := sets[rnd.IntN(len(sets))]
			peers[p].Store(k, v)
			model[p][k] = v
		case op < 97:
			peers[p].Delete(k)
			delete(model[p], k)
		default:
			peers[p].Clear()
			clear(model[p])
		}
		for i := range peers {
			if peers[i].Len() != len(model[i]) {
				t.Fatalf("step %d: peer %d holds %d destinations, want %d", step, i, peers[i].Len(), len(model[i]))
			}
			paths := map[bgp.Family]int{}
			for k, v := range model[i] {
				paths[k.Family] += len(v)
			}
			for _, f := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
				if got := peers[i].pathsSent(f); got != paths[f] {
					t.Fatalf("step %d: peer %d counts %d paths of %v sent, want %d", step, i, got, f, paths[f])
				}
			}
			for _, k := range keys {
				got, ok := peers[i].Load(k)
				want, wok := model[i][k]
				if ok != wok || !maps.Equal(got, want) {
					t.Fatalf("step %d: peer %d, %v: %v %v, want %v %v", step, i, k, got, ok, want, wok)
				}
			}
		}
	}
	for i := range peers {
		peers[i].close()
		peers[i].Store(keys[0], sentWithIDZero)
		if _, ok := peers[i].Load(keys[0]); ok || peers[i].Len() != 0 {
			t.Fatalf("peer %d, gone, recorded a destination", i)
		}
	}
	for _, k := range keys {
		if _, ok := destNumbers.lookup(k); ok {
			t.Fatalf("%v still numbered with no peer holding it", k)
		}
	}
}

// The paths counted as sent to a peer, what ListPeer reports as advertised, are the paths the
// peer was sent and not withdrawn since, with add-path (several identifiers per destination) and
// without, under random announcements and withdrawals.
func TestSentPathsCounted(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	plain := &peer{fsm: newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)}
	addPath := &peer{fsm: newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)}
	addPath.fsm.familyMap.Store(map[bgp.Family]bgp.BGPAddPathMode{bgp.RF_IPv4_UC: bgp.BGP_ADD_PATH_SEND})
	t.Cleanup(func() { plain.sentPaths.close(); addPath.sentPaths.close() })
	type sent struct {
		prefix string
		id     uint32
	}
	// Eight destinations with a path from each of three sources: the RIB gives each path of a
	// destination its own identifier.
	rib := table.NewTableManager(logger, []bgp.Family{bgp.RF_IPv4_UC})
	var paths []*table.Path
	for i := range 8 {
		for src := range 3 {
			p := testPath(t, fmt.Sprintf("10.244.%d.0/26", 200+i))[0]
			addr := netip.AddrFrom4([4]byte{198, 51, 100, byte(10 + src)})
			p = table.NewPath(bgp.RF_IPv4_UC, &table.PeerInfo{ID: addr, Address: addr}, bgp.PathNLRI{NLRI: p.GetNlri()}, false, p.GetPathAttrs(), time.Now(), false)
			rib.Update(p)
			paths = append(paths, p)
		}
	}
	model := map[*peer]map[sent]bool{plain: {}, addPath: {}}
	rnd := rand.New(rand.NewPCG(3, 4))
	for step := range 5000 {
		path := paths[rnd.IntN(len(paths))]
		if path.LocalID() == 0 {
			t.Fatal("the RIB gave a path no identifier")
		}
		withdraw := rnd.IntN(3) == 0
		if withdraw {
			path = path.Clone(true)
		}
		prefix := path.GetNlri().String()
		for p, m := range model {
			p.updateRoutes(path)
			id := p.advertisedPathID(path)
			if withdraw {
				delete(m, sent{prefix, id})
			} else {
				m[sent{prefix, id}] = true
			}
			if got := p.sentPaths.pathsSent(bgp.RF_IPv4_UC); got != len(m) {
				t.Fatalf("step %d (add-path %v): %d paths counted as sent, want %d", step, p == addPath, got, len(m))
			}
		}
	}
	if len(sentWithIDZero) != 1 {
		t.Fatalf("the shared set was modified: %v", sentWithIDZero)
	}
}

// A peer removed from the server gives its destinations' numbers back.
func TestDeletedPeerReleasesItsNumbers(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := NewBgpServer(LoggerOption(logger, nil))
	go s.Serve()
	t.Cleanup(s.Stop)
	ctx := context.Background()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 64512, RouterId: "198.51.100.1", ListenPort: -1}}); err != nil {
		t.Fatal(err)
	}
	const addr = "198.51.100.9"
	if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: addr, PeerAsn: 64512},
		Transport: &api.Transport{PassiveMode: true},
	}}); err != nil {
		t.Fatal(err)
	}
	path := testPath(t, "10.244.250.0/26")[0]
	if err := s.mgmtOperation(func() error {
		s.neighborMap[netip.MustParseAddr(addr)].updateRoutes(path)
		return nil
	}, false); err != nil {
		t.Fatal(err)
	}
	if _, ok := destNumbers.lookup(path.GetDestLocalKey()); !ok {
		t.Fatal("a sent destination has no number")
	}
	if err := s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr}); err != nil {
		t.Fatal(err)
	}
	if _, ok := destNumbers.lookup(path.GetDestLocalKey()); ok {
		t.Fatal("a deleted peer still holds its destination's number")
	}
}

// BenchmarkSentPaths records 1,000 destinations sent to each of 1,000 peers, as a route
// reflector with 1,000 clients does, and reports the heap it keeps.
func BenchmarkSentPaths(b *testing.B) {
	paths := make([]*table.Path, 1000)
	for i := range paths {
		nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i / 4), byte(i % 4 * 64)}), 26))
		paths[i] = table.NewPath(bgp.RF_IPv4_UC, nil, bgp.PathNLRI{NLRI: nlri}, false, []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0)}, time.Now(), false)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for b.Loop() {
		peers := make([]*peer, 1000)
		for i := range peers {
			peers[i] = &peer{fsm: newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, p := range peers {
			p.updateRoutes(paths...)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MB-kept")
		for _, p := range peers {
			p.resetAdvertisedRoutes()
		}
	}
}
