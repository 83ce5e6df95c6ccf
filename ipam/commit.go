package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// Group commit of Assigns. A node's Assigns all write the same block (the node's current one),
// and each write is a compare-and-swap on the whole block, so they cannot go side by side. Taking
// turns costs one block update per Assign in series (a 10-pod burst waits for 10 updates).
// Instead, while one update for the node is in flight the other Assigns queue; when it returns,
// the committer takes every queued request, chooses their ordinals in memory, and writes them in
// ONE update per block. A lost compare-and-swap re-reads the block and retries the whole batch;
// each request gets its own result or error.
//
// Crash safety is as in doc.go: a batch is just several allocations in one update. Each handle
// is written after it (handles.go), except a borrowed address's, which is written before.

// assignOp is one Assign waiting for its node's committer.
type assignOp struct {
	ctx   context.Context
	r     Request
	pools []model.Pool

	attempt int   // lost compare-and-swaps so far
	lastErr error // the last of them

	done chan struct{}
	as   Assignment
	err  error
}

func (op *assignOp) finish(as Assignment, err error) {
	op.as, op.err = as, err
	close(op.done)
}

// blockWrite is one block update of a batch: the block as it will be written, and the requests
// whose allocations it holds.
type blockWrite struct {
	c        choice // the first request's choice: block, pool, borrowed
	obj      *v1.IPAMBlock
	next     int // where the next ordinal search in this block starts
	ops      []*assignOp
	ordinals []int
}

// commitAssign queues op for its node's committer, starting one if none runs, and waits for
// its result. It does not give up waiting when op.ctx ends: the committer answers every request
// it took (failing those whose context ended before their batch), so an Assign never returns
// while a block update holding its allocation may still be in flight.
func (a *Allocator) commitAssign(ctx context.Context, ns *nodeState, op *assignOp) (Assignment, error) {
	op.done = make(chan struct{})
	ns.qmu.Lock()
	ns.queue = append(ns.queue, op)
	start := !ns.committing
	ns.committing = true
	ns.qmu.Unlock()
	if start {
		go a.commitLoop(ns)
	}
	<-op.done
	return op.as, op.err
}

// commitLoop writes batches until the node's queue is empty.
func (a *Allocator) commitLoop(ns *nodeState) {
	for {
		ns.qmu.Lock()
		batch := ns.queue
		ns.queue = nil
		if len(batch) == 0 {
			ns.committing = false
			ns.qmu.Unlock()
			return
		}
		ns.qmu.Unlock()
		again := a.commitBatch(ns, batch)
		if len(again) > 0 {
			ns.qmu.Lock()
			ns.queue = append(again, ns.queue...)
			ns.qmu.Unlock()
		}
	}
}

// batchContext is the context of a batch's datastore calls: it carries the first request's
// values and ends when every request's context has ended (one caller giving up must not fail
// the others' shared write).
func batchContext(ops []*assignOp) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ops[0].ctx))
	var left atomic.Int32
	left.Store(int32(len(ops)))
	stops := make([]func() bool, 0, len(ops))
	for _, op := range ops {
		stops = append(stops, context.AfterFunc(op.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// commitBatch allocates for a batch of requests and returns those to run again (a lost
// compare-and-swap, or a request that needs a slow pick while others are pending); every other
// request is finished.
func (a *Allocator) commitBatch(ns *nodeState, batch []*assignOp) (again []*assignOp) {
	live := make([]*assignOp, 0, len(batch))
	wait := 0
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.finish(Assignment{}, err)
			continue
		}
		live = append(live, op)
		wait = max(wait, op.attempt)
	}
	if len(live) == 0 {
		return nil
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	backoff(ctx, wait)

	ns.mu.Lock()
	defer ns.mu.Unlock()

	retry := func(op *assignOp, err error) {
		op.attempt++
		op.lastErr = err
		if op.attempt >= a.cfg.MaxRetries {
			op.finish(Assignment{}, fmt.Errorf("gave up after %d compare-and-swap conflicts (last: %v)", a.cfg.MaxRetries, op.lastErr))
			return
		}
		again = append(again, op)
	}

	// Choose every request's address in memory.
	var writes []*blockWrite
	pending := map[netip.Prefix]*blockWrite{}
	for _, op := range live {
		if c, o, ok := ns.heldBy(op.r.Handle, op.r.family(), pending); ok {
			// The handle has its address already (a repeated Assign, or one whose first reply
			// never arrived): the same one again.
			op.finish(a.assignmentAt(ctx, op, c, o, false), nil)
			continue
		}
		c, ok := ns.pickAffineIn(op.pools, pending)
		if !ok {
			if len(writes) > 0 {
				// Claiming or borrowing lists (and may replace) the cached blocks: not while
				// this batch holds choices made from them. Next batch.
				again = append(again, op)
				continue
			}
			var err error
			if c, err = a.pick(ctx, ns, op.pools); err != nil {
				op.finish(Assignment{}, err)
				continue
			}
		}
		w := pending[c.block]
		if w == nil {
			w = &blockWrite{c: c, obj: c.obj.DeepCopy()}
			if w.obj.Spec.Allocations == nil {
				w.obj.Spec.Allocations = map[string]v1.Allocation{}
			}
			pending[c.block] = w
			writes = append(writes, w)
		}
		w.obj.Spec.Allocations[OrdinalKey(c.ordinal)] = v1.Allocation{Handle: op.r.Handle, Namespace: op.r.Namespace, Pod: op.r.Pod, Node: op.r.Node}
		w.next = (c.ordinal + 1) % blockLen(c.block)
		w.ops = append(w.ops, op)
		w.ordinals = append(w.ordinals, c.ordinal)
	}

	for _, w := range writes {
		if w.c.borrowed {
			a.recordHandlesFirst(ctx, w, retry)
			if len(w.ops) == 0 {
				continue
			}
		}
		nb, err := a.store.UpdateBlock(ctx, w.obj)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			if rerr := a.refreshBlock(ctx, ns, w.c.block, w.obj.Name); rerr != nil {
				// The retry works on the old copy and loses its compare-and-swap again.
				a.log.Warn("re-read block after a lost compare-and-swap", "block", w.c.block, "err", rerr)
			}
			for _, op := range w.ops {
				retry(op, err)
			}
			continue
		}
		if err != nil {
			// The update may have gone through all the same (a timeout): read the block again
			// so that the requests' clean-up (ReleaseHandle) finds what it holds.
			if !w.c.borrowed {
				if rerr := a.refreshBlock(ctx, ns, w.c.block, w.obj.Name); rerr != nil {
					a.log.Warn("re-read block after a failed update", "block", w.c.block, "err", rerr)
				}
			}
			for i, op := range w.ops {
				op.finish(Assignment{}, fmt.Errorf("allocate %s in IPAMBlock %s: %w", addrAt(w.c.block, w.ordinals[i]), w.obj.Name, err))
			}
			continue
		}
		c := w.c
		if !c.borrowed {
			ns.blocks[c.block] = nb
			ns.cursor[c.block] = w.next
		}
		delete(ns.emptySince, c.block)
		for i, op := range w.ops {
			as := a.assignmentAt(ctx, op, c.block, w.ordinals[i], c.borrowed)
			a.log.Debug("assigned", "handle", op.r.Handle, "ip", as.IP, "block", as.Block, "borrowed", as.Borrowed, "batch", len(w.ops))
			op.finish(as, nil)
		}
	}
	return again
}

// assignmentAt describes op's address: ordinal o of block c.
func (a *Allocator) assignmentAt(ctx context.Context, op *assignOp, c netip.Prefix, o int, borrowed bool) Assignment {
	as := Assignment{IP: addrAt(c, o), Block: c, Borrowed: borrowed, Node: op.r.Node}
	p, ok := poolFor(op.pools, c)
	if !ok {
		// An address held since before the pools changed: its own pool, if it still exists.
		all, _, _ := a.pools(ctx, false)
		p, _ = poolFor(all, c)
	}
	as.Pool, as.Overhead = p.Name, EncapOverhead(p)
	return as
}

// recordHandlesFirst writes the handle of every request in w (a borrowed block, which this node's
// cache does not hold) before the block is written, so DEL finds the address through its handle
// alone. A request whose handle cannot be written leaves the batch (its allocation is taken out
// of the block): retried on a conflict, failed otherwise.
func (a *Allocator) recordHandlesFirst(ctx context.Context, w *blockWrite, retry func(*assignOp, error)) {
	keep := 0
	for i, op := range w.ops {
		err := a.recordHandle(ctx, op.r, w.c.block)
		if err == nil {
			w.ops[keep], w.ordinals[keep] = op, w.ordinals[i]
			keep++
			continue
		}
		delete(w.obj.Spec.Allocations, OrdinalKey(w.ordinals[i]))
		if apierrors.IsConflict(err) {
			retry(op, err)
		} else {
			op.finish(Assignment{}, err)
		}
	}
	w.ops, w.ordinals = w.ops[:keep], w.ordinals[:keep]
}
