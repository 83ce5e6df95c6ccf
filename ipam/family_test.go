package ipam_test

import (
	"context"
	"errors"
	"math/big"
	"net/netip"
	"testing"

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
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
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
