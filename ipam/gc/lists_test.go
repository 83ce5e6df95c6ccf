package gc_test

import (
	"context"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/gc"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// frozenLists is a first look that lags: the store's lists as they were when it was taken.
type frozenLists struct {
	blocks  []v1.IPAMBlock
	affs    []v1.BlockAffinity
	handles []v1.IPAMHandle
	pods    []ipam.Pod
	nodes   []model.Node
}

func freeze(t *testing.T, s ipam.Store, node string) *frozenLists {
	t.Helper()
	ctx := context.Background()
	var f frozenLists
	var err error
	if f.blocks, err = s.ListBlocks(ctx); err != nil {
		t.Fatal(err)
	}
	if f.affs, err = s.ListAffinities(ctx); err != nil {
		t.Fatal(err)
	}
	if f.handles, err = s.ListHandles(ctx); err != nil {
		t.Fatal(err)
	}
	if f.pods, err = s.ListPods(ctx, node); err != nil {
		t.Fatal(err)
	}
	if f.nodes, err = s.ListNodes(ctx); err != nil {
		t.Fatal(err)
	}
	return &f
}

func (f *frozenLists) ListBlocks(context.Context) ([]v1.IPAMBlock, error) { return f.blocks, nil }
func (f *frozenLists) ListAffinities(context.Context) ([]v1.BlockAffinity, error) {
	return f.affs, nil
}
func (f *frozenLists) ListHandles(context.Context) ([]v1.IPAMHandle, error) { return f.handles, nil }
func (f *frozenLists) ListPods(context.Context, string) ([]ipam.Pod, error) { return f.pods, nil }
func (f *frozenLists) ListNodes(context.Context) ([]model.Node, error)      { return f.nodes, nil }

// listCalls is how many lists the fake store has served.
func listCalls(s *ipamtest.Store) int {
	n := 0
	for _, op := range []ipamtest.Op{"ListBlocks", "ListAffinities", "ListHandles", "ListPods", "ListNodes"} {
		n += s.Calls(op)
	}
	return n
}

// With Lists set, a round's first look reads only them (tabby-node's caches), and a stale first
// look releases nothing the store no longer agrees with: the second look decides.
func TestFirstLookFromLists(t *testing.T) {
	ctx := context.Background()
	s := oneNodeStore()
	now := time.Unix(1000, 0)
	// The allocator's block cache is tabby-node's informer too (ReleaseEmptyBlocks lists blocks).
	var cached []v1.IPAMBlock
	a := ipam.New(s, ipam.Config{Now: func() time.Time { return now }, Blocks: func() ([]v1.IPAMBlock, bool) { return cached, cached != nil }})
	// Two pods gone, their addresses left behind.
	stale, err := a.Assign(ctx, ipam.Request{Handle: "net.gone1", Node: "n1", Namespace: "default", Pod: "gone1"})
	if err != nil {
		t.Fatal(err)
	}
	leaked, err := a.Assign(ctx, ipam.Request{Handle: "net.gone2", Node: "n1", Namespace: "default", Pod: "gone2"})
	if err != nil {
		t.Fatal(err)
	}
	lists := freeze(t, s, "n1")
	cached = lists.blocks
	// After the first look's snapshot: gone1's address goes to a live pod (as a release and a
	// new ADD would, in one write).
	b, err := s.GetBlock(ctx, names.BlockName(stale.Block))
	if err != nil {
		t.Fatal(err)
	}
	ord := ""
	for k, al := range b.Spec.Allocations {
		if al.Handle == "net.gone1" {
			ord = k
		}
	}
	b.Spec.Allocations[ord] = v1.Allocation{Handle: "net.new", Namespace: "default", Pod: "new"}
	if _, err := s.UpdateBlock(ctx, b); err != nil {
		t.Fatal(err)
	}
	s.AddPod(ipam.Pod{Namespace: "default", Name: "new", NodeName: "n1"})

	before := listCalls(s)
	c := gc.New(s, a, gc.Config{Node: "n1", GracePeriod: time.Minute, Lists: lists, Now: func() time.Time { return now }})
	if res, err := c.RunOnce(ctx); err != nil || res.Pending != 2 {
		t.Fatalf("first round: %+v %v, want both stale allocations as candidates", res, err)
	}
	now = now.Add(2 * time.Minute)
	res, err := c.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ReleasedIPs) != 1 || res.ReleasedIPs[0] != leaked.IP {
		t.Fatalf("released %v, want only %v (the first look's other candidate is a live pod's now)", res.ReleasedIPs, leaked.IP)
	}
	b, err = s.GetBlock(ctx, names.BlockName(stale.Block))
	if err != nil || b.Spec.Allocations[ord].Handle != "net.new" {
		t.Fatalf("the live pod's address %v: %+v %v", stale.IP, b.Spec.Allocations[ord], err)
	}
	if n := listCalls(s) - before; n != 0 {
		t.Errorf("%d lists from the store, want none (the first look is Lists', the allocator's its cache)", n)
	}
}
