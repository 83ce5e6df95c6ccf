package ipam_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/ipam"
)

// A DEL that passes the runtime's record of the ADD (prevResult) costs one write when the
// addresses are in the node's own blocks: no IPAMHandle can exist for them, so it is not read.
// Whenever that cannot be known, the handle is read as before and nothing is left behind.
func TestReleaseHeldSkipsTheHandleRead(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/26", 26) // one block: n1 takes it, n2 must borrow
	a := ipam.New(s, ipam.Config{})
	own, err := a.Assign(ctx, req("n1", "own"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.Assign(ctx, req("n1", "other"))
	if err != nil {
		t.Fatal(err)
	}
	b := ipam.New(s, ipam.Config{})
	borrowed, err := b.Assign(ctx, req("n2", "borrowed"))
	if err != nil || !borrowed.Borrowed {
		t.Fatalf("borrow: %+v %v", borrowed, err)
	}

	release := func(al *ipam.Allocator, handle string, held ...netip.Addr) {
		t.Helper()
		s.ResetCalls()
		if err := al.ReleaseHeld(ctx, handle, held); err != nil {
			t.Fatalf("release %s %v: %v", handle, held, err)
		}
	}
	// Another handle's address, or an address no cached block holds, proves nothing: read.
	release(a, "net.own", other.IP)
	if s.Calls("GetHandle") != 1 {
		t.Fatalf("prevResult naming another handle's address: %v, want the handle read", s.CallCounts())
	}
	if n := countAllocations(s); n != 2 {
		t.Fatalf("%d allocations, want 2 (the handle's address released, no other)", n)
	}
	own, err = a.Assign(ctx, req("n1", "own"))
	if err != nil {
		t.Fatal(err)
	}
	release(ipam.New(s, ipam.Config{}), "net.own", own.IP)
	if s.Calls("GetHandle") != 1 {
		t.Fatalf("an allocator that has not loaded the node: %v, want the handle read", s.CallCounts())
	}
	own, err = a.Assign(ctx, req("n1", "own"))
	if err != nil {
		t.Fatal(err)
	}
	release(a, "net.own")
	if s.Calls("GetHandle") != 1 {
		t.Fatalf("no prevResult: %v, want the handle read", s.CallCounts())
	}

	// The common DEL: the block update alone.
	own, err = a.Assign(ctx, req("n1", "own"))
	if err != nil {
		t.Fatal(err)
	}
	release(a, "net.own", own.IP)
	if got := s.TotalCalls(); got != 1 || s.Calls("UpdateBlock") != 1 {
		t.Fatalf("DEL with prevResult: want 1 call (the block update), got %d: %v", got, s.CallCounts())
	}
	if got, _ := a.Lookup(ctx, "net.own"); len(got) != 0 {
		t.Fatalf("released, still holds %+v", got)
	}

	// A borrowed address has a handle object: read and deleted with the allocation, even by an
	// allocator whose cached block holds the address (the block's own node's).
	release(a, "net.borrowed", borrowed.IP)
	if s.Calls("GetHandle") != 1 || s.Calls("DeleteHandle") != 1 {
		t.Fatalf("DEL of a borrowed address: %v, want the handle read and deleted", s.CallCounts())
	}
	if n, h := countAllocations(s), len(s.Handles()); n != 1 || h != 0 {
		t.Fatalf("after the DELs: %d allocations, %d handles; want 1 (net.other) and 0", n, h)
	}
	if _, err := s.GetHandle(ctx, names.HandleName("net.borrowed")); err == nil {
		t.Fatal("the borrowed address's handle outlived its DEL")
	}
}
