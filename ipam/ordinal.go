package ipam

import (
	"net/netip"

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
