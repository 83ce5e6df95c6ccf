package ipam

import (
	"fmt"
	"math/big"
	"net/netip"
	"sort"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
)

// maxBlockHostBits bounds a block's size, in both families: the largest blocks, IPv4 /20 and IPv6
// /116, hold 4096 addresses. An ordinal is then at most 12 bits, an int everywhere, and lives in
// the last two bytes of an address.
const maxBlockHostBits = v1.MaxBlockSizeIPv4 - v1.MinBlockSizeIPv4

// blockLen is the number of addresses in a block. Every address of a block is usable: tabby
// routes host prefixes (/32, /128) to workloads, so there is no network or broadcast address to
// keep free (as Calico).
func blockLen(block netip.Prefix) int { return 1 << hostBits(block) }

func hostBits(p netip.Prefix) int { return p.Addr().BitLen() - p.Bits() }

// ordinalOf is ip's offset in block.
func ordinalOf(block netip.Prefix, ip netip.Addr) (int, bool) {
	if !block.Contains(ip) {
		return 0, false
	}
	return int(low16(ip) - low16(block.Addr())), true
}

// addrAt is the address at ordinal in block. The block is aligned and the ordinal below its
// size, so the sum never carries out of the last two bytes.
func addrAt(block netip.Prefix, ordinal int) netip.Addr {
	b := block.Addr().AsSlice()
	v := low16(block.Addr()) + uint16(ordinal)
	b[len(b)-2], b[len(b)-1] = byte(v>>8), byte(v)
	a, _ := netip.AddrFromSlice(b)
	return a
}

func low16(a netip.Addr) uint16 {
	b := a.AsSlice()
	return uint16(b[len(b)-2])<<8 | uint16(b[len(b)-1])
}

// blockContaining is the block of blockSize in which ip lies.
func blockContaining(ip netip.Addr, blockSize int) netip.Prefix {
	p, _ := ip.Prefix(blockSize)
	return p
}

// parseBlockCIDR reads an IPAMBlock's spec.cidr.
func parseBlockCIDR(b *v1.IPAMBlock) (netip.Prefix, error) {
	p, err := parseStoredCIDR(b.Spec.CIDR)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("IPAMBlock %s: spec.cidr %q: %w", b.Name, b.Spec.CIDR, err)
	}
	return p, nil
}

// parseAffinityCIDR reads a BlockAffinity's spec.cidr.
func parseAffinityCIDR(a *v1.BlockAffinity) (netip.Prefix, error) {
	p, err := parseStoredCIDR(a.Spec.CIDR)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("BlockAffinity %s: spec.cidr %q: %w", a.Name, a.Spec.CIDR, err)
	}
	return p, nil
}

// parseStoredCIDR reads a block's prefix as the IPAM objects store it (a block's, an affinity's,
// a key of a handle's spec.block).
func parseStoredCIDR(s string) (netip.Prefix, error) {
	p, err := validation.ParseCIDR(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if hostBits(p) > maxBlockHostBits {
		return netip.Prefix{}, fmt.Errorf("larger than any block (/%d holds more than %d addresses)", p.Bits(), 1<<maxBlockHostBits)
	}
	return p, nil
}

// freeOrdinal finds a free ordinal in b, starting at from and wrapping around, so that an address
// just released is not handed out again at once (a peer may still hold it in a cache).
func freeOrdinal(block netip.Prefix, b *v1.IPAMBlock, from int) (int, bool) {
	n := blockLen(block)
	if len(b.Spec.Allocations) >= n {
		return 0, false
	}
	for i := range n {
		o := (from + i) % n
		if _, taken := b.Spec.Allocations[OrdinalKey(o)]; !taken {
			return o, true
		}
	}
	return 0, false
}

// freeCount is the number of unallocated addresses in b.
func freeCount(block netip.Prefix, b *v1.IPAMBlock) int {
	return blockLen(block) - len(b.Spec.Allocations)
}

// allocationsOf lists the ordinals in b held by handle, in order.
func allocationsOf(b *v1.IPAMBlock, handle string) []int {
	c, err := parseBlockCIDR(b)
	if err != nil {
		return nil
	}
	var out []int
	for k, al := range b.Spec.Allocations {
		if al.Handle != handle {
			continue
		}
		if o, err := ParseOrdinal(c, k); err == nil {
			out = append(out, o)
		}
	}
	sort.Ints(out)
	return out
}

// affinityNode is the node of a "host:<node>" affinity, or "".
func affinityNode(b *v1.IPAMBlock) string {
	const p = v1.AffinityPrefixHost
	if len(b.Spec.Affinity) > len(p) && b.Spec.Affinity[:len(p)] == p {
		return b.Spec.Affinity[len(p):]
	}
	return ""
}

// poolSize is the number of addresses in a pool: up to 2^128, hence a big.Int.
func poolSize(p netip.Prefix) *big.Int { return new(big.Int).Lsh(big.NewInt(1), uint(hostBits(p))) }

// maxBlocks is the number of blocks a pool can be cut into.
func maxBlocks(p model.Pool) *big.Int {
	return new(big.Int).Lsh(big.NewInt(1), uint(p.BlockSize-p.CIDR.Bits()))
}
