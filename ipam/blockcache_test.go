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

// blockLists counts the store's block lists.
type blockLists struct {
	ipam.Store
	n atomic.Int64
}

func (c *blockLists) ListBlocks(ctx context.Context) ([]v1.IPAMBlock, error) {
	c.n.Add(1)
	return c.Store.ListBlocks(ctx)
}

// With Config.Blocks (tabby-node's informer) the allocator lists no block from the API server,
// and a cache that lags behind (here: frozen before anything was claimed) costs retries, never a
// duplicate: a block another node claimed meanwhile is found by the failed create, an address
// taken meanwhile by the failed compare-and-swap.
func TestBlocksFromLaggingCache(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/25", 26) // two blocks: n1 and n2 race for them, then borrow
	store := &blockLists{Store: s}
	stale := []v1.IPAMBlock{} // the cache as it was before any claim
	synced := atomic.Bool{}
	synced.Store(true)
	cached := func() ([]v1.IPAMBlock, bool) { return stale, synced.Load() }
	a1 := ipam.New(store, ipam.Config{Blocks: cached})
	a2 := ipam.New(s, ipam.Config{})

	seen := map[netip.Addr]string{}
	take := func(a *ipam.Allocator, node, id string) {
		t.Helper()
		got, err := a.Assign(ctx, req(node, id))
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
		if got, err := a1.Assign(ctx, req("n1", fmt.Sprint("borrow", i))); err == nil {
			if prev, ok := seen[got.IP]; ok {
				t.Fatalf("%v given to %s and borrow%d", got.IP, prev, i)
			}
			seen[got.IP] = fmt.Sprint("borrow", i)
		}
	}
	for i := range 4 {
		take(a2, "n2", fmt.Sprint("b", i+1))
	}
	if n := store.n.Load(); n != 0 {
		t.Errorf("%d block lists from the store with a synced cache, want 0", n)
	}
	// Not synced yet: the store answers.
	synced.Store(false)
	if err := a1.ReleaseEmptyBlocks(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if store.n.Load() == 0 {
		t.Error("no block list from the store while the cache has not synced")
	}
}
