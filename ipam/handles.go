package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// An IPAMHandle exists only where DEL could not find an address without it (doc.go): an address
// in one of the node's own blocks is found in the node's blocks, which this process caches and
// which name the handle, so the block update is all an ADD writes. A borrowed address lives in
// another node's block, which nothing on the node looks at, so its handle object is written
// before the block and lists that block.

// NeedsHandle says whether allocation al of block b must be listed by an IPAMHandle: it is
// borrowed (allocated by a node other than the block's). A block without affinity is one whose
// node was deleted: no DEL of its own addresses will come, and the garbage collector, not a
// handle, releases them.
func NeedsHandle(b *v1.IPAMBlock, al v1.Allocation) bool {
	bn := affinityNode(b)
	return bn != "" && al.Node != "" && al.Node != bn
}

// RecordHandle makes the IPAMHandle of handle exist and list block, annotated with the node that
// allocated in it: what the garbage collector restores for a live borrowed allocation whose
// handle object is missing.
func (a *Allocator) RecordHandle(ctx context.Context, handle, node string, block netip.Prefix) error {
	return a.recordHandle(ctx, Request{Handle: handle, Node: node}, block)
}

// recordHandle makes handle r.Handle exist and list block (it may list others too).
func (a *Allocator) recordHandle(ctx context.Context, r Request, block netip.Prefix) error {
	name := names.HandleName(r.Handle)
	key := block.String()
	create := func() error {
		_, err := a.store.CreateHandle(ctx, &v1.IPAMHandle{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnotationHandleNode: r.Node}},
			Spec:       v1.IPAMHandleSpec{HandleID: r.Handle, Block: map[string]int{key: 1}},
		})
		return err
	}
	// Usually the handle is new: one Create.
	err := create()
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create IPAMHandle %s: %w", name, err)
		}
		return nil
	}
	for range a.cfg.MaxRetries {
		h, err := a.store.GetHandle(ctx, name)
		switch {
		case apierrors.IsNotFound(err):
			err = create()
		case err != nil:
			return fmt.Errorf("get IPAMHandle %s: %w", name, err)
		case h.Spec.HandleID != r.Handle:
			return fmt.Errorf("IPAMHandle %s belongs to handle %q, not %q", name, h.Spec.HandleID, r.Handle)
		case h.Spec.Block[key] > 0:
			return nil
		default:
			if h.Spec.Block == nil {
				h.Spec.Block = map[string]int{}
			}
			h.Spec.Block[key] = 1
			_, err = a.store.UpdateHandle(ctx, h)
		}
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("write IPAMHandle %s: %w", name, err)
		}
	}
	return fmt.Errorf("write IPAMHandle %s: gave up after %d compare-and-swap conflicts", name, a.cfg.MaxRetries)
}

// LoadNode reads node's blocks into the cache if they are not there yet, so that Lookup and
// ReleaseHandle find the addresses of the node's own blocks, which no handle object lists.
func (a *Allocator) LoadNode(ctx context.Context, node string) error {
	if node == "" {
		return nil
	}
	if err := a.ensureLoaded(ctx, a.node(node)); err != nil {
		return fmt.Errorf("load the blocks of node %s: %w", node, err)
	}
	return nil
}

// heldBy finds handle's address of family fam in the node's cached blocks, or in a write of the batch being
// built (pending), so that a repeated Assign gets the same address.
func (ns *nodeState) heldBy(handle string, fam ipfamily.Family, pending map[netip.Prefix]*blockWrite) (netip.Prefix, int, bool) {
	for c, b := range ns.blocks {
		if ipfamily.OfPrefix(c) != fam {
			continue // a dual-stack attachment holds one address of each family under one handle
		}
		if w := pending[c]; w != nil {
			b = w.obj
		}
		if os := allocationsOf(b, handle); len(os) > 0 {
			return c, os[0], true
		}
	}
	return netip.Prefix{}, 0, false
}

// cachedHolding lists the cached blocks (of every node this allocator knows) that hold an
// allocation of handle.
func (a *Allocator) cachedHolding(handle string) []netip.Prefix {
	nodes := a.knownNodes()
	var out []netip.Prefix
	for _, ns := range nodes {
		ns.mu.Lock()
		for c, b := range ns.blocks {
			if len(allocationsOf(b, handle)) > 0 {
				out = append(out, c)
			}
		}
		ns.mu.Unlock()
	}
	return out
}

// knownNodes are the nodes whose blocks this allocator caches.
func (a *Allocator) knownNodes() []*nodeState {
	a.mu.Lock()
	defer a.mu.Unlock()
	nodes := make([]*nodeState, 0, len(a.nodes))
	for _, ns := range a.nodes {
		nodes = append(nodes, ns)
	}
	return nodes
}

// allInOwnBlocks says whether each of addrs is allocated to handle in a cached block, by the
// node the block is affine to: not borrowed.
func (a *Allocator) allInOwnBlocks(handle string, addrs []netip.Addr) bool {
	nodes := a.knownNodes()
	for _, ip := range addrs {
		found := false
		for _, ns := range nodes {
			ns.mu.Lock()
			for c, b := range ns.blocks {
				if o, ok := ordinalOf(c, ip); ok {
					al, held := b.Spec.Allocations[OrdinalKey(o)]
					found = held && al.Handle == handle && !NeedsHandle(b, al)
					break
				}
			}
			ns.mu.Unlock()
			if found {
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// blocksOfHandle is where handle's addresses may be: the blocks its object lists (h may be nil)
// and the cached blocks that hold it, sorted.
func (a *Allocator) blocksOfHandle(h *v1.IPAMHandle, handle string) []netip.Prefix {
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	add := func(c netip.Prefix) {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if h != nil {
		for cs := range h.Spec.Block {
			if c, err := parseStoredCIDR(cs); err == nil {
				add(c)
			}
		}
	}
	for _, c := range a.cachedHolding(handle) {
		add(c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr().Less(out[j].Addr()) })
	return out
}

// Lookup returns the addresses a handle holds (none for an unknown handle), read fresh from
// their blocks.
func (a *Allocator) Lookup(ctx context.Context, handle string) ([]Assignment, error) {
	h, err := a.store.GetHandle(ctx, names.HandleName(handle))
	if apierrors.IsNotFound(err) {
		h, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lookup %s: get IPAMHandle %s: %w", handle, names.HandleName(handle), err)
	}
	cidrs := a.blocksOfHandle(h, handle)
	if len(cidrs) == 0 {
		return nil, nil
	}
	pools, _, err := a.pools(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("lookup %s: %w", handle, err)
	}
	var out []Assignment
	for _, c := range cidrs {
		b, err := a.store.GetBlock(ctx, names.BlockName(c))
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lookup %s: get IPAMBlock %s: %w", handle, names.BlockName(c), err)
		}
		p, _ := poolFor(pools, c)
		for _, o := range allocationsOf(b, handle) {
			al := b.Spec.Allocations[OrdinalKey(o)]
			out = append(out, Assignment{
				IP: addrAt(c, o), Block: c, Pool: p.Name, Overhead: EncapOverhead(p),
				Borrowed: al.Node != "" && al.Node != affinityNode(b), Node: al.Node,
			})
		}
	}
	return out, nil
}
