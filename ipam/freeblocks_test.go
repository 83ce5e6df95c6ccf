package ipam

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// all drains f, at most max blocks.
func all(f *freeBlocks, max int) []string {
	var out []string
	for len(out) < max {
		c, ok := f.next()
		if !ok {
			break
		}
		out = append(out, c.String())
	}
	return out
}

func TestFreeBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, pool string
		size       int
		used       []netip.Prefix
		want       []string
	}{
		{"empty pool", "10.244.0.0/24", 26, nil, []string{"10.244.0.0/26", "10.244.0.64/26", "10.244.0.128/26", "10.244.0.192/26"}},
		{"gaps, unsorted", "10.244.0.0/24", 26, prefixes("10.244.0.128/26", "10.244.0.0/26"), []string{"10.244.0.64/26", "10.244.0.192/26"}},
		{"full", "10.244.0.0/25", 26, prefixes("10.244.0.64/26", "10.244.0.0/26"), nil},
		{"a larger block of an old blockSize", "10.244.0.0/23", 26, prefixes("10.244.0.0/24"), []string{"10.244.1.0/26", "10.244.1.64/26", "10.244.1.128/26", "10.244.1.192/26"}},
		{"a smaller block of an old blockSize", "10.244.0.0/24", 26, prefixes("10.244.0.80/28", "10.244.0.0/26"), []string{"10.244.0.128/26", "10.244.0.192/26"}},
		{"nested old blocks", "10.244.0.0/24", 26, prefixes("10.244.0.0/25", "10.244.0.64/28", "10.244.0.0/26"), []string{"10.244.0.128/26", "10.244.0.192/26"}},
		{"a block covering the pool", "10.244.0.0/26", 26, prefixes("10.244.0.0/24"), nil},
		{"one-address blocks", "10.244.0.0/30", 32, prefixes("10.244.0.1/32"), []string{"10.244.0.0/32", "10.244.0.2/32", "10.244.0.3/32"}},
		{"the end of the address space", "255.255.255.128/25", 26, prefixes("255.255.255.128/26"), []string{"255.255.255.192/26"}},
		{"IPv6", "fd00:10:244::/120", 122, prefixes("fd00:10:244::40/122"), []string{"fd00:10:244::/122", "fd00:10:244::80/122", "fd00:10:244::c0/122"}},
		{"IPv6 end of the address space", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120", 122, prefixes("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/122"),
			[]string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff40/122", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff80/122", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffc0/122"}},
	} {
		got := all(newFreeBlocks(netip.MustParsePrefix(tc.pool), tc.size, tc.used), 1000)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: free blocks %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFreeBlocksAgreesWithAFullWalk: on pools small enough to walk, the gaps are exactly the
// blocks that overlap nothing in use, in the same order as a walk over every block.
func TestFreeBlocksAgreesWithAFullWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pool := netip.MustParsePrefix("10.244.0.0/22")
	const size = 26
	for round := range 500 {
		var used []netip.Prefix
		for range r.IntN(12) {
			bits := 23 + r.IntN(8) // /23 (larger than a block) to /30 (smaller)
			a := netip.AddrFrom4([4]byte{10, 244, byte(r.IntN(4)), byte(r.IntN(256))})
			used = append(used, netip.PrefixFrom(a, bits).Masked())
		}
		var want []string
		for i := range 16 {
			c := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i / 4), byte(i % 4 * 64)}), size)
			if !slices.ContainsFunc(used, c.Overlaps) {
				want = append(want, c.String())
			}
		}
		if got := all(newFreeBlocks(pool, size, used), 100); !slices.Equal(got, want) {
			t.Fatalf("round %d, used %v: free %v, want %v", round, used, got, want)
		}
	}
}

// TestFreeBlocksHugeIPv6Pools: a /64 or /48 of /122 blocks (2^58, 2^74 of them) finds its free
// blocks among many in use at once; a walk over every candidate block would not end.
func TestFreeBlocksHugeIPv6Pools(t *testing.T) {
	for _, pool := range prefixes("fd00:10:244::/64", "fd00:10:244::/48") {
		// The first 20000 blocks in use but for a hole at 5000, and the pool's last block.
		var used []netip.Prefix
		f := newFreeBlocks(pool, 122, nil)
		for i := range 20000 {
			c, _ := f.next()
			if i != 5000 {
				used = append(used, c)
			}
		}
		last := netip.PrefixFrom(lastAddr(pool), 122).Masked()
		used = append(used, last)
		start := time.Now()
		got := all(newFreeBlocks(pool, 122, used), 3)
		took := time.Since(start)
		hole := used[5000-1]
		want := []string{
			netip.PrefixFrom(lastAddr(hole).Next(), 122).String(),
			netip.PrefixFrom(lastAddr(used[20000-2]).Next(), 122).String(),
		}
		want = append(want, netip.PrefixFrom(lastAddr(netip.MustParsePrefix(want[1])).Next(), 122).String())
		if !slices.Equal(got, want) {
			t.Fatalf("%s: free %v, want %v", pool, got, want)
		}
		t.Logf("%s: 20001 blocks in use, first free blocks found in %v", pool, took)

		// A prefix in use that spans half the pool (2^57 or 2^73 blocks) is jumped over at once.
		half := netip.PrefixFrom(pool.Addr(), pool.Bits()+1)
		got = all(newFreeBlocks(pool, 122, []netip.Prefix{half, last}), 1)
		if want := netip.PrefixFrom(lastAddr(half).Next(), 122).String(); len(got) != 1 || got[0] != want {
			t.Fatalf("%s: with %s in use: %v, want %s", pool, half, got, want)
		}
	}
}

// BenchmarkFreeBlockSearch: one claim's search in a /48 of /122 blocks with 10000 blocks in use,
// scattered, and the first 5000 taken (the common shape: nodes fill the pool from its start).
func BenchmarkFreeBlockSearch(b *testing.B) {
	pool := netip.MustParsePrefix("fd00:10:244::/48")
	r := rand.New(rand.NewPCG(3, 4))
	var used []netip.Prefix
	f := newFreeBlocks(pool, 122, nil)
	for range 5000 {
		c, _ := f.next()
		used = append(used, c)
	}
	for range 5000 {
		a := pool.Addr().As16()
		for i := 6; i < 16; i++ {
			a[i] = byte(r.Uint32())
		}
		used = append(used, netip.PrefixFrom(netip.AddrFrom16(a), 122).Masked())
	}
	r.Shuffle(len(used), func(i, j int) { used[i], used[j] = used[j], used[i] })
	b.ResetTimer()
	for b.Loop() {
		if _, ok := newFreeBlocks(pool, 122, used).next(); !ok {
			b.Fatal("no free block")
		}
	}
}
