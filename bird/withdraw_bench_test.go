package bird

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// withdrawMesh is a full mesh whose nodes own blocksPer blocks each, with every node's inputs as
// the syncer gives them: its own blocks, and every block of the cluster as explained.
type withdrawMesh struct {
	tns   []*testNode
	own   [][]netip.Prefix
	all   []netip.Prefix
	owner map[netip.Prefix]int
	held  map[netip.Prefix]bool // the blocks of all the nodes were last told of
}

func startWithdrawMesh(b *testing.B, nodes, blocksPer int) *withdrawMesh {
	netnstest.Require(b)
	var all []model.Node
	for i := range nodes {
		all = append(all, mkNode(41+i, nil, ""))
	}
	m := &withdrawMesh{owner: map[netip.Prefix]int{}, held: map[netip.Prefix]bool{}}
	for i, n := range all {
		var own []netip.Prefix
		for k := range blocksPer {
			p := netip.MustParsePrefix(fmt.Sprintf("10.244.%d.%d/26", 41+i, 64*k))
			own = append(own, p)
			m.owner[p] = i
		}
		m.own = append(m.own, own)
		m.all = append(m.all, own...)
		m.tns = append(m.tns, startNode(b, n, all, nil))
	}
	m.set(m.all)
	m.waitAll(b, m.all)
	return m
}

// set tells every node of the claims and releases that leave only blocks of the mesh's.
func (m *withdrawMesh) set(blocks []netip.Prefix) {
	var msgs []any
	for _, p := range m.all {
		now := slices.Contains(blocks, p)
		switch {
		case now && !m.held[p]:
			msgs = append(msgs, claim(p, m.tns[m.owner[p]].Name))
		case !now && m.held[p]:
			msgs = append(msgs, release(p))
		}
		m.held[p] = now
	}
	for _, tn := range m.tns {
		send(tn.bird, msgs...)
	}
}

func (m *withdrawMesh) waitAll(b *testing.B, blocks []netip.Prefix) {
	for _, p := range blocks {
		o := m.tns[m.owner[p]]
		for _, tn := range m.tns {
			if tn != o {
				tn.routes.waitRoute(b, p, addr4(o.Node), 20*time.Second)
			}
		}
	}
}

func (m *withdrawMesh) waitGone(b *testing.B, blocks []netip.Prefix) {
	for _, p := range blocks {
		for _, tn := range m.tns {
			tn.routes.waitGone(b, p, 20*time.Second)
		}
	}
}

// BenchmarkWithdrawal: one block given up, as its owner's and every node's syncer hand it on,
// until no other node routes it any more.
func BenchmarkWithdrawal(b *testing.B) {
	m := startWithdrawMesh(b, 10, 4)
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		p := m.all[i%len(m.all)]
		rest := slices.DeleteFunc(slices.Clone(m.all), func(q netip.Prefix) bool { return q == p })
		start := time.Now()
		m.set(rest)
		m.waitGone(b, []netip.Prefix{p})
		took = append(took, time.Since(start))
		b.StopTimer()
		m.set(m.all)
		m.waitAll(b, []netip.Prefix{p})
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
}

// BenchmarkWithdrawalOfAll: every block given up at once, the nodes' inputs shrinking block by
// block as their syncers would see the deletes, until no node routes any.
func BenchmarkWithdrawalOfAll(b *testing.B) {
	m := startWithdrawMesh(b, 10, 4)
	b.ResetTimer()
	for range b.N {
		for k := range m.all {
			m.set(m.all[k+1:])
		}
		m.waitGone(b, m.all)
		b.StopTimer()
		m.set(m.all)
		m.waitAll(b, m.all)
		b.StartTimer()
	}
}
