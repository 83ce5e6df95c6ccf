package bird

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// TestGracefulRestart: Stop(true) leaves the node's routes at its peers; the restarted node
// re-advertises with no withdraw in between and what it no longer has goes after its
// End-of-RIB. Stop(false) withdraws at once.
func TestGracefulRestart(t *testing.T) {
	netnstest.Require(t)
	// GoBGP's 5 s Idle after a failed attempt hits differently depending on which side dials:
	// between tabby nodes the lower address dials, the higher one waits.
	t.Run("dialling side restarts", func(t *testing.T) { gracefulRestart(t, 21, 22) })
	t.Run("waiting side restarts", func(t *testing.T) { gracefulRestart(t, 24, 23) })
}

func gracefulRestart(t *testing.T, restarting, other int) {
	all := []model.Node{mkNode(restarting, nil, ""), mkNode(other, nil, "")}
	extra := netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/26", 100+restarting))
	a := startNode(t, all[0], all, func(b *Bird) { send(b, claim(extra, all[0].Name)) })
	b := startNode(t, all[1], all, nil)
	b.routes.waitRoute(t, a.block, addr4(a.Node), 15*time.Second)
	b.routes.waitRoute(t, extra, addr4(a.Node), 5*time.Second)
	a.routes.waitRoute(t, b.block, addr4(b.Node), 5*time.Second)

	b.routes.mu.Lock()
	updates := b.routes.updates
	b.routes.mu.Unlock()
	a.stop(t, true)
	down := time.Now()
	st := b.waitPeer(t, addr4(a.Node), "down", 5*time.Second)
	t.Logf("peer down after Stop(true); %s says: %q", b.Name, st.Info)
	// Longer than any hold timer of the test's sessions would allow without graceful restart.
	time.Sleep(time.Until(down.Add(3 * time.Second)))
	if _, ok := b.routes.get(a.block); !ok {
		t.Fatalf("%s dropped %s's block after a graceful-restart stop", b.Name, a.Name)
	}

	// node21 comes back, no longer owning the extra block.
	a2 := startNode(t, all[0], all, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a2.bird.WaitSynced(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := a2.routes.get(b.block); !ok {
		t.Error("WaitSynced returned before the restarted node re-learned its peer's block")
	}
	b.waitPeer(t, addr4(a.Node), "established", 20*time.Second)
	back := time.Since(down)
	b.routes.waitGone(t, extra, 10*time.Second)
	a2.routes.waitRoute(t, b.block, addr4(b.Node), 5*time.Second)
	b.routes.mu.Lock()
	got := b.routes.updates - updates
	b.routes.mu.Unlock()
	if got != 1 { // the stale extra block's withdraw, nothing for the block that stayed
		t.Errorf("node22 saw %d route updates across the restart, want 1 (withdraw of the stale block)", got)
	}
	if nh, ok := b.routes.get(a.block); !ok || nh != addr4(a.Node) {
		t.Errorf("node21's block after restart: %v %v", nh, ok)
	}
	t.Logf("session back %v after the graceful stop", back)

	a2.stop(t, false)
	if d := b.routes.waitGone(t, a.block, 2*time.Second); d > time.Second {
		t.Errorf("Stop(false) withdraw took %v", d)
	}
}

// TestDeadNodeFlush: a node whose link is cut loses its routes everywhere within the hold time,
// although graceful restart is on (GoBGP alone would keep them for the 120 s restart time).
func TestDeadNodeFlush(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(31, nil, ""), mkNode(32, nil, ""), mkNode(33, nil, "")}
	var tns []*testNode
	for _, n := range all {
		tns = append(tns, startNode(t, n, all, nil))
	}
	for _, tn := range tns[1:] {
		tn.routes.waitRoute(t, tns[0].block, addr4(tns[0].Node), 15*time.Second)
	}
	netnstest.CutLink(t, addr4(tns[0].Node))
	cut := time.Now()
	for _, tn := range tns[1:] {
		tn.routes.waitGone(t, tns[0].block, 12*time.Second)
		d := time.Since(cut)
		t.Logf("%s dropped the dead node's block %v after the cut", tn.Name, d)
		if d > 10*time.Second {
			t.Errorf("%s: %v to drop a dead node's routes, want < 10s", tn.Name, d)
		}
	}
	// The surviving pair is untouched.
	if _, ok := tns[1].routes.get(tns[2].block); !ok {
		t.Error("node32 lost node33's block")
	}
}

// TestRestartMarkFromNode: a node marked restarting (annotation, via Node.RestartingUntil)
// keeps its routes at its peers even when its sessions die without a notice.
func TestRestartMarkFromNode(t *testing.T) {
	netnstest.Require(t)
	all := []model.Node{mkNode(41, nil, ""), mkNode(42, nil, "")}
	a := startNode(t, all[0], all, nil)
	b := startNode(t, all[1], all, nil)
	b.routes.waitRoute(t, a.block, addr4(a.Node), 15*time.Second)
	marked := all[0]
	marked.RestartingUntil = time.Now().Add(time.Minute)
	send(b.bird, model.NodeUpdate{Node: marked})
	b.waitPeer(t, addr4(a.Node), "established", time.Second)
	// Let the input reach bird's state before the link goes.
	deadline := time.Now().Add(2 * time.Second)
	for {
		b.bird.mu.Lock()
		n, _ := b.bird.in.node(all[0].Name)
		ok := n.RestartingUntil.After(time.Now())
		b.bird.mu.Unlock()
		if ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	netnstest.CutLink(t, addr4(a.Node))
	st := b.waitPeer(t, addr4(a.Node), "down", 15*time.Second)
	if _, ok := b.routes.get(a.block); !ok {
		t.Fatalf("routes of a node marked restarting were dropped (status %+v)", st)
	}
	// The mark is lifted while the node is still away: the routes go.
	send(b.bird, model.NodeUpdate{Node: all[0]})
	b.routes.waitGone(t, a.block, 5*time.Second)
}
