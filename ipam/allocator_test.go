package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

func newFake(t *testing.T) *ipamtest.Store {
	t.Helper()
	s := ipamtest.NewStore()
	s.AddNode("n1", map[string]string{"zone": "a"})
	s.AddNode("n2", map[string]string{"zone": "b"})
	return s
}

func req(node, id string) ipam.Request {
	return ipam.Request{Handle: "net." + id, Node: node, Namespace: "default", Pod: id}
}

// A pod in one of its node's blocks costs the API server one write on ADD and two calls on DEL
// (the handle GET, which finds none, and the block write): the IPAMHandle exists only for borrowed
// addresses (handles.go).
func TestAssignCommonCaseRoundTrips(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/24", 26)
	// tabby-node answers the pod's annotations from its informer of the node's pods.
	a := ipam.New(s, ipam.Config{PodAnnotations: func(string, string) (map[string]string, bool) { return nil, true }})
	first, err := a.Assign(ctx, req("n1", "c0"))
	if err != nil {
		t.Fatal(err)
	}
	if first.IP.String() != "10.244.0.0" || first.Block.String() != "10.244.0.0/26" || first.Pool != "p" || first.Borrowed {
		t.Fatalf("first assignment %+v", first)
	}
	s.ResetCalls()
	second, err := a.Assign(ctx, req("n1", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if second.IP.String() != "10.244.0.1" {
		t.Fatalf("second assignment %+v", second)
	}
	if got := s.TotalCalls(); got != 1 || s.Calls("UpdateBlock") != 1 {
		t.Fatalf("ADD: want 1 call (the block update), got %d: %v", got, s.CallCounts())
	}
	if _, err := s.GetHandle(ctx, names.HandleName("net.c1")); !apierrors.IsNotFound(err) {
		t.Fatalf("an IPAMHandle for an address of the node's own block: %v", err)
	}
	if got, err := a.Lookup(ctx, "net.c1"); err != nil || len(got) != 1 || got[0].IP != second.IP {
		t.Fatalf("lookup through the node's block: %+v %v", got, err)
	}
	s.ResetCalls()
	if err := a.ReleaseHandle(ctx, "net.c1"); err != nil {
		t.Fatal(err)
	}
	if got := s.TotalCalls(); got != 2 || s.Calls("GetHandle") != 1 || s.Calls("UpdateBlock") != 1 {
		t.Fatalf("DEL: want 2 calls (the handle GET and the block update), got %d: %v", got, s.CallCounts())
	}
	if got, _ := a.Lookup(ctx, "net.c1"); len(got) != 0 {
		t.Fatalf("released, still holds %+v", got)
	}
	// The block and its affinity exist with the right names.
	if len(s.Affinities()) != 1 || s.Affinities()[0].Name != names.AffinityName("n1", first.Block) || s.Affinities()[0].Spec.State != v1.AffinityConfirmed {
		t.Fatalf("affinities: %+v", s.Affinities())
	}
	blocks := s.Blocks()
	if len(blocks) != 1 || blocks[0].Spec.Affinity != "host:n1" || blocks[0].Spec.Allocations["0"].Handle != "net.c0" || blocks[0].Spec.Allocations["0"].Node != "n1" {
		t.Fatalf("blocks: %+v", blocks)
	}
}

func TestAssignIdempotent(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/24", 26)
	a := ipam.New(s, ipam.Config{})
	x, err := a.Assign(ctx, req("n1", "c0"))
	if err != nil {
		t.Fatal(err)
	}
	// Another allocator (a restarted tabby-node) gives the same answer.
	for _, al := range []*ipam.Allocator{a, ipam.New(s, ipam.Config{})} {
		y, err := al.Assign(ctx, req("n1", "c0"))
		if err != nil || y.IP != x.IP {
			t.Fatalf("assign again: %v %v, want %v", y.IP, err, x.IP)
		}
	}
	if n := countAllocations(s); n != 1 {
		t.Fatalf("%d allocations, want 1", n)
	}
	got, err := a.Lookup(ctx, "net.c0")
	if err != nil || len(got) != 1 || got[0].IP != x.IP || got[0].Node != "n1" {
		t.Fatalf("lookup: %+v %v", got, err)
	}
}

// An address of the node's own block has no handle object: a restarted allocator (a new
// tabby-node, or the plugins' direct path, a process per call) finds it through the node's
// blocks, gives it again to a repeated Assign and releases it on DEL.
func TestOwnBlockAddressWithoutHandleObject(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/24", 26)
	x, err := ipam.New(s, ipam.Config{}).Assign(ctx, req("n1", "c0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Handles()) != 0 {
		t.Fatalf("handles %+v, want none", s.Handles())
	}
	restarted := ipam.New(s, ipam.Config{})
	if err := restarted.LoadNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if got, err := restarted.Lookup(ctx, "net.c0"); err != nil || len(got) != 1 || got[0].IP != x.IP {
		t.Fatalf("lookup: %+v %v, want %v", got, err, x.IP)
	}
	y, err := restarted.Assign(ctx, req("n1", "c0"))
	if err != nil || y.IP != x.IP {
		t.Fatalf("assign again: %v %v, want %v", y.IP, err, x.IP)
	}
	if n := countAllocations(s); n != 1 {
		t.Fatalf("%d allocations, want 1", n)
	}
	direct := ipam.New(s, ipam.Config{})
	if err := direct.LoadNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := direct.ReleaseHandle(ctx, "net.c0"); err != nil {
		t.Fatal(err)
	}
	if n := countAllocations(s); n != 0 {
		t.Fatalf("%d allocations after the release, want 0", n)
	}
}

// A borrowed address (in another node's block, which DEL on this node does not look at) has its
// handle object written before the block; when that write fails, the Assign fails and leaves
// nothing.
func TestBorrowedAddressHandleFirst(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/26", 26) // one block only: n2 takes it, n1 must borrow
	if _, err := ipam.New(s, ipam.Config{}).Assign(ctx, req("n2", "owner")); err != nil {
		t.Fatal(err)
	}
	a := ipam.New(s, ipam.Config{})
	s.ResetCalls()
	s.Inject(func(op ipamtest.Op, name string) error {
		if op == "UpdateBlock" && s.Calls("CreateHandle") == 0 {
			return fmt.Errorf("the block was written before the handle")
		}
		return nil
	})
	b, err := a.Assign(ctx, req("n1", "ok"))
	s.Inject(nil)
	if err != nil || !b.Borrowed {
		t.Fatalf("borrow: %+v %v", b, err)
	}
	if h, err := s.GetHandle(ctx, names.HandleName("net.ok")); err != nil || h.Spec.Block[b.Block.String()] != 1 {
		t.Fatalf("the borrowed address's handle: %+v %v", h, err)
	}
	s.Inject(func(op ipamtest.Op, name string) error {
		if op == "CreateHandle" {
			return fmt.Errorf("etcd is on fire")
		}
		return nil
	})
	_, err = a.Assign(ctx, req("n1", "bad"))
	s.Inject(nil)
	if err == nil || !strings.Contains(err.Error(), "etcd is on fire") {
		t.Fatalf("assign with an unwritable handle: %v", err)
	}
	if n := countAllocations(s); n != 2 {
		t.Fatalf("%d allocations, want 2 (the failed Assign's address released)", n)
	}
	if err := a.ReleaseHandle(ctx, "net.ok"); err != nil {
		t.Fatal(err)
	}
	if n, h := countAllocations(s), len(s.Handles()); n != 1 || h != 0 {
		t.Fatalf("after DEL of the borrowed address: %d allocations, %d handles; want 1 and 0", n, h)
	}
}

func countAllocations(s *ipamtest.Store) int {
	n := 0
	for _, b := range s.Blocks() {
		n += len(b.Spec.Allocations)
	}
	return n
}

func TestAssignResumesHandleWithoutAllocation(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/24", 26)
	a := ipam.New(s, ipam.Config{})
	// The block write fails (a dropped connection): the failure is cleaned up, nothing is left,
	// and a retry succeeds.
	s.Inject(func(op ipamtest.Op, _ string) error {
		if op == "UpdateBlock" {
			return errors.New("connection reset")
		}
		return nil
	})
	_, err := a.Assign(ctx, req("n1", "c0"))
	if err == nil || !strings.Contains(err.Error(), "connection reset") || !strings.Contains(err.Error(), "IPAMBlock 10-244-0-0-26") {
		t.Fatalf("want a wrapped datastore error naming the block, got %v", err)
	}
	if len(s.Handles()) != 0 {
		t.Fatalf("a failed assign left a handle: %+v", s.Handles())
	}
	s.Inject(nil)
	if _, err := a.Assign(ctx, req("n1", "c0")); err != nil {
		t.Fatal(err)
	}
}

func TestAssignRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/24", 26)
	a := ipam.New(s, ipam.Config{})
	if _, err := a.Assign(ctx, req("n1", "c0")); err != nil {
		t.Fatal(err)
	}
	s.Inject(ipamtest.ConflictOnce("UpdateBlock", 3))
	x, err := a.Assign(ctx, req("n1", "c1"))
	if err != nil {
		t.Fatalf("3 conflicts must be retried: %v", err)
	}
	if x.IP.String() != "10.244.0.1" {
		t.Fatalf("got %v", x.IP)
	}
	// A bound: more conflicts than MaxRetries fail with a clear error and leave nothing.
	b := ipam.New(s, ipam.Config{MaxRetries: 2})
	s.Inject(ipamtest.ConflictOnce("UpdateBlock", 100))
	_, err = b.Assign(ctx, req("n1", "c2"))
	if err == nil || !strings.Contains(err.Error(), "gave up after 2 compare-and-swap conflicts") {
		t.Fatalf("want give-up error, got %v", err)
	}
	s.Inject(nil)
	if got, _ := a.Lookup(ctx, "net.c2"); len(got) != 0 {
		t.Fatalf("a failed assign holds %v", got)
	}
	if countAllocations(s) != 2 || len(s.Handles()) != 0 {
		t.Fatalf("allocations %d handles %d, want 2 and 0", countAllocations(s), len(s.Handles()))
	}
}

func TestConcurrentAssignsOnOneNode(t *testing.T) { forFamilies(t, testConcurrentAssignsOnOneNode) }

func testConcurrentAssignsOnOneNode(t *testing.T, f family) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", f.cidr("10.244.0.0/24"), f.blockSize(28))
	a := ipam.New(s, ipam.Config{})
	var wg sync.WaitGroup
	ips := make([]netip.Addr, 50)
	errs := make([]error, 50)
	for i := range 50 {
		wg.Go(func() {
			x, err := a.Assign(ctx, f.req(req("n1", fmt.Sprint("c", i))))
			ips[i], errs[i] = x.IP, err
		})
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for i := range 50 {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if seen[ips[i]] {
			t.Fatalf("duplicate %v", ips[i])
		}
		seen[ips[i]] = true
	}
	if len(s.Blocks()) != 4 {
		t.Fatalf("50 addresses in /28 blocks need 4 blocks, got %d", len(s.Blocks()))
	}
}

func TestBorrowingAndExhaustion(t *testing.T) { forFamilies(t, testBorrowingAndExhaustion) }

func testBorrowingAndExhaustion(t *testing.T, f family) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", f.cidr("10.244.0.0/27"), f.blockSize(28)) // two blocks of 16
	a := ipam.New(s, ipam.Config{})
	for i := range 16 {
		if _, err := a.Assign(ctx, f.req(req("n1", fmt.Sprint("a", i)))); err != nil {
			t.Fatal(err)
		}
	}
	x, err := a.Assign(ctx, f.req(req("n1", "a16")))
	if err != nil || x.Block.String() != f.cidr("10.244.0.16/28") || x.Borrowed {
		t.Fatalf("second block claim: %+v %v", x, err)
	}
	// n2 finds no free block: it borrows from n1's second block.
	y, err := a.Assign(ctx, f.req(req("n2", "b0")))
	if err != nil || !y.Borrowed || y.Block.String() != f.cidr("10.244.0.16/28") {
		t.Fatalf("borrow: %+v %v", y, err)
	}
	for _, b := range s.Blocks() {
		if al, ok := b.Spec.Allocations["1"]; ok && b.Spec.CIDR == f.cidr("10.244.0.16/28") && al.Node != "n2" {
			t.Fatalf("the borrowed allocation must record the borrower: %+v", al)
		}
	}
	strict := ipam.New(s, ipam.Config{StrictAffinity: true})
	if _, err := strict.Assign(ctx, f.req(req("n2", "b1"))); err == nil || !strings.Contains(err.Error(), "pool "+f.cidr("10.244.0.0/27")+" exhausted: no free block, and StrictAffinity forbids borrowing") {
		t.Fatalf("strict affinity: %v", err)
	}
	for i := 1; i < 15; i++ {
		if _, err := a.Assign(ctx, f.req(req("n2", fmt.Sprint("b", i)))); err != nil {
			t.Fatalf("borrow %d: %v", i, err)
		}
	}
	_, err = a.Assign(ctx, f.req(req("n2", "full")))
	if err == nil || !strings.Contains(err.Error(), "pool "+f.cidr("10.244.0.0/27")+" exhausted: no free block and no free address to borrow") {
		t.Fatalf("exhaustion: %v", err)
	}
	if got, _ := a.Lookup(ctx, "net.full"); len(got) != 0 {
		t.Fatal("exhaustion left an allocation")
	}
	for _, h := range s.Handles() {
		if h.Spec.HandleID == "net.full" {
			t.Fatal("exhaustion left a handle")
		}
	}
}

func TestPoolChoiceByAnnotationsAndDisabled(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("za", "10.244.0.0/24", 26, func(p *v1.IPPool) { p.Spec.NodeSelector = "zone == 'a'" })
	s.AddPool("zb", "10.244.1.0/24", 26, func(p *v1.IPPool) { p.Spec.NodeSelector = "zone == 'b'" })
	s.AddPool("extra", "10.244.2.0/24", 26)
	a := ipam.New(s, ipam.Config{CacheTTL: -1})
	x, _ := a.Assign(ctx, req("n2", "c0"))
	if x.Pool != "extra" && x.Pool != "zb" {
		t.Fatalf("n2 got pool %s", x.Pool)
	}
	s.SetNamespaceAnnotations("team", map[string]string{v1.AnnotationIPv4Pools: `["extra"]`})
	x, err := a.Assign(ctx, ipam.Request{Handle: "net.ns", Node: "n1", Namespace: "team", Pod: "p1"})
	if err != nil || x.Pool != "extra" {
		t.Fatalf("namespace annotation: %+v %v", x, err)
	}
	s.AddPod(ipam.Pod{Namespace: "team", Name: "p2", Annotations: map[string]string{v1.AnnotationIPv4Pools: `["10.244.0.0/24"]`}})
	x, err = a.Assign(ctx, ipam.Request{Handle: "net.pod", Node: "n1", Namespace: "team", Pod: "p2"})
	if err != nil || x.Pool != "za" {
		t.Fatalf("pod annotation wins: %+v %v", x, err)
	}
	s.AddPod(ipam.Pod{Namespace: "team", Name: "p3", Annotations: map[string]string{v1.AnnotationIPv4Pools: `not json`}})
	if _, err = a.Assign(ctx, ipam.Request{Handle: "net.bad", Node: "n1", Namespace: "team", Pod: "p3"}); err == nil || !strings.Contains(err.Error(), "pod team/p3 annotation tabby.dev/ipv4pools") {
		t.Fatalf("bad annotation: %v", err)
	}
	s.AddPool("extra", "10.244.2.0/24", 26, func(p *v1.IPPool) { p.Spec.Disabled = true })
	s.AddPool("za", "10.244.0.0/24", 26, func(p *v1.IPPool) { p.Spec.NodeSelector = "zone == 'a'"; p.Spec.Disabled = true })
	_, err = a.Assign(ctx, req("n1", "c9"))
	if err == nil || !strings.Contains(err.Error(), "no IPPool matches node n1 (pools: extra (disabled), za (disabled), zb (nodeSelector \"zone == 'b'\" does not match))") {
		t.Fatalf("disabled: %v", err)
	}
	if err := a.Ready(ctx, "n1"); err == nil {
		t.Fatal("Ready must fail with no usable pool")
	}
	if err := a.Ready(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	// Existing addresses stay, and assigning again for them still answers.
	if y, err := a.Assign(ctx, ipam.Request{Handle: "net.ns", Node: "n1", Namespace: "team", Pod: "p1", Pools: []string{"zb"}}); err == nil {
		t.Fatalf("explicit pool not selecting the node must fail, got %+v", y)
	}
}

func TestRelease(t *testing.T) { forFamilies(t, testRelease) }

func testRelease(t *testing.T, f family) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", f.cidr("10.244.0.0/24"), f.blockSize(26))
	a := ipam.New(s, ipam.Config{})
	x, _ := a.Assign(ctx, f.req(req("n1", "c0")))
	y, _ := a.Assign(ctx, f.req(req("n1", "c1")))
	if err := a.ReleaseHandle(ctx, "net.c0"); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseHandle(ctx, "net.c0"); err != nil {
		t.Fatalf("release is idempotent: %v", err)
	}
	if err := a.ReleaseHandle(ctx, "net.never"); err != nil {
		t.Fatalf("unknown handle: %v", err)
	}
	if got, _ := a.Lookup(ctx, "net.c0"); len(got) != 0 {
		t.Fatalf("released handle still holds %v", got)
	}
	if err := a.ReleaseIP(ctx, x.IP); !errors.Is(err, ipam.ErrNotAllocated) {
		t.Fatalf("ReleaseIP of a free address: %v", err)
	}
	if err := a.ReleaseIP(ctx, y.IP); err != nil {
		t.Fatal(err)
	}
	if countAllocations(s) != 0 || len(s.Handles()) != 0 {
		t.Fatalf("left %d allocations and %d handles", countAllocations(s), len(s.Handles()))
	}
	// A conflict during release is retried.
	z, _ := a.Assign(ctx, f.req(req("n1", "c2")))
	s.Inject(ipamtest.ConflictOnce("UpdateBlock", 2))
	if err := a.ReleaseHandle(ctx, "net.c2"); err != nil {
		t.Fatal(err)
	}
	s.Inject(nil)
	if err := a.ReleaseIP(ctx, z.IP); !errors.Is(err, ipam.ErrNotAllocated) {
		t.Fatalf("after release: %v", err)
	}
	// The next address is not the one just freed (round robin within the block).
	w, _ := a.Assign(ctx, f.req(req("n1", "c3")))
	if w.IP == z.IP {
		t.Fatalf("reused %v at once", w.IP)
	}
}

func TestEmptyBlocksReleasedAfterGracePeriod(t *testing.T) {
	forFamilies(t, testEmptyBlocksReleasedAfterGracePeriod)
}

func testEmptyBlocksReleasedAfterGracePeriod(t *testing.T, f family) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", f.cidr("10.244.0.0/24"), f.blockSize(26))
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	a := ipam.New(s, ipam.Config{AffinityGracePeriod: time.Minute, Now: clock})
	x, _ := a.Assign(ctx, f.req(req("n1", "c0")))
	if err := a.ReleaseEmptyBlocks(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if len(s.Blocks()) != 1 {
		t.Fatal("a block in use was released")
	}
	_ = a.ReleaseHandle(ctx, "net.c0")
	_ = a.ReleaseEmptyBlocks(ctx, "n1") // first seen empty
	now = now.Add(30 * time.Second)
	_ = a.ReleaseEmptyBlocks(ctx, "n1")
	if len(s.Blocks()) != 1 {
		t.Fatal("released before the grace period")
	}
	now = now.Add(31 * time.Second)
	if err := a.ReleaseEmptyBlocks(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if len(s.Blocks()) != 0 || len(s.Affinities()) != 0 {
		t.Fatalf("after the grace period: %d blocks, %d affinities", len(s.Blocks()), len(s.Affinities()))
	}
	// The block flows back: the node (or another) claims it again.
	y, err := a.Assign(ctx, f.req(req("n2", "c1")))
	if err != nil || y.Block != x.Block {
		t.Fatalf("re-claim: %+v %v", y, err)
	}
	// A block that gets an allocation during the grace period stays.
	_ = a.ReleaseHandle(ctx, "net.c1")
	_ = a.ReleaseEmptyBlocks(ctx, "n2")
	now = now.Add(2 * time.Minute)
	s.Inject(func(op ipamtest.Op, _ string) error {
		if op == "DeleteBlock" {
			return apierrors.NewConflict(schema.GroupResource{Resource: "ipamblocks"}, "x", nil)
		}
		return nil
	})
	_ = a.ReleaseEmptyBlocks(ctx, "n2")
	s.Inject(nil)
	if len(s.Blocks()) != 1 {
		t.Fatal("a block whose delete lost the compare-and-swap was removed")
	}
}

// tabby-node hands the allocator its informer's pools: no Assign lists them, however short the
// cache's life; before the informer has synced, the allocator lists them itself.
func TestPoolsFromTheInformer(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/24", 26)
	items, err := s.ListPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	synced := false
	a := ipam.New(s, ipam.Config{CacheTTL: -1, Pools: func() ([]v1.IPPool, bool) { return items, synced }})
	if _, err := a.Assign(ctx, req("n1", "c0")); err != nil {
		t.Fatal(err)
	}
	if n := s.Calls("ListPools"); n != 2 {
		t.Fatalf("before the informer synced: %d pool lists, want 2 (the list above and the Assign's)", n)
	}
	synced = true
	s.ResetCalls()
	for i := range 3 {
		if _, err := a.Assign(ctx, req("n1", fmt.Sprintf("c%d", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Calls("ListPools"); n != 0 {
		t.Fatalf("with the informer's pools: %d pool lists, want 0", n)
	}
}

// A list served from the API server's watch cache can predate this process's last write. The
// node's cached blocks are where DEL finds the node's addresses (no handle object lists them), so
// such a list must never take an allocation out of the cache: not in the garbage collector's
// pass over empty blocks, and not when a new process (the plugins' direct path) loads the node.
func TestStaleBlockListLosesNoAllocation(t *testing.T) {
	forFamilies(t, testStaleBlockListLosesNoAllocation)
}

func testStaleBlockListLosesNoAllocation(t *testing.T, f family) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", f.cidr("10.244.0.0/24"), f.blockSize(26))
	held := func(handle string) bool {
		for _, b := range s.Blocks() {
			for _, al := range b.Spec.Allocations {
				if al.Handle == handle {
					return true
				}
			}
		}
		return false
	}
	a := ipam.New(s, ipam.Config{AffinityGracePeriod: time.Minute})
	if _, err := a.Assign(ctx, f.req(req("n1", "c0"))); err != nil {
		t.Fatal(err)
	}
	thaw := s.FreezeBlockLists()
	defer thaw()
	if _, err := a.Assign(ctx, f.req(req("n1", "c1"))); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseEmptyBlocks(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseHandle(ctx, "net.c1"); err != nil {
		t.Fatal(err)
	}
	if held("net.c1") {
		t.Fatal("after the garbage collector saw a stale list, DEL left the address allocated")
	}

	if _, err := a.Assign(ctx, f.req(req("n1", "c2"))); err != nil {
		t.Fatal(err)
	}
	b := ipam.New(s, ipam.Config{})
	if err := b.LoadNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := b.ReleaseHandle(ctx, "net.c2"); err != nil {
		t.Fatal(err)
	}
	if held("net.c2") {
		t.Fatal("a process that loaded the node from a stale list left the address allocated on DEL")
	}
	if !held("net.c0") {
		t.Fatal("c0 was released")
	}
}
