package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// ErrNotAllocated says an address is not allocated.
var ErrNotAllocated = errors.New("not allocated")

// ReleaseHandle releases every address of handle and deletes the handle. Releasing an unknown
// handle succeeds. The blocks are written before the handle is deleted (doc.go). Besides the
// blocks the handle object lists, it looks in the cached blocks of the nodes this allocator
// knows (LoadNode): an address whose handle object is not written yet, or was lost to a crash.
func (a *Allocator) ReleaseHandle(ctx context.Context, handle string) error {
	return a.releaseHandle(ctx, handle, false)
}

// ReleaseHeld is ReleaseHandle for a caller that knows the attachment's addresses (a DEL's
// prevResult). When every one is allocated to handle in a cached block of the node that owns
// the block, none is borrowed, so no IPAMHandle object exists (handles.go) and the handle's GET,
// a 404 on nearly every DEL, is skipped: the DEL costs the block update alone. Otherwise (an
// address borrowed, not cached, or none given) it is ReleaseHandle.
//
// The one address it may miss: a borrowed one taken by an ADD that died before it answered,
// when the runtime's retry got an address of the node's own block instead. The runtime's result
// does not list it; the garbage collector releases it once its pod reports another address or
// is gone.
func (a *Allocator) ReleaseHeld(ctx context.Context, handle string, held []netip.Addr) error {
	return a.releaseHandle(ctx, handle, len(held) > 0 && a.allInOwnBlocks(handle, held))
}

func (a *Allocator) releaseHandle(ctx context.Context, handle string, noHandleObject bool) error {
	name := names.HandleName(handle)
	for range a.cfg.MaxRetries {
		var h *v1.IPAMHandle
		if !noHandleObject {
			got, err := a.store.GetHandle(ctx, name)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("release %s: get IPAMHandle %s: %w", handle, name, err)
			case got.Spec.HandleID != handle:
				return fmt.Errorf("release %s: IPAMHandle %s belongs to handle %q", handle, name, got.Spec.HandleID)
			default:
				h = got
			}
		}
		for _, c := range a.blocksOfHandle(h, handle) {
			if _, err := a.releaseInBlock(ctx, c, func(_ int, al v1.Allocation) bool { return al.Handle == handle }); err != nil {
				return fmt.Errorf("release %s: %w", handle, err)
			}
		}
		if h == nil {
			return nil
		}
		err := a.store.DeleteHandle(ctx, name, h.ResourceVersion)
		if err == nil || apierrors.IsNotFound(err) {
			a.log.Debug("released handle", "handle", handle)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("release %s: delete IPAMHandle %s: %w", handle, name, err)
		}
		// The handle changed under us (an Assign added a block to it): the blocks must be
		// looked at again.
	}
	return fmt.Errorf("release %s: gave up after %d compare-and-swap conflicts on IPAMHandle %s", handle, a.cfg.MaxRetries, name)
}

// releaseInBlock removes the allocations of block that match, with compare-and-swap retries, and
// returns the ordinals removed. A block that does not exist holds nothing.
func (a *Allocator) releaseInBlock(ctx context.Context, c netip.Prefix, match func(ordinal int, al v1.Allocation) bool) ([]int, error) {
	name := names.BlockName(c)
	// Releases of one block from this process queue instead of racing each other's
	// compare-and-swaps (a DEL storm after a node drain hits few blocks).
	bl := a.blockLock(c)
	bl.Lock()
	defer bl.Unlock()
	var ns *nodeState
	var b *v1.IPAMBlock
	fromCache := false
	attempt := 0
	if cb, owner := a.cachedBlock(c); cb != nil {
		// Optimistic: the cached copy is usually current and saves a round trip.
		b, ns, fromCache = cb, owner, true
		defer ns.mu.Unlock()
	}
	for ; attempt < a.cfg.MaxRetries; attempt++ {
		if b == nil {
			got, err := a.store.GetBlock(ctx, name)
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("get IPAMBlock %s: %w", name, err)
			}
			b, fromCache = got, false
		}
		if ns == nil {
			// Writes to a node's blocks go through its lock, so this allocator's own Assigns on
			// the node do not lose compare-and-swaps to its releases.
			if ns = a.knownNode(affinityNode(b)); ns != nil {
				ns.mu.Lock()
				defer ns.mu.Unlock()
			}
		}
		nb := b.DeepCopy()
		var removed []int
		for k, al := range nb.Spec.Allocations {
			o, err := ParseOrdinal(c, k)
			if err == nil && match(o, al) {
				delete(nb.Spec.Allocations, k)
				removed = append(removed, o)
			}
		}
		if len(removed) == 0 {
			if fromCache {
				b = nil // the cached copy may predate the allocation: ask the datastore
				continue
			}
			return nil, nil
		}
		got, err := a.store.UpdateBlock(ctx, nb)
		if apierrors.IsConflict(err) {
			b = nil
			backoff(ctx, attempt)
			continue
		}
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("update IPAMBlock %s: %w", name, err)
		}
		if ns != nil && affinityNode(got) == ns.name {
			ns.blocks[c] = got
		}
		sort.Ints(removed)
		return removed, nil
	}
	return nil, fmt.Errorf("update IPAMBlock %s: gave up after %d compare-and-swap conflicts", name, a.cfg.MaxRetries)
}

// cachedBlock finds a node whose cache holds block c and returns the copy with that node's lock
// held.
func (a *Allocator) cachedBlock(c netip.Prefix) (*v1.IPAMBlock, *nodeState) {
	a.mu.Lock()
	nodes := make([]*nodeState, 0, len(a.nodes))
	for _, ns := range a.nodes {
		nodes = append(nodes, ns)
	}
	a.mu.Unlock()
	for _, ns := range nodes {
		ns.mu.Lock()
		if b := ns.blocks[c]; b != nil {
			return b, ns
		}
		ns.mu.Unlock()
	}
	return nil, nil
}

// ReleaseIP releases one address, whatever handle holds it, and takes it off the handle.
// An address nobody holds gives ErrNotAllocated.
func (a *Allocator) ReleaseIP(ctx context.Context, ip netip.Addr) error {
	handle, err := a.releaseIP(ctx, ip, "")
	if err != nil {
		return fmt.Errorf("release %s: %w", ip, err)
	}
	a.log.Info("released address", "ip", ip, "handle", handle)
	return nil
}

// ReleaseIfHeld releases ip only while handle holds it (the garbage collector's release: the
// address may have been released and handed to another workload since it looked). It reports
// whether it released anything.
func (a *Allocator) ReleaseIfHeld(ctx context.Context, ip netip.Addr, handle string) (bool, error) {
	_, err := a.releaseIP(ctx, ip, handle)
	if errors.Is(err, ErrNotAllocated) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("release %s of %s: %w", ip, handle, err)
	}
	return true, nil
}

// releaseIP removes ip's allocation (only if held by onlyHandle, when set) from its block, then
// from its handle, and returns the handle that held it.
func (a *Allocator) releaseIP(ctx context.Context, ip netip.Addr, onlyHandle string) (string, error) {
	if !ip.IsValid() {
		return "", fmt.Errorf("not an IP address")
	}
	ip = ip.Unmap() // blocks hold IPv4 addresses as such

	c, err := a.blockOf(ctx, ip)
	if err != nil {
		return "", err
	}
	want, _ := ordinalOf(c, ip)
	var handle string
	removed, err := a.releaseInBlock(ctx, c, func(o int, al v1.Allocation) bool {
		if o == want && (onlyHandle == "" || al.Handle == onlyHandle) {
			handle = al.Handle
			return true
		}
		return false
	})
	if err != nil {
		return "", err
	}
	if len(removed) == 0 {
		return "", ErrNotAllocated
	}
	if err := a.dropFromHandle(ctx, handle, c); err != nil {
		return handle, err
	}
	return handle, nil
}

// dropFromHandle takes one address in block c off the handle; a handle left with none is deleted.
func (a *Allocator) dropFromHandle(ctx context.Context, handle string, c netip.Prefix) error {
	name := names.HandleName(handle)
	for range a.cfg.MaxRetries {
		h, err := a.store.GetHandle(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get IPAMHandle %s: %w", name, err)
		}
		if h.Spec.Block[c.String()] == 0 {
			return nil // an address of the node's own block, which the handle does not list
		}
		nh := h.DeepCopy()
		if nh.Spec.Block[c.String()] > 1 {
			nh.Spec.Block[c.String()]--
		} else {
			delete(nh.Spec.Block, c.String())
		}
		if len(nh.Spec.Block) == 0 {
			err = a.store.DeleteHandle(ctx, name, h.ResourceVersion)
		} else {
			_, err = a.store.UpdateHandle(ctx, nh)
		}
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("update IPAMHandle %s: %w", name, err)
		}
	}
	return fmt.Errorf("update IPAMHandle %s: gave up after %d compare-and-swap conflicts", name, a.cfg.MaxRetries)
}

// blockOf finds the block holding ip: computed from its pool, else (a pool deleted under its
// blocks) by listing the blocks.
func (a *Allocator) blockOf(ctx context.Context, ip netip.Addr) (netip.Prefix, error) {
	pools, _, err := a.pools(ctx, false)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p, ok := poolFor(pools, ipfamily.HostPrefix(ip)); ok {
		c := blockContaining(ip, p.BlockSize)
		if _, err := a.store.GetBlock(ctx, names.BlockName(c)); err == nil {
			return c, nil
		}
	}
	blocks, err := a.listBlocks(ctx)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	for i := range blocks {
		if c, err := parseBlockCIDR(&blocks[i]); err == nil && c.Contains(ip) {
			return c, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no IPAMBlock contains it: %w", ErrNotAllocated)
}

// mergeBlocks brings the node's cached blocks up to date with a list that may be stale
// (KubeStore.ListsFromCache). Where the list and the cache disagree, the block is read again:
// a list from before this process's last write must not take an allocation out of the cache,
// because DEL finds the addresses of the node's own blocks there and nowhere else. ns.mu is held.
func (a *Allocator) mergeBlocks(ctx context.Context, ns *nodeState, blocks []v1.IPAMBlock) error {
	listed := map[netip.Prefix]string{} // affine block -> listed resourceVersion
	for i := range blocks {
		b := &blocks[i]
		if affinityNode(b) != ns.name {
			continue
		}
		if c, err := parseBlockCIDR(b); err == nil {
			listed[c] = b.ResourceVersion
		}
	}
	var stale []netip.Prefix
	for c, rv := range listed {
		if cb := ns.blocks[c]; cb == nil || cb.ResourceVersion != rv {
			stale = append(stale, c)
		}
	}
	for c := range ns.blocks {
		if _, ok := listed[c]; !ok {
			stale = append(stale, c)
		}
	}
	var errs []error
	for _, c := range stale {
		if err := a.refreshBlock(ctx, ns, c, names.BlockName(c)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReleaseEmptyBlocks gives back to the pool the node's blocks that have been empty for the
// affinity grace period: the block is deleted (only if still unchanged, so an allocation that
// just landed in it wins), then its affinity.
func (a *Allocator) ReleaseEmptyBlocks(ctx context.Context, node string) error {
	ns := a.node(node)
	if err := a.ensureLoaded(ctx, ns); err != nil {
		return fmt.Errorf("release empty blocks of %s: %w", node, err)
	}
	blocks, err := a.listBlocks(ctx)
	if err != nil {
		return fmt.Errorf("release empty blocks of %s: list IPAMBlocks: %w", node, err)
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if err := a.mergeBlocks(ctx, ns, blocks); err != nil {
		return fmt.Errorf("release empty blocks of %s: %w", node, err)
	}
	now := a.cfg.Now()
	var errs []error
	for c, b := range ns.blocks {
		if len(b.Spec.Allocations) > 0 {
			delete(ns.emptySince, c)
			continue
		}
		since, ok := ns.emptySince[c]
		if !ok {
			ns.emptySince[c] = now
			continue
		}
		if now.Sub(since) < a.cfg.AffinityGracePeriod {
			continue
		}
		err := a.store.DeleteBlock(ctx, b.Name, b.ResourceVersion)
		if apierrors.IsConflict(err) {
			// Written since we looked (an allocation, perhaps by a borrower): look again later.
			if err := a.refreshBlock(ctx, ns, c, b.Name); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete IPAMBlock %s: %w", b.Name, err))
			continue
		}
		delete(ns.blocks, c)
		delete(ns.emptySince, c)
		delete(ns.cursor, c)
		an := names.AffinityName(node, c)
		if err := a.store.DeleteAffinity(ctx, an, ""); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete BlockAffinity %s: %w", an, err))
			continue
		}
		a.log.Info("released empty block", "node", node, "block", c, "emptyFor", now.Sub(since).Round(1e6))
	}
	for c := range ns.emptySince {
		if _, ok := ns.blocks[c]; !ok {
			delete(ns.emptySince, c)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("release empty blocks of %s: %w", node, errors.Join(errs...))
	}
	return nil
}
