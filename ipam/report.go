package ipam

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"sort"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// The queries behind `tabbyctl ipam show/check` and tabby-node's metrics. They read the
// datastore and change nothing.

// PoolUsage is one pool's use.
type PoolUsage struct {
	Name      string
	CIDR      netip.Prefix
	BlockSize int
	Disabled  bool
	// Total addresses, addresses allocated, and the rest: an IPv6 pool's total and free
	// overflow any integer type.
	Total, Free *big.Int
	InUse       int64
	// Blocks claimed by nodes, and the number of blocks the pool can hold.
	Blocks    int
	MaxBlocks *big.Int
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
	blocks, err := s.ListBlocks(ctx)
	if err != nil {
		return Usage{}, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	return UsageOf(items, blocks), nil
}

// UsageOf is the use of pools by blocks, as already listed (tabby-node's metrics read them from
// its informers).
func UsageOf(items []v1.IPPool, blocks []v1.IPAMBlock) Usage {
	pools, _ := parsePools(items)
	var u Usage
	byPool := map[string]*PoolUsage{}
	for _, p := range pools {
		u.Pools = append(u.Pools, PoolUsage{Name: p.Name, CIDR: p.CIDR, BlockSize: p.BlockSize, Disabled: p.Disabled, Total: poolSize(p.CIDR), MaxBlocks: maxBlocks(p)})
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
		u.Pools[i].Free = new(big.Int).Sub(u.Pools[i].Total, big.NewInt(u.Pools[i].InUse))
	}
	sort.Slice(u.Blocks, func(i, j int) bool { return u.Blocks[i].CIDR.Addr().Less(u.Blocks[j].CIDR.Addr()) })
	return u
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
	needsHandle     bool
}

func ownersOf(b *v1.IPAMBlock, c netip.Prefix, pool string) []Owner {
	var out []Owner
	bn := affinityNode(b)
	for k, al := range b.Spec.Allocations {
		o, err := ParseOrdinal(c, k)
		if err != nil {
			continue
		}
		out = append(out, Owner{IP: addrAt(c, o), Handle: al.Handle, Namespace: al.Namespace, Pod: al.Pod,
			Node: al.Node, BlockNode: bn, Block: c, Pool: pool, Borrowed: al.Node != "" && al.Node != bn, needsHandle: NeedsHandle(b, al)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}

// WhoHas tells who holds ip. When nobody does the error wraps ErrNotAllocated and the Owner still
// says where ip would be: Block (invalid when no block contains it), BlockNode and Pool ("" when
// no pool contains it).
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
	where := Owner{IP: ip}
	if p, ok := poolFor(pools, ipfamily.HostPrefix(ip)); ok {
		where.Pool = p.Name
	}
	for i := range blocks {
		c, err := parseBlockCIDR(&blocks[i])
		if err != nil || !c.Contains(ip) {
			continue
		}
		bn := affinityNode(&blocks[i])
		p, _ := poolFor(pools, c)
		o, _ := ordinalOf(c, ip)
		al, ok := blocks[i].Spec.Allocations[OrdinalKey(o)]
		if !ok {
			if !where.Block.IsValid() {
				where.Block, where.BlockNode = c, bn
				if p.Name != "" {
					where.Pool = p.Name
				}
			}
			continue // overlapping blocks: another one may hold it
		}
		return Owner{IP: ip, Handle: al.Handle, Namespace: al.Namespace, Pod: al.Pod, Node: al.Node, BlockNode: bn,
			Block: c, Pool: p.Name, Borrowed: al.Node != "" && al.Node != bn}, nil
	}
	return where, fmt.Errorf("%s: %w", ip, ErrNotAllocated)
}

// CheckReport lists inconsistencies. tabby-node's garbage collector (ipam/gc) repairs on its own,
// after its grace period: WithoutPod and WrongPod (unless the pod merely terminated),
// HandlesWithoutAllocation, WithoutHandle, and everything of a deleted node
// (TunnelsOfDeletedNodes, BlocksOfDeletedNodes, AffinitiesOfDeletedNodes). The rest needs an
// operator (`tabbyctl ipam release`).
type CheckReport struct {
	// What was looked at.
	Checked Counts

	// Allocations naming a pod that does not exist or has terminated (Succeeded/Failed).
	WithoutPod []Owner
	// Allocations naming a pod that exists but reports other addresses (a new incarnation).
	WrongPod []WrongPod
	// Handles that hold no allocation.
	HandlesWithoutAllocation []string
	// Borrowed allocations whose handle object is missing (an address in its own node's block
	// needs none: doc.go).
	WithoutHandle []Owner
	// Handles whose per-block counts disagree with the blocks (handles holding at least one
	// allocation; those holding none are in HandlesWithoutAllocation).
	HandleMismatches []HandleMismatch
	// Addresses allocated in more than one block (overlapping blocks).
	DuplicateIPs []Owner
	// Addresses that more than one running pod reports in its status.
	DuplicatePodIPs []SharedPodIP
	// Running pods reporting an address of a pool that no block allocates.
	PodsWithoutAllocation []PodAddress
	// Tunnel addresses (Tunnel.Handle: IPIP, VXLAN) of nodes that no longer exist.
	TunnelsOfDeletedNodes []Owner
	// Blocks whose affine node no longer exists.
	BlocksOfDeletedNodes []BlockUsage
	// BlockAffinities of nodes that no longer exist.
	AffinitiesOfDeletedNodes []AffinityRef
	// Pairs of blocks that overlap.
	OverlappingBlocks [][2]netip.Prefix
	// Blocks no pool contains any more.
	BlocksOutsidePools []netip.Prefix
	// BlockAffinities whose block does not exist.
	AffinitiesWithoutBlock []string
	// Blocks DecodeBlock refuses (a bad cidr, an allocation key the allocator never writes):
	// why, naming the block.
	InvalidBlocks []string
}

// Counts is how many objects of each kind Check read.
type Counts struct {
	Pools, Blocks, Allocations, Handles, Pods, Nodes int
}

// WrongPod is an allocation whose pod reports other addresses.
type WrongPod struct {
	Owner
	PodIPs []netip.Addr
}

// HandleMismatch is a handle counting Counted addresses in Block where the block holds Held.
type HandleMismatch struct {
	Handle, Name string // handle ID and IPAMHandle object name
	Block        string
	Counted      int
	Held         int
}

// SharedPodIP is an address several running pods report.
type SharedPodIP struct {
	IP   netip.Addr
	Pods []string // namespace/name, sorted
}

// PodAddress is an address a pod reports.
type PodAddress struct {
	Namespace, Name string
	IP              netip.Addr
}

// AffinityRef names a BlockAffinity.
type AffinityRef struct {
	Name, Node, CIDR string
}

// Problems counts the inconsistencies found.
func (r CheckReport) Problems() int {
	return len(r.WithoutPod) + len(r.WrongPod) + len(r.HandlesWithoutAllocation) + len(r.WithoutHandle) +
		len(r.HandleMismatches) + len(r.DuplicateIPs) + len(r.DuplicatePodIPs) + len(r.PodsWithoutAllocation) +
		len(r.TunnelsOfDeletedNodes) + len(r.BlocksOfDeletedNodes) + len(r.AffinitiesOfDeletedNodes) +
		len(r.OverlappingBlocks) + len(r.BlocksOutsidePools) + len(r.AffinitiesWithoutBlock) + len(r.InvalidBlocks)
}

// running tells whether a pod may hold one of tabby's addresses now: a pod being deleted still
// runs until the runtime's DEL, but its status addresses may already be handed out again.
func running(p *Pod) bool { return !p.HostNetwork && !p.Terminated && !p.Deleting }

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
	r.Checked = Counts{Pools: len(items), Blocks: len(blocks), Handles: len(handles), Pods: len(pods), Nodes: len(nodes)}
	nodeSet := map[string]bool{}
	for _, n := range nodes {
		nodeSet[n.Name] = true
	}
	podByName := map[string]*Pod{}
	for i := range pods {
		podByName[pods[i].Namespace+"/"+pods[i].Name] = &pods[i]
	}
	handleByID := map[string]*v1.IPAMHandle{}
	for i := range handles {
		handleByID[handles[i].Spec.HandleID] = &handles[i]
	}
	held := map[string]map[string]int{} // handle ID → block CIDR → allocations
	borrowed := map[string][]string{}   // handle ID → blocks where it holds a borrowed address
	byIP := map[netip.Addr][]Owner{}
	blockNames := map[string]bool{}
	var cidrs []netip.Prefix
	for i := range blocks {
		b := &blocks[i]
		blockNames[b.Name] = true
		r.Checked.Allocations += len(b.Spec.Allocations)
		if _, _, err := DecodeBlock(b); err != nil {
			r.InvalidBlocks = append(r.InvalidBlocks, err.Error())
		}
		c, err := parseBlockCIDR(b)
		if err != nil {
			continue
		}
		cidrs = append(cidrs, c)
		p, inPool := poolFor(pools, c)
		if !inPool {
			r.BlocksOutsidePools = append(r.BlocksOutsidePools, c)
		}
		if n := affinityNode(b); n != "" && !nodeSet[n] {
			r.BlocksOfDeletedNodes = append(r.BlocksOfDeletedNodes, BlockUsage{CIDR: c, Pool: p.Name, Node: n, Size: blockLen(c), InUse: len(b.Spec.Allocations)})
		}
		for _, o := range ownersOf(b, c, p.Name) {
			if held[o.Handle] == nil {
				held[o.Handle] = map[string]int{}
			}
			held[o.Handle][c.String()]++
			byIP[o.IP] = append(byIP[o.IP], o)
			if o.needsHandle {
				borrowed[o.Handle] = append(borrowed[o.Handle], c.String())
				if handleByID[o.Handle] == nil {
					r.WithoutHandle = append(r.WithoutHandle, o)
				}
			}
			if o.Namespace != "" && o.Pod != "" {
				pod := podByName[o.Namespace+"/"+o.Pod]
				switch {
				case pod == nil || pod.Terminated:
					r.WithoutPod = append(r.WithoutPod, o)
				case len(pod.IPs) > 0 && !slices.Contains(pod.IPs, o.IP):
					// No address in its status yet is a pod being set up, not a leak.
					r.WrongPod = append(r.WrongPod, WrongPod{Owner: o, PodIPs: pod.IPs})
				}
			} else if _, n, ok := TunnelOf(o.Handle); ok && !nodeSet[n] {
				r.TunnelsOfDeletedNodes = append(r.TunnelsOfDeletedNodes, o)
			}
		}
	}
	// A DEL releases by handle: a handle that undercounts leaks addresses, one that overcounts
	// points at nothing.
	for _, h := range handles {
		counts := held[h.Spec.HandleID]
		if len(counts) == 0 {
			r.HandlesWithoutAllocation = append(r.HandlesWithoutAllocation, h.Spec.HandleID)
			continue
		}
		// What the handle must list: its borrowed addresses' blocks. It may list its own
		// node's blocks too (the direct path of older versions wrote them), and then exactly.
		bs := map[string]bool{}
		for b := range h.Spec.Block {
			bs[b] = true
		}
		for _, b := range borrowed[h.Spec.HandleID] {
			bs[b] = true
		}
		for b := range bs {
			if want, got := h.Spec.Block[b], counts[b]; want != got {
				r.HandleMismatches = append(r.HandleMismatches, HandleMismatch{Handle: h.Spec.HandleID, Name: h.Name, Block: b, Counted: want, Held: got})
			}
		}
	}
	for _, os := range byIP {
		if len(os) > 1 {
			r.DuplicateIPs = append(r.DuplicateIPs, os...)
		}
	}
	slices.SortFunc(cidrs, ipfamily.ComparePrefixes)
	for i := range cidrs {
		// Sorted by address, a block can only overlap the ones after it that start inside it.
		for j := i + 1; j < len(cidrs) && cidrs[i].Contains(cidrs[j].Addr()); j++ {
			r.OverlappingBlocks = append(r.OverlappingBlocks, [2]netip.Prefix{cidrs[i], cidrs[j]})
		}
	}
	for _, a := range affs {
		c, err := parseAffinityCIDR(&a)
		if err != nil || !blockNames[names.BlockName(c)] {
			r.AffinitiesWithoutBlock = append(r.AffinitiesWithoutBlock, a.Name)
		}
		if !nodeSet[a.Spec.Node] {
			r.AffinitiesOfDeletedNodes = append(r.AffinitiesOfDeletedNodes, AffinityRef{Name: a.Name, Node: a.Spec.Node, CIDR: a.Spec.CIDR})
		}
	}
	// The pods' side: what they report must be allocated, and to one of them only.
	byPodIP := map[netip.Addr][]string{}
	for i := range pods {
		p := &pods[i]
		if !running(p) {
			continue
		}
		for _, ip := range p.IPs {
			if _, ok := poolFor(pools, ipfamily.HostPrefix(ip)); !ok {
				continue
			}
			byPodIP[ip] = append(byPodIP[ip], p.Namespace+"/"+p.Name)
			if len(byIP[ip]) == 0 {
				r.PodsWithoutAllocation = append(r.PodsWithoutAllocation, PodAddress{Namespace: p.Namespace, Name: p.Name, IP: ip})
			}
		}
	}
	for ip, ps := range byPodIP {
		if len(ps) > 1 {
			sort.Strings(ps)
			r.DuplicatePodIPs = append(r.DuplicatePodIPs, SharedPodIP{IP: ip, Pods: ps})
		}
	}
	sort.Strings(r.HandlesWithoutAllocation)
	sort.Strings(r.AffinitiesWithoutBlock)
	sort.Slice(r.AffinitiesOfDeletedNodes, func(i, j int) bool { return r.AffinitiesOfDeletedNodes[i].Name < r.AffinitiesOfDeletedNodes[j].Name })
	sort.Slice(r.HandleMismatches, func(i, j int) bool {
		a, b := r.HandleMismatches[i], r.HandleMismatches[j]
		return a.Handle < b.Handle || a.Handle == b.Handle && a.Block < b.Block
	})
	for _, l := range [][]Owner{r.WithoutPod, r.WithoutHandle, r.DuplicateIPs, r.TunnelsOfDeletedNodes} {
		sort.SliceStable(l, func(i, j int) bool { return l[i].IP.Less(l[j].IP) })
	}
	sort.Slice(r.WrongPod, func(i, j int) bool { return r.WrongPod[i].IP.Less(r.WrongPod[j].IP) })
	sort.Slice(r.DuplicatePodIPs, func(i, j int) bool { return r.DuplicatePodIPs[i].IP.Less(r.DuplicatePodIPs[j].IP) })
	sort.Slice(r.PodsWithoutAllocation, func(i, j int) bool {
		a, b := r.PodsWithoutAllocation[i], r.PodsWithoutAllocation[j]
		if a.IP != b.IP {
			return a.IP.Less(b.IP)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return r, nil
}
