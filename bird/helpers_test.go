package bird

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

func TestMain(m *testing.M) { netnstest.Main(m) }

var pool = netip.MustParsePrefix("10.244.0.0/16")

// routeTable records OnRoute as felix would apply it.
type routeTable struct {
	mu      sync.Mutex
	changed chan struct{}
	routes  map[netip.Prefix]netip.Addr
	updates int
}

func newRouteTable() *routeTable {
	return &routeTable{routes: map[netip.Prefix]netip.Addr{}, changed: make(chan struct{})}
}

func (r *routeTable) apply(u RouteUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u.Withdrawn {
		delete(r.routes, u.Prefix)
	} else {
		r.routes[u.Prefix] = u.NextHop
	}
	r.updates++
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *routeTable) get(p netip.Prefix) (netip.Addr, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	nh, ok := r.routes[p]
	return nh, ok
}

// wait polls cond on every change, until the deadline.
func (r *routeTable) wait(t testing.TB, what string, timeout time.Duration, cond func(map[netip.Prefix]netip.Addr) bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		ok := cond(r.routes)
		ch := r.changed
		snapshot := fmt.Sprint(r.routes)
		r.mu.Unlock()
		if ok {
			return time.Since(start)
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("after %v: %s; routes: %s", timeout, what, snapshot)
		}
	}
}

func (r *routeTable) waitRoute(t testing.TB, p netip.Prefix, nh netip.Addr, timeout time.Duration) time.Duration {
	t.Helper()
	return r.wait(t, fmt.Sprintf("want %s via %s", p, nh), timeout, func(m map[netip.Prefix]netip.Addr) bool { return m[p] == nh })
}

func (r *routeTable) waitGone(t testing.TB, p netip.Prefix, timeout time.Duration) time.Duration {
	t.Helper()
	return r.wait(t, fmt.Sprintf("want %s gone", p), timeout, func(m map[netip.Prefix]netip.Addr) bool { _, ok := m[p]; return !ok })
}

// testNode is one tabby node's BGP agent.
type testNode struct {
	Node
	bird   *Bird
	routes *routeTable
	block  netip.Prefix
	cancel context.CancelFunc
	done   chan struct{}
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("BIRD_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// mkNode returns node i: address 198.51.100.i/24 and block 10.244.i.0/26.
func mkNode(i int, labels map[string]string, cluster string) Node {
	return Node{
		Name:        fmt.Sprintf("node%d", i),
		Labels:      labels,
		Address:     netip.MustParsePrefix(fmt.Sprintf("198.51.100.%d/24", i)),
		RRClusterID: cluster,
	}
}

func blockOf(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/26", i)) }

// testBlocks is what IPAM would explain in the tests' datastore: the first /26 of every /24
// of the pool (each test node's block among them).
var testBlocks = func() []netip.Prefix {
	var out []netip.Prefix
	for i := 0; i < 256; i++ {
		out = append(out, blockOf(i))
	}
	return out
}()

// startNode starts a Bird for n; setup runs before Run (inputs), all nodes are the cluster.
func startNode(t testing.TB, n Node, all []Node, setup func(*Bird), cfgs ...func(*Config)) *testNode {
	t.Helper()
	if n.Address.IsValid() {
		netnstest.AddLoopback(t, n.Address.Addr())
	}
	if n.Address6.IsValid() {
		netnstest.AddLoopback(t, n.Address6.Addr()) // the speaker listens on it
	}
	tn := &testNode{Node: n, routes: newRouteTable(), done: make(chan struct{})}
	var i int
	fmt.Sscanf(n.Address.Addr().String(), "198.51.100.%d", &i)
	tn.block = blockOf(i)
	cfg := Config{NodeName: n.Name, OnRoute: tn.routes.apply, Logger: testLogger().With("node", n.Name)}
	for _, f := range cfgs {
		f(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn.bird = b
	b.SetNodes(all)
	b.SetPools([]netip.Prefix{pool})
	b.SetRoutable(testBlocks)
	b.SetLocalPrefixes([]netip.Prefix{tn.block})
	if setup != nil {
		setup(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel = cancel
	go func() {
		defer close(tn.done)
		if err := b.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", n.Name, err)
		}
	}()
	t.Cleanup(func() { tn.stop(t, false) })
	return tn
}

func (tn *testNode) stop(t testing.TB, restart bool) {
	if err := tn.bird.Stop(restart); err != nil {
		t.Errorf("%s: Stop(%v): %v", tn.Name, restart, err)
	}
	tn.cancel()
	<-tn.done
}

// waitPeer waits until the node's session with addr is in state ("down": any but established).
func (tn *testNode) waitPeer(t testing.TB, addr netip.Addr, state string, timeout time.Duration) PeerStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last []PeerStatus
	for time.Now().Before(deadline) {
		last = tn.bird.Peers()
		for _, p := range last {
			if p.Address == addr.String() || netip.MustParseAddrPort(orPort(p.Address)).Addr() == addr {
				if p.State == state || (state == "down" && p.State != "established") {
					return p
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: peer %s not %s after %v: %+v", tn.Name, addr, state, timeout, last)
	return PeerStatus{}
}

func orPort(s string) string {
	if _, err := netip.ParseAddrPort(s); err == nil {
		return s
	}
	return s + ":179"
}
