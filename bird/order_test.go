package bird

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/bird/speaker"
	"github.com/tabbynet/tabby/internal/testwait"
)

// callLog is a Speaker that records the calls that change routes or filters, in order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) record(s string) {
	c.mu.Lock()
	c.calls = append(c.calls, s)
	c.mu.Unlock()
}

func (c *callLog) since(i int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls[min(i, len(c.calls)):])
}

func (c *callLog) Start(context.Context, peers.Speaker) error       { return nil }
func (c *callLog) Stop(context.Context, bool) error                 { return nil }
func (c *callLog) AddPeer(context.Context, peers.Peer) error        { return nil }
func (c *callLog) DeletePeer(context.Context, netip.Addr) error     { return nil }
func (c *callLog) UpdateBFD(context.Context, peers.Peer) error      { return nil }
func (c *callLog) Watch(context.Context, func(speaker.Event)) error { return nil }
func (c *callLog) Peers(context.Context) ([]speaker.PeerState, error) {
	c.record("peers")
	return nil, nil
}

func (c *callLog) Accepted(context.Context) (map[netip.Addr]map[string]uint64, error) {
	return nil, nil
}

func (c *callLog) AddPath(_ context.Context, p netip.Prefix, _ netip.Addr) error {
	c.record("add " + p.String())
	return nil
}

func (c *callLog) DeletePath(_ context.Context, p netip.Prefix, _ netip.Addr) error {
	c.record("delete " + p.String())
	return nil
}

func (c *callLog) SetPolicy(_ context.Context, p speaker.Policy) error {
	r := fmt.Sprintf("policy local=%v", p.Local)
	if len(p.Explained) > 0 {
		r += fmt.Sprintf(" explained=%d", len(p.Explained))
	}
	c.record(r)
	return nil
}

// newLogged is a Bird of node self over the recording speaker spk.
func newLogged(t *testing.T, spk *callLog, self model.Node) *Bird {
	t.Helper()
	b, err := New(Config{NodeName: self.Name, Logger: testLogger(),
		NewSpeaker: func(*slog.Logger, string) (speaker.Speaker, error) { return spk, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run runs b until the test ends.
func run(t *testing.T, b *Bird) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitTicks waits until Run has handled n more ticks of its timer.
func waitTicks(t *testing.T, b *Bird, n int64) {
	t.Helper()
	from := b.ticks.Load()
	testwait.Until(t, fmt.Sprintf("%d timer ticks", n), time.Duration(n+2)*time.Second, func() bool { return b.ticks.Load() >= from+n })
}

// TestWithdrawalBeforePolicy: a block the node gives up is withdrawn before the policy that
// no longer counts it as the node's own is set; a new block is advertised after its policy.
func TestWithdrawalBeforePolicy(t *testing.T) {
	spk := &callLog{}
	self := mkNode(31, nil, "")
	b := newLogged(t, spk, self)
	a, c := blockOf(31), netip.MustParsePrefix("10.244.31.64/26")
	send(b, nodeUpdates(self)...)
	send(b, poolUpdate(pool))
	send(b, testBlockUpdates()...) // a among them
	run(t, b)

	waitCalls := func(from int, want ...string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := spk.since(from)
			if len(got) >= len(want) {
				if !slices.Equal(got[:len(want)], want) {
					t.Fatalf("speaker calls %q, want %q first", got, want)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("speaker calls %q, want %q", got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitCalls(0, "policy local=[10.244.31.0/26]", "add 10.244.31.0/26")
	n := len(spk.since(0))
	send(b, release(a))
	waitCalls(n, "delete 10.244.31.0/26", "policy local=[]")
	n = len(spk.since(0))
	send(b, claim(c, self.Name))
	waitCalls(n, "policy local=[10.244.31.64/26]", "add 10.244.31.64/26")
}

// runTwoNodes runs the agent of node31 (with node32 beside it, its block and the pool; with
// allBlocks, testBlocks) over a recording speaker until its first policy and path are set.
func runTwoNodes(t *testing.T, allBlocks bool) (*callLog, *Bird) {
	t.Helper()
	spk := &callLog{}
	self := mkNode(31, nil, "")
	b := newLogged(t, spk, self)
	send(b, nodeUpdates(self, mkNode(32, nil, ""))...)
	send(b, poolUpdate(pool))
	if allBlocks {
		send(b, testBlockUpdates()...)
	}
	send(b, claim(blockOf(31), self.Name))
	run(t, b)
	testwait.Until(t, "the first reconcile's policy and path", 5*time.Second, func() bool { return len(spk.since(0)) >= 2 })
	return spk, b
}

// TestIdleDoesNotReconcile: with nothing changing and nothing time-bound pending, the agent does
// not recompute its peers (a recomputation walks every node of the cluster); a change still
// reconciles at once.
func TestIdleDoesNotReconcile(t *testing.T) {
	_, b := runTwoNodes(t, false)
	// Three ticks of the once-a-second timer with nothing to do.
	before := b.reconciles.Load()
	waitTicks(t, b, 3)
	if n := b.reconciles.Load() - before; n != 0 {
		t.Fatalf("%d reconciles while idle, want 0", n)
	}
	send(b, claim(netip.MustParsePrefix("10.244.31.64/26"), "node31"))
	testwait.Until(t, "a reconcile after a change", 5*time.Second, func() bool { return b.reconciles.Load() > before })
}

// TestRoutableWithoutRouterDoesNotReconcile: every block claimed or released in the cluster
// changes what IPAM explains, and without an external router nothing in the speaker depends on
// it, so it does not wake the agent; with one, the policy follows it.
func TestRoutableWithoutRouterDoesNotReconcile(t *testing.T) {
	spk, b := runTwoNodes(t, true)

	before := b.reconciles.Load()
	elsewhere := netip.MustParsePrefix("10.244.240.64/26")
	send(b, claim(elsewhere, "node240"))
	waitTicks(t, b, 2)
	if n := b.reconciles.Load() - before; n != 0 {
		t.Fatalf("%d reconciles for another node's block without an external router, want 0", n)
	}

	// An external router: the policy carries what IPAM explains, the change made meanwhile too.
	n := len(spk.since(0))
	send(b, peerUpdates(v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: "198.51.100.250", ASNumber: 65000}})...)
	want := fmt.Sprintf("policy local=[10.244.31.0/26] explained=%d", len(testBlocks)+1)
	testwait.Until(t, want, 5*time.Second, func() bool { return slices.Contains(spk.since(n), want) })
	n = len(spk.since(0))
	send(b, release(elsewhere))
	want = fmt.Sprintf("policy local=[10.244.31.0/26] explained=%d", len(testBlocks))
	testwait.Until(t, want, 5*time.Second, func() bool { return slices.Contains(spk.since(n), want) })
}
