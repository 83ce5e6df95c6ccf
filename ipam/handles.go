package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Handle objects follow their allocation (doc.go). An address in one of the node's own blocks is
// taken by the block update alone; the IPAMHandle that lets DEL find it is written afterwards, in
// the background, so a pod's ADD waits for one API write, not two. Until the handle is written
// (or if the process dies first) the node's blocks still say which addresses the handle holds:
// Lookup and ReleaseHandle look there too, and Assign finds the handle's address there before it
// allocates. A borrowed address lives in another node's block, where none of that looks, so its
// handle is still written before the block.

// handleWriteTimeout bounds one background handle write with its retries.
const handleWriteTimeout = 30 * time.Second

// handleWrite is one background handle write; done closes when it has finished, err then holds
// its outcome.
type handleWrite struct {
	done chan struct{}
	err  error
}

// recordHandleLater writes r's handle, listing block, in the background. Writes for one handle
// happen in order.
func (a *Allocator) recordHandleLater(r Request, block netip.Prefix) {
	w := &handleWrite{done: make(chan struct{})}
	a.hmu.Lock()
	prev := a.pendingHandles[r.Handle]
	a.pendingHandles[r.Handle] = w
	a.hmu.Unlock()
	a.handleWrites.Add(1)
	go func() {
		defer a.handleWrites.Done()
		if prev != nil {
			<-prev.done
		}
		ctx, cancel := context.WithTimeout(context.Background(), handleWriteTimeout)
		defer cancel()
		var err error
		for attempt := range 5 {
			backoff(ctx, attempt*4)
			if err = a.recordHandle(ctx, r, block); err == nil || ctx.Err() != nil {
				break
			}
		}
		if err != nil {
			a.log.Error("IPAMHandle not written; DEL still finds the address in the node's block, and the garbage collector writes the handle again",
				"handle", r.Handle, "block", block, "err", err)
		}
		w.err = err
		a.hmu.Lock()
		if a.pendingHandles[r.Handle] == w {
			delete(a.pendingHandles, r.Handle)
		}
		a.hmu.Unlock()
		close(w.done)
	}()
}

// waitHandle waits for the background write of handle, if one is in flight, and returns its
// error.
func (a *Allocator) waitHandle(ctx context.Context, handle string) error {
	a.hmu.Lock()
	w := a.pendingHandles[handle]
	a.hmu.Unlock()
	if w == nil {
		return nil
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return fmt.Errorf("wait for IPAMHandle %s: %w", names.HandleName(handle), ctx.Err())
	}
}

// Flush waits until every background handle write has finished: tabby-node calls it before it
// exits, so a clean shutdown leaves every allocation with its handle.
func (a *Allocator) Flush(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		a.handleWrites.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("IPAMHandle writes still in flight: %w", ctx.Err())
	}
}

// RecordHandle makes the IPAMHandle of handle exist and list block, annotated with the node that
// allocated in it: what the garbage collector restores for a live allocation whose handle object
// is missing.
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
// ReleaseHandle also find addresses whose handle object is not written (yet).
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
	a.mu.Lock()
	nodes := make([]*nodeState, 0, len(a.nodes))
	for _, ns := range a.nodes {
		nodes = append(nodes, ns)
	}
	a.mu.Unlock()
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
			al := b.Spec.Allocations[strconv.Itoa(o)]
			out = append(out, Assignment{
				IP: addrAt(c, o), Block: c, Pool: p.Name, IPIPMode: p.IPIPMode,
				Borrowed: al.Node != "" && al.Node != affinityNode(b), Node: al.Node,
			})
		}
	}
	return out, nil
}
