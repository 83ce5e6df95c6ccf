package gc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

// A deleted node's IPAM (Calico's kube-controllers do this; tabby has no controller): its pods'
// addresses, its tunnel addresses, its blocks and affinities, its handles. No node of it is left to
// collect them, so one of the live nodes does: the ready tabby node (one whose tabby-node
// recorded its BGP address, so not a node tabby does not run on, and whose kubelet does not
// report it NotReady, so not one that may be down) whose name sorts first. Every node reaches the
// same choice from the same Node list, without a lease; two nodes acting at once (a Node list
// that differs for a moment) is harmless, as every write is a compare-and-swap.

// runsTabby: the node's tabby-node recorded its BGP address, of either family (an IPv6-only node
// has no IPv4 one).
func runsTabby(n model.Node) bool {
	return slices.ContainsFunc(ipfamily.All, func(f ipfamily.Family) bool { return n.BGPAddress.Get(f).IsValid() })
}

// leader tells whether this collector acts for the whole cluster on nodes this round.
func (c *Collector) leader(live []string) bool {
	if c.cfg.Node == "" {
		return true // the CLI: an operator asked for it
	}
	return len(live) > 0 && live[0] == c.cfg.Node
}

// collectDeletedNodes releases the IPAM of nodes whose Node object has been gone for the grace
// period (and is still gone at a second look), and deletes blocks that lost their affinity that
// way once they have stayed empty for the grace period.
func (c *Collector) collectDeletedNodes(ctx context.Context, res *Result) error {
	nodes, err := c.lists.ListNodes(ctx)
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	candidates := make([]string, 0, len(nodes))
	liveSet := map[string]bool{}
	for _, n := range nodes {
		liveSet[n.Name] = true
		if runsTabby(n) && !n.NotReady {
			candidates = append(candidates, n.Name)
		}
	}
	sort.Strings(candidates)
	if !c.leader(candidates) {
		clear(c.goneSince)
		clear(c.unaffineSince)
		return nil
	}
	blocks, err := c.lists.ListBlocks(ctx)
	if err != nil {
		return fmt.Errorf("list IPAMBlocks: %w", err)
	}
	affs, err := c.lists.ListAffinities(ctx)
	if err != nil {
		return fmt.Errorf("list BlockAffinities: %w", err)
	}
	handles, err := c.lists.ListHandles(ctx)
	if err != nil {
		return fmt.Errorf("list IPAMHandles: %w", err)
	}
	gone := map[string]bool{}
	note := func(n string) {
		if n != "" && !liveSet[n] {
			gone[n] = true
		}
	}
	emptyUnaffine := map[string]bool{}
	for i := range blocks {
		b := &blocks[i]
		note(blockNode(b))
		for _, al := range b.Spec.Allocations {
			note(allocNode(b, al))
			if _, n, ok := ipam.TunnelOf(al.Handle); ok {
				note(n)
			}
		}
		if b.Spec.Affinity == "" && len(b.Spec.Allocations) == 0 {
			emptyUnaffine[b.Name] = true
		}
	}
	for _, a := range affs {
		note(a.Spec.Node)
	}
	for _, h := range handles {
		note(h.Annotations[ipam.AnnotationHandleNode])
	}

	now := c.cfg.Now()
	for n := range c.goneSince {
		if !gone[n] {
			delete(c.goneSince, n)
		}
	}
	var errs []error
	for _, n := range sortedKeys(gone) {
		first, ok := c.goneSince[n]
		if !ok {
			c.goneSince[n] = now
			c.log.Info("node deleted: its IPAM will be released after the grace period", "deletedNode", n, "grace", c.cfg.GracePeriod)
		}
		if !ok || now.Sub(first) < c.cfg.GracePeriod {
			res.Pending++
			continue
		}
		// Second look: a Node re-created under the same name (a rejoin) keeps everything.
		if _, err := c.store.GetNode(ctx, n); err == nil {
			delete(c.goneSince, n)
			continue
		} else if !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("get node %s: %w", n, err))
			continue
		}
		if err := c.releaseNode(ctx, n, res); err != nil {
			errs = append(errs, fmt.Errorf("release IPAM of deleted node %s: %w", n, err))
		}
	}

	for name := range c.unaffineSince {
		if !emptyUnaffine[name] {
			delete(c.unaffineSince, name)
		}
	}
	for _, name := range sortedKeys(emptyUnaffine) {
		first, ok := c.unaffineSince[name]
		if !ok {
			c.unaffineSince[name] = now
		}
		if !ok || now.Sub(first) < c.cfg.GracePeriod {
			res.Pending++
			continue
		}
		if err := c.deleteEmptyUnaffine(ctx, name, res); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(c.unaffineSince, name)
	}
	return errors.Join(errs...)
}

// releaseNode does the release of deleted node n, each step on fresh data: (1) its allocations
// whose pods are gone, and its tunnel addresses (IPIP, VXLAN of each family); (2) its blocks:
// deleted when empty, else made unaffine (they keep the live pods' addresses); then their
// BlockAffinities; (3) its handles that hold nothing. Whatever a lost compare-and-swap or a live pod leaves is looked at next round.
func (c *Collector) releaseNode(ctx context.Context, n string, res *Result) error {
	blocks, err := c.store.ListBlocks(ctx)
	if err != nil {
		return fmt.Errorf("list IPAMBlocks: %w", err)
	}
	var errs []error
	tunnel := func(handle string) bool { _, node, ok := ipam.TunnelOf(handle); return ok && node == n }
	for i := range blocks {
		b := &blocks[i]
		cidr, err := ipam.BlockCIDR(b)
		if err != nil {
			continue
		}
		for _, k := range sortedKeys(b.Spec.Allocations) {
			al := b.Spec.Allocations[k]
			o, err := ipam.ParseOrdinal(cidr, k)
			if err != nil || allocNode(b, al) != n && !tunnel(al.Handle) {
				continue
			}
			ip := ipam.AddrAt(cidr, o)
			hasPod := al.Namespace != "" && al.Pod != ""
			if !hasPod && !tunnel(al.Handle) {
				continue // not a pod's and not a tunnel's: nothing tells us it is unused
			}
			if hasPod {
				p, err := c.store.GetPod(ctx, al.Namespace, al.Pod)
				if err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("get pod %s/%s: %w", al.Namespace, al.Pod, err))
					continue
				}
				if err == nil && live(p, ip, n) {
					continue // never a live pod's address, even on a deleted node
				}
			}
			released, err := c.alloc.ReleaseIfHeld(ctx, ip, al.Handle)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if released {
				c.log.Info("released address of a deleted node", "deletedNode", n, "ip", ip, "handle", al.Handle, "pod", al.Namespace+"/"+al.Pod)
				res.ReleasedIPs = append(res.ReleasedIPs, ip)
			}
		}
	}

	if blocks, err = c.store.ListBlocks(ctx); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list IPAMBlocks: %w", err))...)
	}
	held := map[string]bool{}
	stillAffine := map[string]bool{} // block CIDRs still affine to n (a lost compare-and-swap)
	for i := range blocks {
		b := &blocks[i]
		for _, al := range b.Spec.Allocations {
			held[al.Handle] = true
		}
		if blockNode(b) != n {
			continue
		}
		cidr, err := ipam.BlockCIDR(b)
		if err != nil {
			continue
		}
		if err := c.releaseBlock(ctx, n, b, cidr, res); err != nil {
			stillAffine[b.Spec.CIDR] = true
			errs = append(errs, err)
		}
	}

	affs, err := c.store.ListAffinities(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list BlockAffinities: %w", err))...)
	}
	for _, a := range affs {
		if a.Spec.Node != n || stillAffine[a.Spec.CIDR] {
			continue
		}
		if err := c.store.DeleteAffinity(ctx, a.Name, a.ResourceVersion); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete BlockAffinity %s: %w", a.Name, err))
			continue
		}
		c.log.Info("deleted affinity of a deleted node", "deletedNode", n, "affinity", a.Name)
	}

	handles, err := c.store.ListHandles(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list IPAMHandles: %w", err))...)
	}
	for _, h := range handles {
		if held[h.Spec.HandleID] || (h.Annotations[ipam.AnnotationHandleNode] != n && !tunnel(h.Spec.HandleID)) {
			continue
		}
		// Only the version we looked at: nobody should write a deleted node's handle, but if
		// someone did, it is looked at again next round.
		if err := c.store.DeleteHandle(ctx, h.Name, h.ResourceVersion); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete IPAMHandle %s: %w", h.Name, err))
			continue
		}
		c.log.Info("deleted handle of a deleted node", "deletedNode", n, "handle", h.Spec.HandleID)
		res.DeletedHandles = append(res.DeletedHandles, h.Spec.HandleID)
	}
	return errors.Join(errs...)
}

// releaseBlock deletes deleted node n's block when it is empty, else takes its affinity away (the
// live pods in it keep their addresses; their nodes advertise them as borrowed /32s). Either
// write is a compare-and-swap on the version just read, so an allocation landing in between
// (a borrower's) is never lost.
func (c *Collector) releaseBlock(ctx context.Context, n string, b *v1.IPAMBlock, cidr netip.Prefix, res *Result) error {
	if len(b.Spec.Allocations) == 0 {
		err := c.store.DeleteBlock(ctx, b.Name, b.ResourceVersion)
		if apierrors.IsConflict(err) {
			return fmt.Errorf("delete IPAMBlock %s: changed since read, next round", b.Name)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete IPAMBlock %s: %w", b.Name, err)
		}
		c.log.Info("released block of a deleted node", "deletedNode", n, "block", cidr)
		res.ReleasedBlocks = append(res.ReleasedBlocks, cidr)
		return nil
	}
	nb := b.DeepCopy()
	nb.Spec.Affinity = ""
	_, err := c.store.UpdateBlock(ctx, nb)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("update IPAMBlock %s: changed since read, next round", b.Name)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("take affinity of deleted node %s off IPAMBlock %s: %w", n, b.Name, err)
	}
	c.log.Info("block of a deleted node still holds live pods' addresses: affinity removed", "deletedNode", n, "block", cidr, "allocations", len(b.Spec.Allocations))
	res.UnaffinedBlocks = append(res.UnaffinedBlocks, cidr)
	return nil
}

// deleteEmptyUnaffine deletes a block without affinity that stayed empty (the last live pod of a
// deleted node's block went), if it is still so at a fresh read.
func (c *Collector) deleteEmptyUnaffine(ctx context.Context, name string, res *Result) error {
	b, err := c.store.GetBlock(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get IPAMBlock %s: %w", name, err)
	}
	if b.Spec.Affinity != "" || len(b.Spec.Allocations) > 0 {
		return nil
	}
	err = c.store.DeleteBlock(ctx, name, b.ResourceVersion)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or a borrower's allocation landed: it is looked at again
	}
	if err != nil {
		return fmt.Errorf("delete IPAMBlock %s: %w", name, err)
	}
	cidr, _ := ipam.BlockCIDR(b)
	c.log.Info("released empty block without affinity", "block", b.Spec.CIDR)
	res.ReleasedBlocks = append(res.ReleasedBlocks, cidr)
	return nil
}

// blockNode is the node of a "host:<node>" affinity, or "".
func blockNode(b *v1.IPAMBlock) string {
	if len(b.Spec.Affinity) > len(v1.AffinityPrefixHost) && b.Spec.Affinity[:len(v1.AffinityPrefixHost)] == v1.AffinityPrefixHost {
		return b.Spec.Affinity[len(v1.AffinityPrefixHost):]
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
