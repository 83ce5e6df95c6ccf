package bird

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// benchSpeaker does nothing: the benchmarks measure the agent, not GoBGP.
type benchSpeaker struct{}

func (benchSpeaker) Start(context.Context, peers.Speaker) error                 { return nil }
func (benchSpeaker) Stop(context.Context, bool) error                           { return nil }
func (benchSpeaker) AddPeer(context.Context, peers.Peer) error                  { return nil }
func (benchSpeaker) DeletePeer(context.Context, netip.Addr) error               { return nil }
func (benchSpeaker) UpdateBFD(context.Context, peers.Peer) error                { return nil }
func (benchSpeaker) AddPath(context.Context, netip.Prefix, netip.Addr) error    { return nil }
func (benchSpeaker) DeletePath(context.Context, netip.Prefix, netip.Addr) error { return nil }
func (benchSpeaker) SetPolicy(context.Context, speaker.Policy) error            { return nil }
func (benchSpeaker) Watch(context.Context, func(speaker.Event)) error           { return nil }
func (benchSpeaker) Peers(context.Context) ([]speaker.PeerState, error)         { return nil, nil }
func (benchSpeaker) Accepted(context.Context) (map[netip.Addr]map[string]uint64, error) {
	return nil, nil
}

const benchNodes = 1000

func benchNodeName(i int) string { return fmt.Sprintf("node%04d", i) }

// benchBlock is node i's block: 1,000 /26s in 10.244.0.0/16.
func benchBlock(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i / 4), byte(64 * (i % 4))}), 26)
}

// benchAgent is node0000's agent in a 1,000-node full mesh, one block per node, after its first
// pass; with a ToR, the policy filters with what IPAM explains.
func benchAgent(b *testing.B, tor bool) *Bird {
	bd, err := New(Config{NodeName: benchNodeName(0), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewSpeaker: func(*slog.Logger, string) (speaker.Speaker, error) { return benchSpeaker{}, nil }})
	if err != nil {
		b.Fatal(err)
	}
	for i := range benchNodes {
		a := netip.AddrFrom4([4]byte{198, 51, byte(100 + i/250), byte(1 + i%250)})
		bd.OnUpdate(model.NodeUpdate{Node: model.Node{Name: benchNodeName(i), BGPAddress: ipfamily.PairOf(netip.PrefixFrom(a, 16), netip.Prefix{})}})
		bd.OnUpdate(claim(benchBlock(i), benchNodeName(i)))
	}
	bd.OnUpdate(poolUpdate(pool))
	if tor {
		p := torPeer
		p.Spec.PeerIP = "203.0.113.1"
		bd.OnUpdate(model.BGPPeerUpdate{Peer: &p})
	}
	if err := bd.CompleteDeferredWork(context.Background()); err != nil {
		b.Fatal(err)
	}
	return bd
}

// benchBlockChange measures one block claimed or released (in turn) by node and the pass after.
func benchBlockChange(b *testing.B, tor bool, node string) {
	bd := benchAgent(b, tor)
	extra := netip.MustParsePrefix("10.244.255.0/26")
	ctx := context.Background()
	computes := bd.computes
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			bd.OnUpdate(claim(extra, node))
		} else {
			bd.OnUpdate(release(extra))
		}
		if err := bd.CompleteDeferredWork(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if bd.computes != computes {
		b.Fatalf("a block change computed the sessions %d times", bd.computes-computes)
	}
}

// A block claimed or released elsewhere in a 1,000-node cluster: what every agent does for most
// changes of a large cluster.
func BenchmarkBlockElsewhere1000Nodes(b *testing.B) { benchBlockChange(b, false, benchNodeName(500)) }

// The same with a ToR, whose import filter follows what IPAM explains.
func BenchmarkBlockElsewhereToR1000Nodes(b *testing.B) { benchBlockChange(b, true, benchNodeName(500)) }

// A block of this node claimed or released in a 1,000-node cluster.
func BenchmarkLocalBlock1000Nodes(b *testing.B) { benchBlockChange(b, false, benchNodeName(0)) }

// BenchmarkLearnedECMP is the agent's side of learning 1,000 prefixes from two ToRs at equal cost
// (two accepted paths and a best path each) and losing one ToR's paths: what the ECMP
// bookkeeping costs per route, GoBGP aside.
func BenchmarkLearnedECMP(b *testing.B) {
	bd := benchAgent(b, true)
	tor1, tor2 := netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2")
	bd.mu.Lock()
	for _, a := range []netip.Addr{tor1, tor2} {
		bd.desired[a] = peers.Peer{Address: a}
	}
	bd.mu.Unlock()
	attrs := speaker.PathAttrs{LocalPref: 50, ASPathLen: 1, NeighborAS: 65001}
	told := 0
	bd.cfg.Routes = func(any) { told++ }
	b.ReportAllocs()
	for b.Loop() {
		for i := range benchNodes {
			p := benchBlock(i)
			bd.onEvent(speaker.Event{Type: speaker.AcceptedPath, Peer: tor1, Prefix: p, NextHop: tor1, Attrs: attrs})
			bd.onEvent(speaker.Event{Type: speaker.BestPath, Peer: tor1, Prefix: p, NextHop: tor1})
			bd.onEvent(speaker.Event{Type: speaker.AcceptedPath, Peer: tor2, Prefix: p, NextHop: tor2, Attrs: attrs})
		}
		for i := range benchNodes {
			bd.onEvent(speaker.Event{Type: speaker.AcceptedPath, Peer: tor1, Prefix: benchBlock(i), Withdrawn: true})
			bd.onEvent(speaker.Event{Type: speaker.BestPath, Peer: tor2, Prefix: benchBlock(i), NextHop: tor2})
		}
		for i := range benchNodes {
			bd.onEvent(speaker.Event{Type: speaker.AcceptedPath, Peer: tor2, Prefix: benchBlock(i), Withdrawn: true})
			bd.onEvent(speaker.Event{Type: speaker.BestPath, Prefix: benchBlock(i), Withdrawn: true})
		}
	}
	if told == 0 {
		b.Fatal("no route told")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchNodes, "ns/route")
}
