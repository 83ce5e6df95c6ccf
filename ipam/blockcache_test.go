package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
)

// With Config.Blocks (tabby-node's informer) the allocator lists no block from the API server,
// and a cache that lags behind (here: frozen before anything was claimed) costs retries, never a
// duplicate: a block another node claimed meanwhile is found by the failed create, an address
// taken meanwhile by the failed compare-and-swap.
func TestBlocksFromLaggingCache(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/25", 26) // two blocks: n1 and n2 race for them, then borrow
	stale := []v1.IPAMBlock{}           // the cache as it was before any claim
	synced := atomic.Bool{}
	synced.Store(true)
	cached := func() ([]v1.IPAMBlock, bool) { return stale, synced.Load() }
	a1 := ipam.New(s, ipam.Config{Blocks: cached})
	a2 := ipam.New(s, ipam.Config{})

	// a1's block lists from the store (a2 lists too, from the same fake).
	a1Lists := 0
	assign := func(a *ipam.Allocator, r ipam.Request) (ipam.Assignment, error) {
		before := s.Calls("ListBlocks")
		got, err := a.Assign(ctx, r)
		if a == a1 {
			a1Lists += s.Calls("ListBlocks") - before
		}
		return got, err
	}
	seen := map[netip.Addr]string{}
	take := func(a *ipam.Allocator, node, id string) {
		t.Helper()
		got, err := assign(a, req(node, id))
		if err != nil {
			t.Fatalf("assign %s on %s: %v", id, node, err)
		}
		if prev, ok := seen[got.IP]; ok {
			t.Fatalf("%v given to %s and %s", got.IP, prev, id)
		}
		seen[got.IP] = id
	}
	// n2 claims the first block; n1, seeing no block in its cache, tries it first.
	take(a2, "n2", "b0")
	for i := range 64 {
		take(a1, "n1", fmt.Sprint("a", i)) // n1's block fills up
	}
	// The pool has no free block left: n1 would borrow from n2's block, but its list does not
	// show it: no address (an error), never a held one. n2 goes on in its block.
	for i := range 2 {
		if got, err := assign(a1, req("n1", fmt.Sprint("borrow", i))); err == nil {
			if prev, ok := seen[got.IP]; ok {
				t.Fatalf("%v given to %s and borrow%d", got.IP, prev, i)
			}
			seen[got.IP] = fmt.Sprint("borrow", i)
		}
	}
	for i := range 4 {
		take(a2, "n2", fmt.Sprint("b", i+1))
	}
	if a1Lists != 0 {
		t.Errorf("%d block lists from the store with a synced cache, want 0", a1Lists)
	}
	// Not synced yet: the store answers.
	synced.Store(false)
	before := s.Calls("ListBlocks")
	if err := a1.ReleaseEmptyBlocks(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if s.Calls("ListBlocks") == before {
		t.Error("no block list from the store while the cache has not synced")
	}
}
