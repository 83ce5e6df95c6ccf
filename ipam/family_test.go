package ipam_test

import (
	"context"
	"errors"
	"math/big"
	"net/netip"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

// TestIPv6PoolBesideIPv4: an IPv6 pool in the cluster changes nothing for IPv4 requests, and the
// reports read it without overflowing (a /48 holds 2^80 addresses).
func TestIPv6PoolBesideIPv4(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/24", 26)
	s.AddPool("v6", "fd00:10:244::/48", 0)
	a := ipam.New(s, ipam.Config{})
	as, err := a.Assign(ctx, req("n1", "c0"))
	if err != nil {
		t.Fatal(err)
	}
	if as.IP.String() != "10.244.0.0" || as.Pool != "p" {
		t.Fatalf("IPv4 assignment beside an IPv6 pool: %+v", as)
	}
	u, err := ipam.GetUsage(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]*big.Int{
		"p":  {big.NewInt(256), big.NewInt(4)},
		"v6": {new(big.Int).Lsh(big.NewInt(1), 80), new(big.Int).Lsh(big.NewInt(1), 122-48)},
	}
	for _, p := range u.Pools {
		w := want[p.Name]
		if p.Total.Cmp(w[0]) != 0 || p.MaxBlocks.Cmp(w[1]) != 0 {
			t.Errorf("pool %s: total %s, max blocks %s; want %s, %s", p.Name, p.Total, p.MaxBlocks, w[0], w[1])
		}
	}
	o, err := ipam.WhoHas(ctx, s, netip.MustParseAddr("fd00:10:244::7"))
	if !errors.Is(err, ipam.ErrNotAllocated) || o.Pool != "v6" {
		t.Fatalf("WhoHas an unallocated IPv6 address: %+v %v", o, err)
	}
	r, err := ipam.Check(ctx, s)
	if err != nil || r.Checked.Pools != 2 || len(r.BlocksOutsidePools) > 0 {
		t.Fatalf("check: %+v %v", r, err)
	}
}

// TestDualStackHandle: one attachment asks for an address of each family under one handle. Each
// Assign is idempotent per family, the handle lists both blocks, Lookup finds both, and one
// release frees both.
func TestDualStackHandle(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("p", "10.244.0.0/24", 26)
	s.AddPool("v6", "fd00:10:244::/48", 0)
	a := ipam.New(s, ipam.Config{})
	r4 := req("n1", "c0")
	r6 := r4
	r6.Family = ipfamily.IPv6
	v4, err := a.Assign(ctx, r4)
	if err != nil {
		t.Fatal(err)
	}
	v6, err := a.Assign(ctx, r6)
	if err != nil {
		t.Fatal(err)
	}
	if v4.IP.String() != "10.244.0.0" || v6.IP.String() != "fd00:10:244::" || v6.Block.String() != "fd00:10:244::/122" || v6.Pool != "v6" || v6.Overhead != 0 {
		t.Fatalf("dual stack: %+v / %+v", v4, v6)
	}
	for _, r := range []ipam.Request{r4, r6, r4} {
		again, err := a.Assign(ctx, r)
		if want := map[ipfamily.Family]netip.Addr{ipfamily.IPv4: v4.IP, ipfamily.IPv6: v6.IP}[ipfamily.OfAddr(again.IP)]; err != nil || again.IP != want || ipfamily.OfAddr(again.IP) != familyOf(r) {
			t.Fatalf("repeated %s Assign: %+v %v", familyOf(r), again, err)
		}
	}
	// Both addresses are in the node's own blocks: no handle object; a restarted allocator
	// finds both through the node's blocks.
	if _, err := s.GetHandle(ctx, names.HandleName(r4.Handle)); !apierrors.IsNotFound(err) {
		t.Fatalf("handle object for own-block addresses: %v", err)
	}
	a = ipam.New(s, ipam.Config{})
	if err := a.LoadNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	got, err := a.Lookup(ctx, r4.Handle)
	if err != nil || len(got) != 2 {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	if _, err := s.GetBlock(ctx, names.BlockName(v6.Block)); err != nil {
		t.Fatalf("IPv6 block object: %v", err)
	}
	if rep, err := ipam.Check(ctx, s); err != nil || len(rep.HandleMismatches)+len(rep.WithoutHandle)+len(rep.HandlesWithoutAllocation) != 0 || rep.Checked.Allocations != 2 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	if err := a.ReleaseHandle(ctx, r4.Handle); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []netip.Addr{v4.IP, v6.IP} {
		if _, err := ipam.WhoHas(ctx, s, ip); !errors.Is(err, ipam.ErrNotAllocated) {
			t.Fatalf("%s after release: %v", ip, err)
		}
	}
}

func familyOf(r ipam.Request) ipfamily.Family {
	if r.Family == ipfamily.Unknown {
		return ipfamily.IPv4
	}
	return r.Family
}
