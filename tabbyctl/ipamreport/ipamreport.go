// Package ipamreport answers the operator's IPAM questions from the raw IPAM objects (IPAMBlock,
// IPAMHandle, BlockAffinity) and the cluster's Pods and Nodes: how full each pool is, who holds
// an address, and what is inconsistent (leaked addresses, pods without an allocation, duplicate
// addresses, blocks of deleted nodes). It reads the objects the IPAM library writes, so it needs
// nothing from a running tabby-node.
package ipamreport

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// tunnelHandlePrefix starts the handle of a node's tunl0 address (names.TunnelHandle).
var tunnelHandlePrefix = strings.TrimSuffix(names.TunnelHandle("x"), "x")

// Data is a snapshot of everything the reports read.
type Data struct {
	Pools      []v1.IPPool
	Blocks     []v1.IPAMBlock
	Handles    []v1.IPAMHandle
	Affinities []v1.BlockAffinity
	Pods       []corev1.Pod
	Nodes      []corev1.Node
}

// Load lists the objects. Pods and Nodes come from the core API (all namespaces).
func Load(ctx context.Context, c *client.Client) (*Data, error) {
	d := &Data{}
	pools, err := c.IPPools().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list IPPools: %w", err)
	}
	d.Pools = pools.Items
	blocks, err := c.IPAMBlocks().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	d.Blocks = blocks.Items
	handles, err := c.IPAMHandles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list IPAMHandles: %w", err)
	}
	d.Handles = handles.Items
	affs, err := c.BlockAffinities().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list BlockAffinities: %w", err)
	}
	d.Affinities = affs.Items
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Pods: %w", err)
	}
	d.Pods = pods.Items
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	d.Nodes = nodes.Items
	return d, nil
}

// BlockUsage is one block's occupancy.
type BlockUsage struct {
	CIDR  string
	Node  string // affinity without "host:"; empty when the block has none
	Total uint64
	InUse uint64
}

// PoolUsage is one pool's occupancy; Blocks are the pool's blocks, sorted by address.
type PoolUsage struct {
	Name   string
	CIDR   string
	Total  uint64
	InUse  uint64
	Blocks []BlockUsage
}

// Free addresses of the pool.
func (p PoolUsage) Free() uint64 { return p.Total - p.InUse }

func size(p netip.Prefix) uint64 { return uint64(1) << (32 - p.Bits()) }

// Usage computes occupancy per pool. Blocks outside every pool (their pool was deleted while
// addresses were still allocated) are reported under a pool with an empty name.
func Usage(d *Data) []PoolUsage {
	var out []PoolUsage
	prefixes := make([]netip.Prefix, len(d.Pools))
	for i, p := range d.Pools {
		pfx, _ := netip.ParsePrefix(p.Spec.CIDR)
		prefixes[i] = pfx
		out = append(out, PoolUsage{Name: p.Name, CIDR: p.Spec.CIDR, Total: size(pfx)})
	}
	orphan := PoolUsage{}
	for _, b := range d.Blocks {
		bp, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			continue
		}
		bu := BlockUsage{CIDR: b.Spec.CIDR, Node: strings.TrimPrefix(b.Spec.Affinity, v1.AffinityPrefixHost), Total: size(bp), InUse: uint64(len(b.Spec.Allocations))}
		target := &orphan
		for i, pp := range prefixes {
			if pp.IsValid() && pp.Overlaps(bp) && pp.Bits() <= bp.Bits() {
				target = &out[i]
				break
			}
		}
		target.InUse += bu.InUse
		target.Blocks = append(target.Blocks, bu)
	}
	if len(orphan.Blocks) > 0 {
		for _, b := range orphan.Blocks {
			orphan.Total += b.Total
		}
		orphan.CIDR = "-"
		out = append(out, orphan)
	}
	for i := range out {
		sort.Slice(out[i].Blocks, func(a, b int) bool { return lessCIDR(out[i].Blocks[a].CIDR, out[i].Blocks[b].CIDR) })
	}
	sort.SliceStable(out, func(a, b int) bool {
		if (out[a].Name == "") != (out[b].Name == "") {
			return out[b].Name == ""
		}
		return out[a].Name < out[b].Name
	})
	return out
}

func lessCIDR(a, b string) bool {
	pa, ea := netip.ParsePrefix(a)
	pb, eb := netip.ParsePrefix(b)
	if ea != nil || eb != nil {
		return a < b
	}
	if c := pa.Addr().Compare(pb.Addr()); c != 0 {
		return c < 0
	}
	return pa.Bits() < pb.Bits()
}

// Holder says who holds an address.
type Holder struct {
	IP        netip.Addr
	Pool      string // empty when no pool contains it
	Block     *v1.IPAMBlock
	Ordinal   int
	Allocated bool
	v1.Allocation
}

// String is one human line.
func (h Holder) String() string {
	switch {
	case h.Block == nil && h.Pool == "":
		return fmt.Sprintf("%s is not in any IPPool", h.IP)
	case h.Block == nil:
		return fmt.Sprintf("%s is in IPPool %s but no block holding it has been claimed: not allocated", h.IP, h.Pool)
	case !h.Allocated:
		return fmt.Sprintf("%s is in block %s (%s) but not allocated", h.IP, h.Block.Spec.CIDR, affinityText(h.Block.Spec.Affinity))
	}
	who := "handle " + h.Handle
	if h.Pod != "" {
		who = fmt.Sprintf("pod %s/%s (handle %s)", h.Namespace, h.Pod, h.Handle)
	} else if node, ok := strings.CutPrefix(h.Handle, tunnelHandlePrefix); ok {
		who = fmt.Sprintf("the IPIP tunnel of node %s (handle %s)", node, h.Handle)
	}
	s := fmt.Sprintf("%s is allocated to %s in block %s (%s)", h.IP, who, h.Block.Spec.CIDR, affinityText(h.Block.Spec.Affinity))
	if h.Node != "" {
		s += ", by node " + h.Node
	}
	return s
}

func affinityText(a string) string {
	if a == "" {
		return "no affinity"
	}
	return "affinity " + a
}

// ordinal is ip's offset in block, or -1.
func ordinal(block netip.Prefix, ip netip.Addr) int {
	if !block.Contains(ip) {
		return -1
	}
	a, b := block.Masked().Addr().As4(), ip.As4()
	base := new(big.Int).SetBytes(a[:])
	off := new(big.Int).SetBytes(b[:])
	return int(off.Sub(off, base).Int64())
}

// AddrAt is the address at ordinal n of block.
func AddrAt(block netip.Prefix, n int) netip.Addr {
	a := block.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Lookup finds who holds ip.
func Lookup(d *Data, ip netip.Addr) Holder {
	h := Holder{IP: ip, Ordinal: -1}
	for _, p := range d.Pools {
		if pp, err := netip.ParsePrefix(p.Spec.CIDR); err == nil && pp.Contains(ip) {
			h.Pool = p.Name
		}
	}
	for i := range d.Blocks {
		b := &d.Blocks[i]
		bp, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil || !bp.Contains(ip) {
			continue
		}
		h.Block = b
		h.Ordinal = ordinal(bp, ip)
		if a, ok := b.Spec.Allocations[strconv.Itoa(h.Ordinal)]; ok {
			h.Allocated = true
			h.Allocation = a
		}
		break
	}
	return h
}

// Problem is one inconsistency found by Check.
type Problem struct {
	Kind   string // short class, e.g. "leaked allocation"
	Detail string
}

func (p Problem) String() string { return p.Kind + ": " + p.Detail }

// Problem classes.
const (
	LeakedAllocation   = "allocation without a live pod"
	PodWithoutAlloc    = "pod without an allocation"
	DuplicateIP        = "duplicate IP"
	BlockOfDeletedNode = "block of a deleted node"
	AffinityOfDeleted  = "affinity of a deleted node"
	HandleMismatch     = "handle mismatch"
	OverlappingBlocks  = "overlapping blocks"
)

func podLive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func podIPs(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	add(p.Status.PodIP)
	for _, ip := range p.Status.PodIPs {
		add(ip.IP)
	}
	return out
}

// LivePodsWithIP are the live, pod-network pods whose status carries ip.
func LivePodsWithIP(d *Data, ip netip.Addr) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range d.Pods {
		p := &d.Pods[i]
		if p.Spec.HostNetwork || !podLive(p) {
			continue
		}
		for _, a := range podIPs(p) {
			if a == ip {
				out = append(out, p)
			}
		}
	}
	return out
}

// Check reports every inconsistency, sorted by class then detail.
func Check(d *Data) []Problem {
	var probs []Problem
	add := func(kind, format string, args ...any) {
		probs = append(probs, Problem{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	nodes := map[string]bool{}
	for _, n := range d.Nodes {
		nodes[n.Name] = true
	}
	pods := map[string]*corev1.Pod{}
	for i := range d.Pods {
		p := &d.Pods[i]
		pods[p.Namespace+"/"+p.Name] = p
	}
	handles := map[string]v1.IPAMHandle{}
	for _, h := range d.Handles {
		handles[h.Spec.HandleID] = h
	}

	allocated := map[netip.Addr]string{}       // ip → block CIDR
	handleCount := map[string]map[string]int{} // handleID → block → count
	var prefixes []netip.Prefix
	for _, b := range d.Blocks {
		bp, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			continue
		}
		for _, other := range prefixes {
			if other.Overlaps(bp) {
				add(OverlappingBlocks, "block %s overlaps block %s", bp, other)
			}
		}
		prefixes = append(prefixes, bp)
		if node, ok := strings.CutPrefix(b.Spec.Affinity, v1.AffinityPrefixHost); ok && !nodes[node] {
			add(BlockOfDeletedNode, "block %s has affinity %s but Node %s does not exist (%d addresses allocated)", b.Spec.CIDR, b.Spec.Affinity, node, len(b.Spec.Allocations))
		}
		for ordStr, a := range b.Spec.Allocations {
			n, err := strconv.Atoi(ordStr)
			if err != nil {
				continue
			}
			ip := AddrAt(bp, n)
			if prev, dup := allocated[ip]; dup {
				add(DuplicateIP, "%s is allocated in block %s and in block %s", ip, prev, b.Spec.CIDR)
			}
			allocated[ip] = b.Spec.CIDR
			if handleCount[a.Handle] == nil {
				handleCount[a.Handle] = map[string]int{}
			}
			handleCount[a.Handle][b.Spec.CIDR]++
			switch {
			case a.Pod != "":
				p, ok := pods[a.Namespace+"/"+a.Pod]
				if !ok || !podLive(p) {
					add(LeakedAllocation, "%s (block %s, handle %s) is allocated to pod %s/%s, which does not exist", ip, b.Spec.CIDR, a.Handle, a.Namespace, a.Pod)
					continue
				}
				ips := podIPs(p)
				// A pod still being set up has no IP in its status yet: not a leak.
				if len(ips) > 0 && !containsAddr(ips, ip) {
					add(LeakedAllocation, "%s (block %s, handle %s) is allocated to pod %s/%s, which has address %s", ip, b.Spec.CIDR, a.Handle, a.Namespace, a.Pod, ips[0])
				}
			case strings.HasPrefix(a.Handle, tunnelHandlePrefix):
				node := strings.TrimPrefix(a.Handle, tunnelHandlePrefix)
				if !nodes[node] {
					add(LeakedAllocation, "%s (block %s) is the IPIP tunnel address of Node %s, which does not exist", ip, b.Spec.CIDR, node)
				}
			}
		}
	}
	for _, a := range d.Affinities {
		if !nodes[a.Spec.Node] {
			add(AffinityOfDeleted, "BlockAffinity %s claims block %s for Node %s, which does not exist", a.Name, a.Spec.CIDR, a.Spec.Node)
		}
	}

	// Handles and blocks must agree: a DEL releases by handle, so a handle that undercounts
	// leaks addresses and one that overcounts points at nothing.
	ids := map[string]bool{}
	for id := range handleCount {
		ids[id] = true
	}
	for id := range handles {
		ids[id] = true
	}
	for id := range ids {
		h, ok := handles[id]
		if !ok {
			add(HandleMismatch, "allocations with handle %s exist but no IPAMHandle records it", id)
			continue
		}
		blocks := map[string]bool{}
		for b := range h.Spec.Block {
			blocks[b] = true
		}
		for b := range handleCount[id] {
			blocks[b] = true
		}
		for b := range blocks {
			if want, got := h.Spec.Block[b], handleCount[id][b]; want != got {
				add(HandleMismatch, "IPAMHandle %s counts %d addresses in block %s, the block holds %d", h.Name, want, b, got)
			}
		}
	}

	var poolPrefixes []netip.Prefix
	for _, p := range d.Pools {
		if pp, err := netip.ParsePrefix(p.Spec.CIDR); err == nil {
			poolPrefixes = append(poolPrefixes, pp)
		}
	}
	byIP := map[netip.Addr][]string{}
	for i := range d.Pods {
		p := &d.Pods[i]
		if p.Spec.HostNetwork || !podLive(p) {
			continue
		}
		for _, ip := range podIPs(p) {
			if !inAny(poolPrefixes, ip) {
				continue
			}
			byIP[ip] = append(byIP[ip], p.Namespace+"/"+p.Name)
			if _, ok := allocated[ip]; !ok {
				add(PodWithoutAlloc, "pod %s/%s has address %s, which is not allocated", p.Namespace, p.Name, ip)
			}
		}
	}
	for ip, ps := range byIP {
		if len(ps) > 1 {
			sort.Strings(ps)
			add(DuplicateIP, "%s is the address of %d live pods: %s", ip, len(ps), strings.Join(ps, ", "))
		}
	}
	sort.Slice(probs, func(i, j int) bool {
		if probs[i].Kind != probs[j].Kind {
			return probs[i].Kind < probs[j].Kind
		}
		return probs[i].Detail < probs[j].Detail
	})
	return probs
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
