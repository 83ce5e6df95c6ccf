// Package gc is tabby-node's IPAM garbage collector: it gives back addresses that no workload
// uses any more, the leftovers of crashes and of DELs that never came (see ipam/doc.go for the
// write order that makes every leftover recognisable).
//
// Each kind of leftover is collected only after it has been seen for the grace period and passed
// a second look at fresh data:
//   - an allocation whose pod no longer exists (looked up by the allocation's namespace/pod;
//     allocations without pod attributes, such as the tunnel addresses, are never released);
//   - a handle that holds no allocation (a crash between the handle write and the block write
//     of a borrowed address);
//   - a borrowed allocation whose handle object is missing (deleted by hand, or older
//     versions' crash between the block write and the handle write): released if its pod is
//     gone, otherwise the handle is written again (a live pod's address is never released).
//     An address of its node's own block needs no handle object (ipam.NeedsHandle);
//   - the IPAM of a deleted node (nodes.go), collected by one live node for the cluster: its
//     allocations whose pods are gone, its tunnel addresses, its handles, its empty blocks with
//     their affinities; a block still holding live pods' addresses loses its affinity, and is
//     deleted once it has stayed empty.
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
)

// Config tunes a Collector.
type Config struct {
	// Node limits the collector to allocations made by this node and handles created by it, and
	// releases the node's empty blocks; empty: the whole cluster (the CLI's use), no block release.
	// Deleted nodes' IPAM is collected by the collector whose Node sorts first among the ready
	// Nodes that run tabby-node (nodes.go), or by one without Node.
	Node string
	// GracePeriod a leftover must be seen for before it is collected (default 1 minute).
	GracePeriod time.Duration
	// Lists answers the lists of a round's first look; nil: the store. tabby-node hands its
	// informers' caches: a consistent list of every block, Node and handle from every node every
	// round is what a large cluster's API server and etcd cannot afford.
	Lists Lists
	// Now is the clock (tests); time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Lists are the reads of a round's first look. They may be stale (a cache): what they show is
// only a candidate, which the second look (always the store) confirms before anything is
// released.
type Lists interface {
	ListBlocks(ctx context.Context) ([]v1.IPAMBlock, error)
	ListAffinities(ctx context.Context) ([]v1.BlockAffinity, error)
	ListHandles(ctx context.Context) ([]v1.IPAMHandle, error)
	ListPods(ctx context.Context, node string) ([]ipam.Pod, error)
	ListNodes(ctx context.Context) ([]model.Node, error)
}

// Collector finds and releases leaked addresses and handles.
type Collector struct {
	store ipam.Store
	lists Lists
	alloc *ipam.Allocator
	cfg   Config
	log   *slog.Logger
	seen  map[leak]time.Time
	// First seen: deleted nodes (by name) and blocks without affinity that are empty (by name).
	goneSince, unaffineSince map[string]time.Time
}

// New returns a collector; alloc does the releases (so they take its locks and keep its cache).
func New(store ipam.Store, alloc *ipam.Allocator, cfg Config) *Collector {
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	lists := cfg.Lists
	if lists == nil {
		lists = store
	}
	return &Collector{store: store, lists: lists, alloc: alloc, cfg: cfg, log: log.With("component", "ipam-gc", "node", cfg.Node), seen: map[leak]time.Time{},
		goneSince: map[string]time.Time{}, unaffineSince: map[string]time.Time{}}
}

type kind int

const (
	podGone kind = iota
	orphanHandle
	missingHandle
)

func (k kind) String() string {
	return [...]string{"pod gone", "handle without allocation", "allocation without handle"}[k]
}

// leak is one candidate: an allocation (block, ordinal, handle) or a handle (name only).
type leak struct {
	kind    kind
	handle  string // handleID
	hname   string // handle object name (orphanHandle)
	block   netip.Prefix
	ordinal int
}

func (l leak) ip() netip.Addr { return ipam.AddrAt(l.block, l.ordinal) }

// Result says what a run did.
type Result struct {
	// ReleasedIPs are addresses released because their pod is gone (or their handle and pod).
	ReleasedIPs []netip.Addr
	// DeletedHandles are handles deleted because they held no allocation.
	DeletedHandles []string
	// RestoredHandles are handles written again for live allocations that had lost theirs.
	RestoredHandles []string
	// ReleasedBlocks are blocks of deleted nodes deleted (empty), UnaffinedBlocks those that lost
	// their affinity (still holding live pods' addresses).
	ReleasedBlocks, UnaffinedBlocks []netip.Prefix
	// Pending is how many candidates wait for their grace period.
	Pending int
}

// Run collects every interval until ctx ends.
func (c *Collector) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
			// The next round retries; the error is worth an operator's look, not a crash.
			c.log.Warn("IPAM garbage collection failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Collector) mine(node string) bool { return c.cfg.Node == "" || node == c.cfg.Node }

// live tells whether pod p is the workload an allocation of ip on node belongs to.
func live(p *ipam.Pod, ip netip.Addr, node string) bool {
	if p == nil {
		return false
	}
	if p.NodeName != "" && node != "" && p.NodeName != node {
		return false // a pod of that name, but elsewhere: a new incarnation
	}
	if len(p.IPs) == 0 {
		return true // not reported yet: assume ours
	}
	for _, a := range p.IPs {
		if a == ip {
			return true
		}
	}
	return false
}

// RunOnce looks for leftovers, collects those past their grace period, and (with a Node)
// releases the node's empty blocks.
func (c *Collector) RunOnce(ctx context.Context) (Result, error) {
	var res Result
	found, err := c.candidates(ctx)
	if err != nil {
		return res, err
	}
	now := c.cfg.Now()
	for l := range c.seen {
		if !found[l] {
			delete(c.seen, l)
		}
	}
	var due []leak
	for l := range found {
		first, ok := c.seen[l]
		if !ok {
			c.seen[l] = now
			res.Pending++
			continue
		}
		if now.Sub(first) < c.cfg.GracePeriod {
			res.Pending++
			continue
		}
		due = append(due, l)
	}
	sort.Slice(due, func(i, j int) bool { return due[i].handle+due[i].hname < due[j].handle+due[j].hname })
	var errs []error
	for _, l := range due {
		if err := c.collect(ctx, l, &res); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(c.seen, l)
	}
	if c.cfg.Node != "" {
		if err := c.alloc.ReleaseEmptyBlocks(ctx, c.cfg.Node); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.collectDeletedNodes(ctx, &res); err != nil {
		errs = append(errs, err)
	}
	if n := len(res.ReleasedIPs) + len(res.DeletedHandles) + len(res.RestoredHandles) + len(res.ReleasedBlocks) + len(res.UnaffinedBlocks); n > 0 {
		c.log.Info("IPAM garbage collection", "releasedIPs", res.ReleasedIPs, "deletedHandles", res.DeletedHandles, "restoredHandles", res.RestoredHandles,
			"releasedBlocks", res.ReleasedBlocks, "unaffinedBlocks", res.UnaffinedBlocks, "pending", res.Pending)
	}
	return res, errors.Join(errs...)
}

// candidates is the first look, from lists.
func (c *Collector) candidates(ctx context.Context) (map[leak]bool, error) {
	blocks, err := c.lists.ListBlocks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	handles, err := c.lists.ListHandles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list IPAMHandles: %w", err)
	}
	pods, err := c.lists.ListPods(ctx, c.cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	podByName := map[string]*ipam.Pod{}
	for i := range pods {
		podByName[pods[i].Namespace+"/"+pods[i].Name] = &pods[i]
	}
	handleByID := map[string]*v1.IPAMHandle{}
	for i := range handles {
		handleByID[handles[i].Spec.HandleID] = &handles[i]
	}
	held := map[string]bool{}
	found := map[leak]bool{}
	for i := range blocks {
		b := &blocks[i]
		cidr, err := ipam.BlockCIDR(b)
		if err != nil {
			continue
		}
		for k, al := range b.Spec.Allocations {
			held[al.Handle] = true
			o, err := ipam.ParseOrdinal(cidr, k)
			if err != nil {
				continue
			}
			node := allocNode(b, al)
			if !c.mine(node) {
				continue
			}
			l := leak{handle: al.Handle, block: cidr, ordinal: o}
			hasPod := al.Namespace != "" && al.Pod != ""
			if hasPod && !live(podByName[al.Namespace+"/"+al.Pod], l.ip(), node) {
				l.kind = podGone
				found[l] = true
				continue
			}
			if handleByID[al.Handle] == nil && ipam.NeedsHandle(b, al) {
				l.kind = missingHandle
				found[l] = true
			}
		}
	}
	for _, h := range handles {
		if held[h.Spec.HandleID] || !c.mine(h.Annotations[ipam.AnnotationHandleNode]) {
			continue
		}
		found[leak{kind: orphanHandle, handle: h.Spec.HandleID, hname: h.Name}] = true
	}
	return found, nil
}

func allocNode(b *v1.IPAMBlock, al v1.Allocation) string {
	if al.Node != "" {
		return al.Node
	}
	return blockNode(b)
}

// collect is the second look at fresh data, then the release.
func (c *Collector) collect(ctx context.Context, l leak, res *Result) error {
	switch l.kind {
	case orphanHandle:
		h, err := c.store.GetHandle(ctx, l.hname)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get IPAMHandle %s: %w", l.hname, err)
		}
		blocks, err := c.store.ListBlocks(ctx)
		if err != nil {
			return fmt.Errorf("list IPAMBlocks: %w", err)
		}
		for _, b := range blocks {
			for _, al := range b.Spec.Allocations {
				if al.Handle == l.handle {
					return nil // it got its allocation after all
				}
			}
		}
		// Only the version we looked at: a handle an Assign just pointed elsewhere survives.
		if err := c.store.DeleteHandle(ctx, l.hname, h.ResourceVersion); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete IPAMHandle %s: %w", l.hname, err)
		}
		c.log.Info("deleted handle without allocation", "handle", l.handle)
		res.DeletedHandles = append(res.DeletedHandles, l.handle)
		return nil

	case podGone, missingHandle:
		b, err := c.store.GetBlock(ctx, names.BlockName(l.block))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get IPAMBlock %s: %w", names.BlockName(l.block), err)
		}
		al, ok := b.Spec.Allocations[ipam.OrdinalKey(l.ordinal)]
		if !ok || al.Handle != l.handle {
			return nil // released or re-used since the first look
		}
		hasPod := al.Namespace != "" && al.Pod != ""
		podLive := !hasPod
		if hasPod {
			p, err := c.store.GetPod(ctx, al.Namespace, al.Pod)
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("get pod %s/%s: %w", al.Namespace, al.Pod, err)
			}
			if err == nil {
				podLive = live(p, l.ip(), allocNode(b, al))
			}
		}
		if podLive {
			if l.kind == podGone {
				return nil // back (the first look's list was stale)
			}
			return c.restoreHandle(ctx, l, allocNode(b, al), res)
		}
		released, err := c.alloc.ReleaseIfHeld(ctx, l.ip(), l.handle)
		if err != nil {
			return err
		}
		if released {
			c.log.Info("released leaked address", "ip", l.ip(), "handle", l.handle, "pod", al.Namespace+"/"+al.Pod, "reason", l.kind.String())
			res.ReleasedIPs = append(res.ReleasedIPs, l.ip())
		}
		return nil
	}
	return nil
}

// restoreHandle writes the handle of a live allocation again, so DEL can release it.
func (c *Collector) restoreHandle(ctx context.Context, l leak, node string, res *Result) error {
	h, err := c.store.GetHandle(ctx, names.HandleName(l.handle))
	if err == nil && h.Spec.Block[l.block.String()] > 0 {
		return nil // written meanwhile (the allocator writes handles after their blocks)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get IPAMHandle %s: %w", names.HandleName(l.handle), err)
	}
	if err := c.alloc.RecordHandle(ctx, l.handle, node, l.block); err != nil {
		return fmt.Errorf("restore IPAMHandle %s: %w", names.HandleName(l.handle), err)
	}
	c.log.Info("restored missing handle of a live allocation", "handle", l.handle, "ip", l.ip())
	res.RestoredHandles = append(res.RestoredHandles, l.handle)
	return nil
}
