package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

// The address arithmetic of blocks, for the packages that read IPAMBlocks (the node syncer,
// tabbyctl, the garbage collector): an allocation's key in spec.allocations is the decimal
// ordinal of its address in the block.

// AddrAt is the address at ordinal in block (ordinal 0 is the block's first address).
func AddrAt(block netip.Prefix, ordinal int) netip.Addr { return addrAt(block, ordinal) }

// BlockCIDR reads an IPAMBlock's spec.cidr; the error names the block and the value.
func BlockCIDR(b *v1.IPAMBlock) (netip.Prefix, error) { return parseBlockCIDR(b) }

// BlockLen is the number of addresses in block, every one of them allocatable.
func BlockLen(block netip.Prefix) int { return blockLen(block) }

// OrdinalOf is ip's ordinal in block; false when ip is not an IPv4 address inside block.
func OrdinalOf(block netip.Prefix, ip netip.Addr) (int, bool) { return ordinalOf(block, ip) }

// OrdinalKey is the key of ordinal in spec.allocations.
func OrdinalKey(ordinal int) string { return strconv.Itoa(ordinal) }

// ParseOrdinal reads a key of spec.allocations: an ordinal of block in the form OrdinalKey writes
// (decimal, no sign, no leading zero). Any other key is refused: the allocator looks an ordinal
// up by that form, so an address under another spelling ("03", "+3") would look free to it and
// held to a reader that accepted the spelling.
func ParseOrdinal(block netip.Prefix, key string) (int, error) {
	o, err := strconv.Atoi(key)
	if err != nil || OrdinalKey(o) != key {
		return 0, fmt.Errorf("allocation key %q is not an ordinal in decimal", key)
	}
	if o < 0 || o >= blockLen(block) {
		return 0, fmt.Errorf("allocation key %q is outside the block: %s has %d addresses", key, block, blockLen(block))
	}
	return o, nil
}

// DecodeBlock reads an IPAMBlock: its prefix and its allocations by ordinal. A block with a bad
// cidr or an allocation key ParseOrdinal refuses is refused whole; the error names the block,
// the field and the value (the least bad key, so that it is the same every time).
func DecodeBlock(b *v1.IPAMBlock) (netip.Prefix, map[int]v1.Allocation, error) {
	c, err := parseBlockCIDR(b)
	if err != nil {
		return netip.Prefix{}, nil, err
	}
	out := make(map[int]v1.Allocation, len(b.Spec.Allocations))
	var bad []string
	for k, al := range b.Spec.Allocations {
		o, err := ParseOrdinal(c, k)
		if err != nil {
			bad = append(bad, k)
			continue
		}
		out[o] = al
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		_, err := ParseOrdinal(c, bad[0])
		return netip.Prefix{}, nil, fmt.Errorf("IPAMBlock %s: spec.allocations: %w", b.Name, err)
	}
	return c, out, nil
}

// EncodeAllocations is the spec.allocations of allocations by ordinal: DecodeBlock's inverse.
func EncodeAllocations(allocations map[int]v1.Allocation) map[string]v1.Allocation {
	if len(allocations) == 0 {
		return nil
	}
	out := make(map[string]v1.Allocation, len(allocations))
	for o, al := range allocations {
		out[OrdinalKey(o)] = al
	}
	return out
}
