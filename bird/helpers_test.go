package bird

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func TestMain(m *testing.M) { netnstest.Main(m) }

var pool = netip.MustParsePrefix("10.244.0.0/16")

// routeTable records the learned routes (Config.Routes) as felix would apply them.
type routeTable struct {
	mu      sync.Mutex
	changed chan struct{}
	routes  map[netip.Prefix]netip.Addr
	// full are the updates as sent (every next hop of a multipath route).
	full    map[netip.Prefix]model.RouteUpdate
	updates int
}

func newRouteTable() *routeTable {
	return &routeTable{routes: map[netip.Prefix]netip.Addr{}, full: map[netip.Prefix]model.RouteUpdate{}, changed: make(chan struct{})}
}

func (r *routeTable) apply(msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch m := msg.(type) {
	case model.RouteUpdate:
		r.routes[m.Prefix], r.full[m.Prefix] = m.NextHop, m
	case model.RouteRemove:
		delete(r.routes, m.Prefix)
		delete(r.full, m.Prefix)
	default:
		panic(fmt.Sprintf("route sink got %T", msg))
	}
	r.updates++
	close(r.changed)
	r.changed = make(chan struct{})
}

// hops waits until the route to p goes over exactly want (sorted), and returns how long it took.
func (r *routeTable) waitHops(t testing.TB, p netip.Prefix, want []netip.Addr, timeout time.Duration) time.Duration {
	t.Helper()
	return r.wait(t, fmt.Sprintf("%s via %v", p, want), timeout, func(map[netip.Prefix]netip.Addr) bool {
		u, ok := r.full[p]
		return ok && slices.Equal(u.Hops(), want)
	})
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
	model.Node
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
func mkNode(i int, labels map[string]string, cluster string) model.Node {
	return model.Node{
		Name:        fmt.Sprintf("node%d", i),
		Labels:      labels,
		BGPAddress:  ipfamily.PairOf(netip.MustParsePrefix(fmt.Sprintf("198.51.100.%d/24", i)), netip.Prefix{}),
		RRClusterID: cluster,
	}
}

// withIPv6Address is n with an IPv6 BGP address.
func withIPv6Address(n model.Node, p netip.Prefix) model.Node {
	n.BGPAddress.Set(ipfamily.IPv6, p)
	return n
}

// addr4 and addr6 are a node's BGP addresses (invalid: none of that family).
func addr4(n model.Node) netip.Addr { return n.BGPAddress.Get(ipfamily.IPv4).Addr() }
func addr6(n model.Node) netip.Addr { return n.BGPAddress.Get(ipfamily.IPv6).Addr() }

func blockOf(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/26", i)) }

// testBlocks is what IPAM holds in the tests' datastore: the first /26 of every /24 of the pool,
// 10.244.i.0/26 affine to node i (each test node's block among them).
var testBlocks = func() []netip.Prefix {
	var out []netip.Prefix
	for i := 0; i < 256; i++ {
		out = append(out, blockOf(i))
	}
	return out
}()

// send hands b the messages, in order.
func send(b *Bird, msgs ...any) {
	for _, m := range msgs {
		b.OnUpdate(m)
	}
}

// nodeUpdates are the messages of nodes joining or changing.
func nodeUpdates(nodes ...model.Node) []any {
	var out []any
	for _, n := range nodes {
		out = append(out, model.NodeUpdate{Node: n})
	}
	return out
}

// poolUpdate is the message of an IPPool with this CIDR.
func poolUpdate(cidr netip.Prefix) model.PoolUpdate {
	return model.PoolUpdate{Pool: model.Pool{Name: "pool-" + cidr.String(), CIDR: cidr}}
}

// claim is the message of a block claimed by (affine to) node; node "" is a block whose node is
// gone.
func claim(cidr netip.Prefix, node string) model.BlockUpdate {
	return model.BlockUpdate{Block: model.Block{CIDR: cidr, Node: node}}
}

// release is the message of a block released.
func release(cidr netip.Prefix) model.BlockRemove { return model.BlockRemove{CIDR: cidr} }

// testBlockUpdates are the messages of testBlocks, each affine to its node.
func testBlockUpdates() []any {
	var out []any
	for i, p := range testBlocks {
		out = append(out, claim(p, fmt.Sprintf("node%d", i)))
	}
	return out
}

// peerUpdates are the messages of BGPPeers created or changed.
func peerUpdates(list ...v1.BGPPeer) []any {
	var out []any
	for _, p := range list {
		out = append(out, model.BGPPeerUpdate{Peer: &p})
	}
	return out
}

// confUpdate is the message of the BGPConfiguration.
func confUpdate(c *v1.BGPConfiguration) model.BGPConfigurationUpdate {
	return model.BGPConfigurationUpdate{Config: c}
}

// startNode starts a Bird for n; all nodes are the cluster, with the pool and testBlocks; setup
// runs before Run (more inputs).
func startNode(t testing.TB, n model.Node, all []model.Node, setup func(*Bird), cfgs ...func(*Config)) *testNode {
	t.Helper()
	if a := addr4(n); a.IsValid() {
		netnstest.AddLoopback(t, a)
	}
	if a := addr6(n); a.IsValid() {
		netnstest.AddLoopback(t, a) // the speaker listens on it
	}
	tn := &testNode{Node: n, routes: newRouteTable(), done: make(chan struct{})}
	var i int
	fmt.Sscanf(addr4(n).String(), "198.51.100.%d", &i)
	tn.block = blockOf(i)
	cfg := Config{NodeName: n.Name, Routes: tn.routes.apply, Logger: testLogger().With("node", n.Name)}
	for _, f := range cfgs {
		f(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn.bird = b
	send(b, nodeUpdates(all...)...)
	send(b, poolUpdate(pool))
	send(b, testBlockUpdates()...)
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
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 179).String()
	}
	return s + ":179"
}

// claims6 are the messages of the IPv6 blocks block6Of(id), each affine to node id.
func claims6(ids ...int) []any {
	var out []any
	for _, id := range ids {
		out = append(out, claim(block6Of(id), fmt.Sprintf("node%d", id)))
	}
	return out
}

// secretUpdates are the messages of Secrets created or changed.
func secretUpdates(secrets map[string]map[string][]byte) []any {
	var out []any
	for name, data := range secrets {
		out = append(out, model.SecretUpdate{Name: name, Data: data})
	}
	return out
}

// addNetns adds a named network namespace for the test and removes it at cleanup. Its name ends
// in the test process's PID: one left behind by a process that died without its cleanups (killed
// by go test's timeout) is removed first, whatever test made it.
func addNetns(t testing.TB, name string) {
	t.Helper()
	sweepNetnsOnce.Do(sweepDeadNetns)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
}

var sweepNetnsOnce sync.Once

var testNetnsName = regexp.MustCompile(`^tabby-test-.*-([0-9]+)$`)

func sweepDeadNetns() {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		m := testNetnsName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if _, err := os.Stat("/proc/" + m[1]); os.IsNotExist(err) {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}
