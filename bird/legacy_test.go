package bird

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/speaker"
)

// show renders messages as "Type key" for comparison.
func show(msgs []any) []string {
	var out []string
	for _, m := range msgs {
		switch m := m.(type) {
		case model.NodeUpdate:
			out = append(out, "NodeUpdate "+m.Node.Name)
		case model.NodeRemove:
			out = append(out, "NodeRemove "+m.Name)
		case model.PoolUpdate:
			out = append(out, "PoolUpdate "+m.Pool.CIDR.String())
		case model.PoolRemove:
			out = append(out, "PoolRemove "+m.Name)
		case model.BlockUpdate:
			out = append(out, fmt.Sprintf("BlockUpdate %s node=%q", m.Block.CIDR, m.Block.Node))
		case model.BlockRemove:
			out = append(out, "BlockRemove "+m.CIDR.String())
		case model.BGPPeerUpdate:
			out = append(out, "BGPPeerUpdate "+m.Peer.Name)
		case model.BGPPeerRemove:
			out = append(out, "BGPPeerRemove "+m.Name)
		case model.SecretUpdate:
			out = append(out, "SecretUpdate "+m.Name)
		case model.SecretRemove:
			out = append(out, "SecretRemove "+m.Name)
		default:
			out = append(out, fmt.Sprintf("%T", m))
		}
	}
	return out
}

// TestLegacySettersSendTheDifference: each deprecated setter hands bird what changed since its
// previous call, as the model's messages; the prefixes of SetLocalPrefixes and SetRoutable
// become blocks of this node and of no node.
func TestLegacySettersSendTheDifference(t *testing.T) {
	l := &legacyLists{nodes: map[string]model.Node{}, pools: map[netip.Prefix]bool{}, peers: map[string]v1.BGPPeer{},
		secrets: map[string]map[string][]byte{}, blocks: map[netip.Prefix]model.Block{}}
	n1, n2 := mkNode(1, nil, ""), mkNode(2, nil, "")
	n2b := mkNode(2, map[string]string{"rack": "b"}, "")
	tor := v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: "198.51.100.250", ASNumber: 65000}}
	tor2 := tor
	tor2.Spec.ASNumber = 65001
	p := netip.MustParsePrefix
	for _, s := range []struct {
		name string
		msgs func() []any
		want []string
	}{
		{"nodes", func() []any { return l.nodeMessages([]model.Node{n1, n2}) }, []string{"NodeUpdate node1", "NodeUpdate node2"}},
		{"nodes again", func() []any { return l.nodeMessages([]model.Node{n1, n2}) }, nil},
		{"a node changed, one gone", func() []any { return l.nodeMessages([]model.Node{n2b}) }, []string{"NodeUpdate node2", "NodeRemove node1"}},
		{"pools", func() []any { return l.poolMessages([]netip.Prefix{pool, pool6}) }, []string{"PoolUpdate 10.244.0.0/16", "PoolUpdate fd00:10:244::/48"}},
		{"a pool gone", func() []any { return l.poolMessages([]netip.Prefix{pool6}) }, []string{"PoolRemove 10.244.0.0/16"}},
		{"BGPPeers", func() []any { return l.peerMessages([]v1.BGPPeer{tor}) }, []string{"BGPPeerUpdate tor"}},
		{"a BGPPeer changed", func() []any { return l.peerMessages([]v1.BGPPeer{tor2}) }, []string{"BGPPeerUpdate tor"}},
		{"no BGPPeer", func() []any { return l.peerMessages(nil) }, []string{"BGPPeerRemove tor"}},
		{"Secrets", func() []any {
			return l.secretMessages(map[string]map[string][]byte{"a": {"k": []byte("1")}, "b": {"k": []byte("2")}})
		},
			[]string{"SecretUpdate a", "SecretUpdate b"}},
		{"a Secret changed, one gone", func() []any { return l.secretMessages(map[string]map[string][]byte{"b": {"k": []byte("3")}}) },
			[]string{"SecretUpdate b", "SecretRemove a"}},
		{"routable", func() []any {
			return l.routableMessages("node1", []netip.Prefix{p("10.244.2.0/26"), p("10.244.1.0/26")})
		},
			[]string{`BlockUpdate 10.244.1.0/26 node=""`, `BlockUpdate 10.244.2.0/26 node=""`}},
		{"local", func() []any { return l.localMessages("node1", []netip.Prefix{p("10.244.1.0/26")}) },
			[]string{`BlockUpdate 10.244.1.0/26 node="node1"`}},
		{"the same routable again", func() []any {
			return l.routableMessages("node1", []netip.Prefix{p("10.244.1.0/26"), p("10.244.2.0/26")})
		}, nil},
		{"a block gone elsewhere, one new", func() []any {
			return l.routableMessages("node1", []netip.Prefix{p("10.244.1.0/26"), p("10.244.3.0/26")})
		}, []string{"BlockRemove 10.244.2.0/26", `BlockUpdate 10.244.3.0/26 node=""`}},
		{"a local prefix not in routable", func() []any {
			return l.localMessages("node1", []netip.Prefix{p("10.244.1.0/26"), p("10.244.9.7/32")})
		}, []string{`BlockUpdate 10.244.9.7/32 node="node1"`}},
		{"nothing local", func() []any { return l.localMessages("node1", nil) },
			[]string{`BlockUpdate 10.244.1.0/26 node=""`, "BlockRemove 10.244.9.7/32"}},
		{"nothing routable", func() []any { return l.routableMessages("node1", nil) },
			[]string{"BlockRemove 10.244.1.0/26", "BlockRemove 10.244.3.0/26"}},
	} {
		if got := show(s.msgs()); !slices.Equal(got, s.want) {
			t.Errorf("%s: %q, want %q", s.name, got, s.want)
		}
	}
}

// TestLegacySetters: through the setters the agent does what the messages make it do, a block
// claimed elsewhere without an external router waking nothing; Config.OnRoute gets the learned
// routes.
func TestLegacySetters(t *testing.T) {
	var got []RouteUpdate
	b, fs, _ := newFakeBird(t, "node1", func(c *Config) {
		c.Routes = nil
		c.OnRoute = func(u RouteUpdate) { got = append(got, u) }
	})
	b.SetNodes([]model.Node{mkNode(1, nil, ""), mkNode(2, nil, "")})
	b.SetPools([]netip.Prefix{pool})
	b.SetRoutable(testBlocks)
	b.SetLocalPrefixes([]netip.Prefix{blockOf(1)})
	b.SetBGPConfiguration(nil)
	b.SetSecrets(nil)
	b.SetBGPPeers(nil)
	pass(t, b)
	want := []string{"start 1 198.51.100.1", "policy", "add path 10.244.1.0/26 via 198.51.100.1", "add peer 198.51.100.2"}
	if calls := fs.last().takeCalls(); !slices.Equal(calls, want) {
		t.Errorf("first pass: %q, want %q", calls, want)
	}
	passes := b.reconciles.Load()
	b.SetRoutable(append(slices.Clone(testBlocks), netip.MustParsePrefix("10.244.240.64/26")))
	pass(t, b)
	if b.reconciles.Load() != passes {
		t.Error("a block elsewhere woke the agent without an external router")
	}
	b.SetLocalPrefixes(nil)
	pass(t, b)
	if calls, want := fs.last().takeCalls(), []string{"delete path 10.244.1.0/26 via 198.51.100.1", "policy"}; !slices.Equal(calls, want) {
		t.Errorf("block given up: %q, want %q", calls, want)
	}

	b.onBest(bestPath(blockOf(2), "198.51.100.2", false))
	b.onBest(bestPath(blockOf(2), "198.51.100.2", true))
	if want := []RouteUpdate{{Prefix: blockOf(2), NextHop: netip.MustParseAddr("198.51.100.2")}, {Prefix: blockOf(2), Withdrawn: true}}; !slices.Equal(got, want) {
		t.Errorf("OnRoute got %+v, want %+v", got, want)
	}
}

func bestPath(p netip.Prefix, nextHop string, withdrawn bool) speaker.Event {
	nh := netip.MustParseAddr(nextHop)
	return speaker.Event{Type: speaker.BestPath, Prefix: p, NextHop: nh, Peer: nh, Withdrawn: withdrawn, Time: time.Now()}
}
