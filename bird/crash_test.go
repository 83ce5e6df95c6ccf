package bird

import (
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
)

// TestCrashIsARestart: a session with a tabby node that GoBGP ends as "graceful-restart" with
// nothing logged before (the node's kernel closed the connection of a tabby-node that died)
// keeps the node's routes for the restart time and drops them only if it is not back by then;
// one that ended after a hold-timer expiry or a NOTIFICATION is a death, its routes dropped at
// once. The real path (tabby-node SIGKILLed with traffic running) is hack/chaos's
// TestFaultsCI.
func TestCrashIsARestart(t *testing.T) {
	node := netip.MustParseAddr("198.51.100.2")
	const restart = 30 * time.Second
	end := func(t *testing.T, logs ...string) (*Bird, time.Time) {
		b, err := New(Config{NodeName: "node1", Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		b.desired = map[netip.Addr]peers.Peer{node: {Address: node, Node: "node2", RestartTime: restart}}
		now := time.Now()
		for _, s := range []string{"active", "opensent", "openconfirm", "established"} {
			b.onState(speaker.Event{Type: speaker.PeerStateChanged, Peer: node, State: s, Time: now})
		}
		for _, m := range append(logs, "Peer Down reason=graceful-restart") {
			b.onPeerLog(speaker.Event{Type: speaker.PeerLog, Peer: node, Message: m, Time: now})
		}
		b.onState(speaker.Event{Type: speaker.PeerStateChanged, Peer: node, State: "idle", Reason: "graceful-restart", Time: now})
		return b, now
	}

	t.Run("closed without a notice", func(t *testing.T) {
		b, now := end(t)
		if b.takeFlush(node, b.desired[node], now.Add(time.Second)) {
			t.Fatal("routes of a node whose tabby-node died on a live node dropped at once")
		}
		if !b.takeFlush(node, b.desired[node], now.Add(restart+time.Second)) {
			t.Fatal("routes kept after the restart time ended without the node back")
		}
	})
	t.Run("back within the restart time", func(t *testing.T) {
		b, now := end(t)
		b.onState(speaker.Event{Type: speaker.PeerStateChanged, Peer: node, State: "established", Time: now.Add(2 * time.Second)})
		if b.takeFlush(node, b.desired[node], now.Add(restart+time.Second)) {
			t.Fatal("routes of a node that came back dropped when its restart window ended")
		}
	})
	for _, why := range []string{"hold timer expired", "received notification code=6 subcode=2"} {
		t.Run(why, func(t *testing.T) {
			b, now := end(t, why)
			if !b.takeFlush(node, b.desired[node], now) {
				t.Fatalf("session ended after %q kept the routes: a dead node must lose them at once", why)
			}
		})
	}
}
