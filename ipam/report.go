package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strconv"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// The queries behind `tabbyctl ipam show/check` and tabby-node's metrics. They read the
// datastore and change nothing.

// PoolUsage is one pool's use.
type PoolUsage struct {
	Name      string
	CIDR      netip.Prefix
	BlockSize int
	Disabled  bool
	// Total addresses, addresses allocated, and the rest.
	Total, InUse, Free int64
	// Blocks claimed by nodes, and the number of blocks the pool can hold.
	Blocks, MaxBlocks int
}

// BlockUsage is one block's use.
type BlockUsage struct {
	CIDR netip.Prefix
	Pool string // "" when no pool contains it any more
	Node string // affine node ("" once released)
	Size int
	// InUse addresses, of which Borrowed are held by other nodes.
	InUse, Borrowed int
}

// Usage is the use of every pool and block.
type Usage struct {
	Pools  []PoolUsage
	Blocks []BlockUsage
}

// GetUsage reports the use of every pool and block.
func GetUsage(ctx context.Context, s Store) (Usage, error) {
	items, err := s.ListPools(ctx)
	if err != nil {
		return Usage{}, fmt.Errorf("list IPPools: %w", err)
	}
	pools, _ := parsePools(items)
	blocks, err := s.ListBlocks(ctx)
	if err != nil {
		return Usage{}, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	var u Usage
	byPool := map[string]*PoolUsage{}
	for _, p := range pools {
		u.Pools = append(u.Pools, PoolUsage{Name: p.Name, CIDR: p.CIDR, BlockSize: p.BlockSize, Disabled: p.Disabled, Total: poolSize(p.CIDR), MaxBlocks: blockCount(p.CIDR, p.BlockSize)})
	}
	for i := range u.Pools {
		byPool[u.Pools[i].Name] = &u.Pools[i]
	}
	for i := range blocks {
		b := &blocks[i]
		c, err := parseBlockCIDR(b)
		if err != nil {
			continue
		}
		bu := BlockUsage{CIDR: c, Node: affinityNode(b), Size: blockLen(c), InUse: len(b.Spec.Allocations)}
		for _, al := range b.Spec.Allocations {
			if al.Node != "" && al.Node != bu.Node {
				bu.Borrowed++
			}
		}
		if p, ok := poolFor(pools, c); ok {
			bu.Pool = p.Name
			pu := byPool[p.Name]
			pu.InUse += int64(bu.InUse)
			pu.Blocks++
		}
		u.Blocks = append(u.Blocks, bu)
	}
	for i := range u.Pools {
		u.Pools[i].Free = u.Pools[i].Total - u.Pools[i].InUse
	}
	sort.Slice(u.Blocks, func(i, j int) bool { return u.Blocks[i].CIDR.Addr().Less(u.Blocks[j].CIDR.Addr()) })
	return u, nil
}

// Owner is who holds an address.
type Owner struct {
	IP             netip.Addr
	Handle         string
	Namespace, Pod string
	// Node that allocated it; BlockNode the block's affine node (they differ when borrowed).
	Node, BlockNode string
	Block           netip.Prefix
	Pool            string
	Borrowed        bool
}

func ownersOf(b *v1.IPAMBlock, c netip.Prefix, pool string) []Owner {
	var out []Owner
	bn := affinityNode(b)
	for k, al := range b.Spec.Allocations {
		o, err := strconv.Atoi(k)
		if err != nil || o < 0 || o >= blockLen(c) {
			continue
		}
		out = append(out, Owner{IP: addrAt(c, o), Handle: al.Handle, Namespace: al.Namespace, Pod: al.Pod,
			Node: al.Node, BlockNode: bn, Block: c, Pool: pool, Borrowed: al.Node != "" && al.Node != bn})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}

// WhoHas tells who holds ip (ErrNotAllocated when nobody does).
func WhoHas(ctx context.Context, s Store, ip netip.Addr) (Owner, error) {
	blocks, err := s.ListBlocks(ctx)
	if err != nil {
		return Owner{}, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	items, err := s.ListPools(ctx)
	if err != nil {
		return Owner{}, fmt.Errorf("list IPPools: %w", err)
	}
	pools, _ := parsePools(items)
	for i := range blocks {
		c, err := parseBlockCIDR(&blocks[i])
		if err != nil || !c.Contains(ip) {
			continue
		}
		o, _ := ordinalOf(c, ip)
		al, ok := blocks[i].Spec.Allocations[strconv.Itoa(o)]
		if !ok {
			continue
		}
		p, _ := poolFor(pools, c)
		bn := affinityNode(&blocks[i])
		return Owner{IP: ip, Handle: al.Handle, Namespace: al.Namespace, Pod: al.Pod, Node: al.Node, BlockNode: bn,
			Block: c, Pool: p.Name, Borrowed: al.Node != "" && al.Node != bn}, nil
	}
	return Owner{}, fmt.Errorf("%s: %w", ip, ErrNotAllocated)
}

// CheckReport lists inconsistencies; the garbage collector repairs the first three kinds on its
// own after its grace period, the rest need an operator (`tabbyctl ipam release`).
type CheckReport struct {
	// Allocations naming a pod that does not exist.
	WithoutPod []Owner
	// Handles that hold no allocation.
	HandlesWithoutAllocation []string
	// Allocations whose handle object is missing.
	WithoutHandle []Owner
	// Addresses allocated in more than one block (overlapping blocks).
	DuplicateIPs []Owner
	// Blocks whose affine node no longer exists.
	BlocksOfDeletedNodes []BlockUsage
	// Blocks no pool contains any more.
	BlocksOutsidePools []netip.Prefix
	// BlockAffinities whose block does not exist.
	AffinitiesWithoutBlock []string
}

// Problems counts the inconsistencies found.
func (r CheckReport) Problems() int {
	return len(r.WithoutPod) + len(r.HandlesWithoutAllocation) + len(r.WithoutHandle) + len(r.DuplicateIPs) +
		len(r.BlocksOfDeletedNodes) + len(r.BlocksOutsidePools) + len(r.AffinitiesWithoutBlock)
}

// Check looks the whole datastore over for leaks and inconsistencies.
func Check(ctx context.Context, s Store) (CheckReport, error) {
	var r CheckReport
	items, err := s.ListPools(ctx)
	if err != nil {
		return r, fmt.Errorf("list IPPools: %w", err)
	}
	pools, _ := parsePools(items)
	blocks, err := s.ListBlocks(ctx)
	if err != nil {
		return r, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	handles, err := s.ListHandles(ctx)
	if err != nil {
		return r, fmt.Errorf("list IPAMHandles: %w", err)
	}
	affs, err := s.ListAffinities(ctx)
	if err != nil {
		return r, fmt.Errorf("list BlockAffinities: %w", err)
	}
	nodes, err := s.ListNodes(ctx)
	if err != nil {
		return r, fmt.Errorf("list nodes: %w", err)
	}
	pods, err := s.ListPods(ctx, "")
	if err != nil {
		return r, fmt.Errorf("list pods: %w", err)
	}
	nodeSet := map[string]bool{}
	for _, n := range nodes {
		nodeSet[n.Name] = true
	}
	podSet := map[string]bool{}
	for _, p := range pods {
		podSet[p.Namespace+"/"+p.Name] = true
	}
	handleSet := map[string]bool{}
	for _, h := range handles {
		handleSet[h.Spec.HandleID] = true
	}
	held := map[string]bool{}
	byIP := map[netip.Addr][]Owner{}
	blockNames := map[string]bool{}
	for i := range blocks {
		b := &blocks[i]
		blockNames[b.Name] = true
		c, err := parseBlockCIDR(b)
		if err != nil {
			continue
		}
		p, inPool := poolFor(pools, c)
		if !inPool {
			r.BlocksOutsidePools = append(r.BlocksOutsidePools, c)
		}
		if n := affinityNode(b); n != "" && !nodeSet[n] {
			r.BlocksOfDeletedNodes = append(r.BlocksOfDeletedNodes, BlockUsage{CIDR: c, Pool: p.Name, Node: n, Size: blockLen(c), InUse: len(b.Spec.Allocations)})
		}
		for _, o := range ownersOf(b, c, p.Name) {
			held[o.Handle] = true
			byIP[o.IP] = append(byIP[o.IP], o)
			if o.Namespace != "" && o.Pod != "" && !podSet[o.Namespace+"/"+o.Pod] {
				r.WithoutPod = append(r.WithoutPod, o)
			}
			if !handleSet[o.Handle] {
				r.WithoutHandle = append(r.WithoutHandle, o)
			}
		}
	}
	for _, h := range handles {
		if !held[h.Spec.HandleID] {
			r.HandlesWithoutAllocation = append(r.HandlesWithoutAllocation, h.Spec.HandleID)
		}
	}
	for _, os := range byIP {
		if len(os) > 1 {
			r.DuplicateIPs = append(r.DuplicateIPs, os...)
		}
	}
	for _, a := range affs {
		c, err := netip.ParsePrefix(a.Spec.CIDR)
		if err != nil || !blockNames[names.BlockName(c)] {
			r.AffinitiesWithoutBlock = append(r.AffinitiesWithoutBlock, a.Name)
		}
	}
	sort.Strings(r.HandlesWithoutAllocation)
	sort.Strings(r.AffinitiesWithoutBlock)
	sort.Slice(r.DuplicateIPs, func(i, j int) bool { return r.DuplicateIPs[i].IP.Less(r.DuplicateIPs[j].IP) })
	return r, nil
}
