package ipam

import "net/netip"

// The address arithmetic of blocks, for the packages that read IPAMBlocks (the node syncer,
// tabbyctl, the garbage collector): an allocation's key in spec.allocations is the decimal
// ordinal of its address in the block.

// AddrAt is the address at ordinal in block (ordinal 0 is the block's first address).
func AddrAt(block netip.Prefix, ordinal int) netip.Addr { return addrAt(block, ordinal) }

// OrdinalOf is ip's ordinal in block; false when ip is not an IPv4 address inside block.
func OrdinalOf(block netip.Prefix, ip netip.Addr) (int, bool) { return ordinalOf(block, ip) }
