package bird

import (
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// TestRedialDecision: only a tabby node peer that has not been established since it was added
// (so the speaker holds no route from it) is re-added after a connection that ended before the
// session opened, and only maxRedials times in a row. The real path (a node restarting faster
// than its helper's 5 s Idle) runs in TestGracefulRestart's "dialling side restarts".
func TestRedialDecision(t *testing.T) {
	b, err := New(Config{NodeName: "node1", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	node, tor := netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("198.51.100.250")
	b.desired = map[netip.Addr]peers.Peer{node: {Address: node, Node: "node2"}, tor: {Address: tor}}
	states := func(addr netip.Addr, list ...string) {
		for _, s := range list {
			b.onState(speaker.Event{Type: speaker.PeerStateChanged, Peer: addr, State: s, Time: time.Now()})
		}
	}

	states(node, "active", "opensent", "idle")
	if !b.takeRedial(node) {
		t.Error("node peer refused before its first session: not re-added")
	}
	if b.takeRedial(node) {
		t.Error("one refusal re-added the peer twice")
	}
	states(node, "active", "idle") // the dial itself failed: GoBGP stays active, nothing to do
	if b.takeRedial(node) {
		t.Error("re-added after a transition that was not a refused connection")
	}

	states(tor, "active", "opensent", "idle")
	if b.takeRedial(tor) {
		t.Error("external router re-added: only tabby node sessions are redialled")
	}

	// Once established, the speaker holds the peer's routes (perhaps as graceful-restart
	// stale routes): deleting the peer would drop them.
	states(node, "active", "opensent", "openconfirm", "established", "idle", "active", "opensent", "idle")
	if b.takeRedial(node) {
		t.Error("peer re-added after it had been established")
	}

	// Re-added (the neighbor reconciler clears upSinceAdded), then refused again and again.
	b.adding(node)
	n := 0
	for range maxRedials + 3 {
		states(node, "active", "opensent", "idle")
		if b.takeRedial(node) {
			n++
		}
	}
	if n != maxRedials {
		t.Errorf("%d re-adds in a row for a peer that keeps refusing, want %d", n, maxRedials)
	}
}
