package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// barrierStore holds every CreateBlock until n callers are waiting, so two nodes really race for
// the same free block, and counts the losers.
type barrierStore struct {
	ipam.Store
	wg     sync.WaitGroup
	lost   atomic.Int32
	onceMu sync.Mutex
	armed  bool
}

func (s *barrierStore) CreateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error) {
	s.onceMu.Lock()
	armed := s.armed
	s.onceMu.Unlock()
	if armed {
		s.wg.Done()
		s.wg.Wait()
		s.onceMu.Lock()
		s.armed = false
		s.onceMu.Unlock()
	}
	got, err := s.Store.CreateBlock(ctx, b)
	if apierrors.IsAlreadyExists(err) {
		s.lost.Add(1)
	}
	return got, err
}

func TestRealClaimRace(t *testing.T) { forFamilies(t, testRealClaimRace) }

func testRealClaimRace(t *testing.T, f family) {
	e := sharedEnv(t)
	ctx := context.Background()
	pool := f.cidr("10.244.8.0/26")
	na, nb := f.name("race-a"), f.name("race-b")
	scenario(t, e, f.name("race"), pool, f.blockSize(28), na, nb)
	bs := &barrierStore{Store: kubeStore(t, e), armed: true}
	bs.wg.Add(2)
	a, b := ipam.New(bs, ipam.Config{}), ipam.New(bs, ipam.Config{})
	var x, y ipam.Assignment
	var ex, ey error
	var wg sync.WaitGroup
	wg.Go(func() { x, ex = a.Assign(ctx, f.req(ipam.Request{Handle: "net." + na, Node: na})) })
	wg.Go(func() { y, ey = b.Assign(ctx, f.req(ipam.Request{Handle: "net." + nb, Node: nb})) })
	wg.Wait()
	if ex != nil || ey != nil {
		t.Fatalf("assign: %v / %v", ex, ey)
	}
	if bs.lost.Load() != 1 {
		t.Fatalf("exactly one Create must lose the race, %d did", bs.lost.Load())
	}
	if x.Block == y.Block || x.Borrowed || y.Borrowed {
		t.Fatalf("the loser must claim another block: %+v %+v", x, y)
	}
	for _, blk := range blocksIn(t, e, pool) {
		want := map[string]string{x.Block.String(): na, y.Block.String(): nb}[blk.Spec.CIDR]
		if blk.Spec.Affinity != "host:"+want {
			t.Fatalf("block %s affinity %q, want host:%s", blk.Spec.CIDR, blk.Spec.Affinity, want)
		}
		if _, err := e.Client.BlockAffinities().Get(ctx, names.AffinityName(want, mustPrefix(blk.Spec.CIDR))); err != nil {
			t.Fatalf("affinity of %s: %v", blk.Spec.CIDR, err)
		}
	}
}

func TestRealInvariants(t *testing.T) { forFamilies(t, testRealInvariants) }

func testRealInvariants(t *testing.T, f family) {
	e := sharedEnv(t)
	ctx := context.Background()
	nodes := []string{f.name("inv-a"), f.name("inv-b"), f.name("inv-c")}
	pool := f.cidr("10.244.16.0/22")
	scenario(t, e, f.name("inv"), pool, f.blockSize(26), nodes...)
	store := kubeStore(t, e)
	type got struct {
		node, handle string
		as           ipam.Assignment
	}
	var mu sync.Mutex
	var all []got
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for _, n := range nodes {
		alloc := ipam.New(store, ipam.Config{})
		sem := make(chan struct{}, 20)
		for i := range 100 {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				h := fmt.Sprintf("net.%s-%d", n, i)
				as, err := alloc.Assign(ctx, f.req(ipam.Request{Handle: h, Node: n, Namespace: "default", Pod: fmt.Sprintf("%s-%d", n, i)}))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, got{n, h, as})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("300 assigns (3 nodes x 100, 20 concurrent per node) in %v", time.Since(start).Round(time.Millisecond))
	if len(all) != 300 {
		t.Fatalf("%d assignments", len(all))
	}
	seen := map[netip.Addr]string{}
	for _, g := range all {
		if prev, dup := seen[g.as.IP]; dup {
			t.Fatalf("%v given to %s and %s", g.as.IP, prev, g.handle)
		}
		seen[g.as.IP] = g.handle
	}
	blocks := blocksIn(t, e, pool)
	byCIDR := map[string]v1.IPAMBlock{}
	for _, b := range blocks {
		byCIDR[b.Spec.CIDR] = b
	}
	for _, g := range all {
		b, ok := byCIDR[g.as.Block.String()]
		if !ok || !g.as.Block.Contains(g.as.IP) || ipfamily.OfAddr(g.as.IP) != f.Family {
			t.Fatalf("%s: %v not in an existing block", g.handle, g.as.IP)
		}
		affine := b.Spec.Affinity == "host:"+g.node
		if affine == g.as.Borrowed {
			t.Fatalf("%s: block %s affinity %q but borrowed=%v", g.handle, b.Spec.CIDR, b.Spec.Affinity, g.as.Borrowed)
		}
		o, _ := ipam.OrdinalOf(g.as.Block, g.as.IP)
		al := b.Spec.Allocations[fmt.Sprint(o)]
		if al.Handle != g.handle || al.Node != g.node {
			t.Fatalf("%s: block records %+v", g.handle, al)
		}
	}
	rep, err := ipam.Check(ctx, store)
	if err != nil || len(rep.DuplicateIPs) != 0 || len(rep.HandlesWithoutAllocation) != 0 || len(rep.WithoutHandle) != 0 {
		t.Fatalf("check: %+v %v", rep, err)
	}

	start = time.Now()
	// Another process, as after a restart: it finds the addresses through the nodes' blocks,
	// which it loads as a DEL does (the plugins name the node).
	releaser := ipam.New(store, ipam.Config{})
	for _, n := range nodes {
		if err := releaser.LoadNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	sem := make(chan struct{}, 20)
	errs = make(chan error, 300)
	for _, g := range all {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := releaser.ReleaseHandle(ctx, g.handle); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("300 releases (20 concurrent) in %v", time.Since(start).Round(time.Millisecond))
	n := 0
	for _, b := range blocksIn(t, e, pool) {
		n += len(b.Spec.Allocations)
	}
	hl, err := e.Client.IPAMHandles().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, h := range hl.Items {
		if slices.ContainsFunc(nodes, func(n string) bool { return strings.HasPrefix(h.Spec.HandleID, "net."+n+"-") }) {
			left++
		}
	}
	if n != 0 || left != 0 {
		t.Fatalf("after releasing all: %d allocations and %d handles remain", n, left)
	}
}

func TestRealExhaustionAndBorrowing(t *testing.T) { forFamilies(t, testRealExhaustionAndBorrowing) }

func testRealExhaustionAndBorrowing(t *testing.T, f family) {
	e := sharedEnv(t)
	ctx := context.Background()
	nodes := []string{f.name("exh-a"), f.name("exh-b"), f.name("exh-c")}
	pool := f.cidr("10.244.24.0/26")
	scenario(t, e, f.name("exh"), pool, f.blockSize(28), nodes...)
	store := kubeStore(t, e)
	allocs := map[string]*ipam.Allocator{}
	for _, n := range nodes {
		allocs[n] = ipam.New(store, ipam.Config{})
	}
	seen := map[netip.Addr]bool{}
	assign := func(n string, i int) (ipam.Assignment, error) {
		as, err := allocs[n].Assign(ctx, f.req(ipam.Request{Handle: fmt.Sprintf("net.%s-%d", n, i), Node: n}))
		if err == nil {
			if seen[as.IP] {
				t.Fatalf("duplicate %v", as.IP)
			}
			seen[as.IP] = true
		}
		return as, err
	}
	// a and b claim two blocks each: the pool has no free block left.
	for _, n := range nodes[:2] {
		for i := range 17 {
			if as, err := assign(n, i); err != nil || as.Borrowed {
				t.Fatalf("%s #%d: %+v %v", n, i, as, err)
			}
		}
	}
	if got := len(blocksIn(t, e, pool)); got != 4 {
		t.Fatalf("%d blocks claimed, want 4", got)
	}
	// c borrows the remaining 30 addresses from a's and b's blocks.
	for i := range 30 {
		as, err := assign(nodes[2], i)
		if err != nil || !as.Borrowed {
			t.Fatalf("c #%d: %+v %v", i, as, err)
		}
	}
	strict := ipam.New(store, ipam.Config{StrictAffinity: true})
	over := "net." + f.name("exh-over")
	for _, al := range []*ipam.Allocator{allocs[nodes[2]], allocs[nodes[0]], strict} {
		_, err := al.Assign(ctx, f.req(ipam.Request{Handle: over, Node: nodes[2]}))
		if err == nil || !strings.Contains(err.Error(), "pool "+pool+" exhausted") {
			t.Fatalf("want exhausted, got %v", err)
		}
	}
	if _, err := e.Client.IPAMHandles().Get(ctx, names.HandleName(over)); !apierrors.IsNotFound(err) {
		t.Fatalf("a failed assign left its handle: %v", err)
	}
	if len(seen) != 64 {
		t.Fatalf("%d addresses handed out, want 64", len(seen))
	}
	// Who holds a borrowed address, as the CLI shows it.
	c0 := fmt.Sprintf("net.%s-0", nodes[2])
	as, _ := allocs[nodes[2]].Lookup(ctx, c0)
	o, err := ipam.WhoHas(ctx, store, as[0].IP)
	if err != nil || o.Node != nodes[2] || !o.Borrowed || o.BlockNode == nodes[2] || o.Handle != c0 {
		t.Fatalf("WhoHas: %+v %v", o, err)
	}
	u, err := ipam.GetUsage(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range u.Pools {
		if p.Name == f.name("exh") && (p.Total.Int64() != 64 || p.InUse != 64 || p.Free.Sign() != 0 || p.Blocks != 4) {
			t.Fatalf("usage: %+v", p)
		}
	}
}
