package bird

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/speaker"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

var torPeer = v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: "198.51.100.250", ASNumber: 65000}}

// startFake is node1's agent over fake speakers, with node2, the pool and testBlocks, after its
// first pass.
func startFake(t *testing.T, cfgs ...func(*Config)) (*Bird, *fakeSpeakers, *routeTable) {
	t.Helper()
	b, fs, routes := newFakeBird(t, "node1", cfgs...)
	send(b, nodeUpdates(mkNode(1, nil, ""), mkNode(2, nil, ""))...)
	send(b, poolUpdate(pool))
	send(b, testBlockUpdates()...)
	pass(t, b)
	return b, fs, routes
}

// TestFirstPass: the speaker starts, then the policy, then this node's paths, then its peers:
// End-of-RIB goes out as soon as a session is up, so every path is there before.
func TestFirstPass(t *testing.T) {
	b, fs, _ := newFakeBird(t, "node1")
	send(b, nodeUpdates(mkNode(1, nil, ""), mkNode(2, nil, ""))...)
	send(b, poolUpdate(pool))
	send(b, testBlockUpdates()...)
	send(b, peerUpdates(torPeer)...)
	pass(t, b)
	want := []string{"start 1 198.51.100.1", "policy", "add path 10.244.1.0/26 via 198.51.100.1", "add peer 198.51.100.2", "add peer 198.51.100.250"}
	if got := fs.last().takeCalls(); !slices.Equal(got, want) {
		t.Errorf("first pass: %q, want %q", got, want)
	}
}

// TestPassBeforeThisNode: the passes before the datastore has named this node (the first runs at
// once) are no failure and start nothing; its NodeUpdate starts the speaker.
func TestPassBeforeThisNode(t *testing.T) {
	b, fs, _ := newFakeBird(t, "node1")
	send(b, nodeUpdates(mkNode(2, nil, ""))...)
	send(b, poolUpdate(pool))
	pass(t, b)
	if got := fs.last().takeCalls(); len(got) != 0 {
		t.Fatalf("before this node was known: %q, want nothing", got)
	}
	send(b, nodeUpdates(mkNode(1, nil, ""))...)
	pass(t, b)
	if got, want := fs.last().takeCalls(), []string{"start 1 198.51.100.1", "policy", "add peer 198.51.100.2"}; !slices.Equal(got, want) {
		t.Errorf("once this node is known: %q, want %q", got, want)
	}
}

// TestPassRunsOnlyWhatChanged: each change reaches the speaker as the calls it needs and
// nothing else; what changes no session computes none, and a block claimed or released
// elsewhere does not even wake the agent until an external router makes the policy depend on it.
func TestPassRunsOnlyWhatChanged(t *testing.T) {
	b, fs, _ := startFake(t)
	fs.last().takeCalls()
	other := netip.MustParsePrefix("10.244.240.64/26")
	mine := netip.MustParsePrefix("10.244.1.64/26")
	node3 := mkNode(3, nil, "")
	labelled := mkNode(2, map[string]string{"rack": "b"}, "")
	marked := labelled
	marked.RestartingUntil = time.Now().Add(time.Minute)
	for _, s := range []struct {
		name     string
		msgs     []any
		woken    bool // a pass has work
		computed bool // the sessions were computed again
		calls    []string
	}{
		{"a block elsewhere", []any{claim(other, "node240")}, false, false, nil},
		{"the block elsewhere released", []any{release(other)}, false, false, nil},
		{"a block of this node", []any{claim(mine, "node1")}, true, false, []string{"policy", "add path 10.244.1.64/26 via 198.51.100.1"}},
		{"the block of this node released", []any{release(mine)}, true, false, []string{"delete path 10.244.1.64/26 via 198.51.100.1", "policy"}},
		{"another node's labels", []any{model.NodeUpdate{Node: labelled}}, true, true, nil},
		{"another node's restart mark", []any{model.NodeUpdate{Node: marked}}, true, false, nil},
		{"a node joins", []any{model.NodeUpdate{Node: node3}}, true, true, []string{"add peer 198.51.100.3"}},
		{"an external router", peerUpdates(torPeer), true, true, []string{"policy", "add peer 198.51.100.250"}},
		{"a block elsewhere, with an external router", []any{claim(other, "node240")}, true, false, []string{"policy"}},
		{"a node leaves", []any{model.NodeRemove{Name: node3.Name}}, true, true, []string{"delete peer 198.51.100.3"}},
		{"a service CIDR", []any{confUpdate(&v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{ServiceClusterIPs: []v1.ServiceCIDR{{CIDR: "203.0.113.0/26"}}}})},
			true, true, []string{"policy", "add path 203.0.113.0/26 via 198.51.100.1"}},
	} {
		passes, computes := b.reconciles.Load(), b.computes
		send(b, s.msgs...)
		pass(t, b)
		if woken := b.reconciles.Load() > passes; woken != s.woken {
			t.Errorf("%s: pass had work: %v, want %v", s.name, woken, s.woken)
		}
		if computed := b.computes > computes; computed != s.computed {
			t.Errorf("%s: sessions computed: %v, want %v", s.name, computed, s.computed)
		}
		if got := fs.last().takeCalls(); !slices.Equal(got, s.calls) {
			t.Errorf("%s: calls %q, want %q", s.name, got, s.calls)
		}
	}
	if got, want := len(fs.last().policy.Explained), len(testBlocks)+1; got != want {
		t.Errorf("the policy explains %d prefixes, want %d", got, want)
	}
}

// TestIdentityChangeRestartsTheSpeaker: a new BGP address of this node restarts the speaker;
// the new one gets the policy, the paths and the peers again, and the routes learned through the
// old one leave the dataplane.
func TestIdentityChangeRestartsTheSpeaker(t *testing.T) {
	b, fs, routes := startFake(t)
	old := fs.last()
	old.takeCalls()
	learned := blockOf(2)
	old.emit(speaker.Event{Type: speaker.BestPath, Prefix: learned, NextHop: addr4(mkNode(2, nil, "")), Peer: addr4(mkNode(2, nil, "")), Time: time.Now()})
	routes.waitRoute(t, learned, addr4(mkNode(2, nil, "")), time.Second)

	moved := mkNode(1, nil, "")
	moved.BGPAddress.Set(ipfamily.IPv4, netip.MustParsePrefix("198.51.100.101/24"))
	send(b, model.NodeUpdate{Node: moved})
	pass(t, b)
	if got := old.takeCalls(); !slices.Equal(got, []string{"stop 1"}) {
		t.Errorf("old speaker: %q", got)
	}
	want := []string{"start 2 198.51.100.101", "policy", "add path 10.244.1.0/26 via 198.51.100.101", "add peer 198.51.100.2"}
	if got := fs.last().takeCalls(); !slices.Equal(got, want) {
		t.Errorf("new speaker: %q, want %q", got, want)
	}
	if _, ok := routes.get(learned); ok {
		t.Error("a route learned through the stopped speaker is still in the dataplane")
	}
}

// TestWaitForInSync: with WaitForInSync no session opens before InSync, while the speaker, the
// policy and the paths are set up already.
func TestWaitForInSync(t *testing.T) {
	b, fs, _ := startFake(t, func(c *Config) { c.WaitForInSync = true })
	want := []string{"start 1 198.51.100.1", "policy", "add path 10.244.1.0/26 via 198.51.100.1"}
	if got := fs.last().takeCalls(); !slices.Equal(got, want) {
		t.Errorf("before InSync: %q, want %q", got, want)
	}
	send(b, model.InSync{})
	pass(t, b)
	if got, want := fs.last().takeCalls(), []string{"add peer 198.51.100.2"}; !slices.Equal(got, want) {
		t.Errorf("after InSync: %q, want %q", got, want)
	}
}

// TestFailedStepIsRetried: what failed stays marked, and the next pass retries it alone.
func TestFailedStepIsRetried(t *testing.T) {
	b, fs, _ := newFakeBird(t, "node1")
	fs.prepare = func(f *fakeSpeaker) { f.fail["add peer"] = 1 }
	send(b, nodeUpdates(mkNode(1, nil, ""), mkNode(2, nil, ""))...)
	send(b, poolUpdate(pool))
	send(b, claim(blockOf(1), "node1"))
	if err := b.CompleteDeferredWork(t.Context()); err == nil {
		t.Fatal("a failed AddPeer was not reported")
	}
	fs.last().takeCalls()
	if !b.timedWork() {
		t.Error("a failure does not make the timer wake the agent")
	}
	computes := b.computes
	pass(t, b)
	if got, want := fs.last().takeCalls(), []string{"add peer 198.51.100.2"}; !slices.Equal(got, want) {
		t.Errorf("retry: %q, want %q", got, want)
	}
	if b.computes != computes {
		t.Error("the retry computed the sessions again")
	}
	if b.timedWork() {
		t.Error("nothing left to do, yet the timer would wake the agent")
	}
}
