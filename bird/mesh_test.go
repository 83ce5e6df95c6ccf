package bird

import (
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// TestMesh: a full mesh forms, routes flow with the owner as next hop, a joining node adds
// sessions without resetting others, a withdrawn block goes at once, and a deleted node's
// session and routes go at once.
func TestMesh(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(1, nil, ""), mkNode(2, nil, ""), mkNode(3, nil, "")}
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, nil))
	}
	for _, a := range tns {
		for _, b := range tns {
			if a != b {
				a.routes.waitRoute(t, b.block, addr4(b.Node), 15*time.Second)
			}
		}
	}
	before := tns[0].waitPeer(t, addr4(tns[1].Node), "established", time.Second)

	// A fourth node joins.
	n4 := mkNode(4, nil, "")
	all4 := append(all[:3:3], n4)
	for _, tn := range tns {
		send(tn.bird, model.NodeUpdate{Node: n4})
	}
	t4 := startNode(t, n4, all4, nil)
	for _, tn := range tns {
		tn.routes.waitRoute(t, t4.block, addr4(t4.Node), 15*time.Second)
		t4.routes.waitRoute(t, tn.block, addr4(tn.Node), 15*time.Second)
	}
	after := tns[0].waitPeer(t, addr4(tns[1].Node), "established", time.Second)
	if !after.Since.Equal(before.Since) {
		t.Errorf("session node1-node2 was reset by node4 joining: since %v, then %v", before.Since, after.Since)
	}

	// node1 withdraws its block.
	send(tns[0].bird, release(tns[0].block))
	for _, tn := range append(tns[1:], t4) {
		if d := tn.routes.waitGone(t, tns[0].block, 2*time.Second); d > time.Second {
			t.Errorf("%s: withdraw took %v", tn.Name, d)
		}
	}

	// node4's Kubernetes Node is deleted (its agent keeps running, e.g. a partitioned node).
	for _, tn := range tns {
		send(tn.bird, model.NodeRemove{Name: n4.Name})
	}
	for _, tn := range tns[1:] {
		if d := tn.routes.waitGone(t, t4.block, 2*time.Second); d > time.Second {
			t.Errorf("%s: deleted node's route took %v to go", tn.Name, d)
		}
	}
	for _, p := range tns[1].bird.Peers() {
		if p.Node == n4.Name {
			t.Errorf("node2 still lists a session with deleted node4: %+v", p)
		}
	}
}
