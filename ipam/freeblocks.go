package ipam

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// freeBlocks yields a pool's free blocks, lowest first, by walking the gaps between the blocks in
// use. It costs time in proportion to the blocks in use, never to the blocks the pool could hold:
// an IPv6 /48 cut into /122 blocks holds 2^74 of them, and a walk over every candidate would
// never end once the first ones are taken.
type freeBlocks struct {
	pool netip.Prefix
	size int
	// used are the prefixes in use that overlap the pool, sorted by first address; those before
	// i end before cand, which only grows.
	used []netip.Prefix
	i    int
	cand netip.Prefix // the next block to look at; invalid once past the pool
}

// newFreeBlocks walks pool's blocks of size around used, the blocks of any size that exist in
// it (a pool re-created with another blockSize leaves blocks of the old size behind).
func newFreeBlocks(pool netip.Prefix, size int, used []netip.Prefix) *freeBlocks {
	used = slices.Clone(used)
	slices.SortFunc(used, ipfamily.ComparePrefixes)
	return &freeBlocks{pool: pool, size: size, used: used, cand: netip.PrefixFrom(pool.Addr(), size)}
}

// next is the lowest free block not yet returned, or false when the pool has none left.
func (f *freeBlocks) next() (netip.Prefix, bool) {
	for f.cand.IsValid() {
		for f.i < len(f.used) && lastAddr(f.used[f.i]).Less(f.cand.Addr()) {
			f.i++
		}
		// Prefixes nest or are disjoint: sorted by first address, one that starts past cand's
		// end is followed only by others that do too, so cand is free.
		if f.i == len(f.used) || lastAddr(f.cand).Less(f.used[f.i].Addr()) {
			c := f.cand
			f.cand = f.after(c)
			return c, true
		}
		// used[i] overlaps cand: go on right after it (it may span several blocks, or be a part of one).
		f.cand = f.after(netip.PrefixFrom(lastAddr(f.used[f.i]), f.size).Masked())
	}
	return netip.Prefix{}, false
}

// after is the block that follows c, invalid past the pool's end.
func (f *freeBlocks) after(c netip.Prefix) netip.Prefix {
	n := lastAddr(c).Next()
	if !n.IsValid() || !f.pool.Contains(n) {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(n, f.size)
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; {
		if i%8 == 0 {
			b[i/8], i = 0xff, i+8
			continue
		}
		b[i/8] |= 0x80 >> (i % 8)
		i++
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
