package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// load is what runs beside the probe: pods replaced, or nodes joining and leaving.
type load interface {
	run(ctx context.Context)
	perSecond() int   // asked
	completed() int64 // operations done so far
	err() error
}

// tally counts a load's operations and keeps its first failure. A failed operation now and then
// is expected on a loaded machine (a lost reply); more than one in ten fails the run.
type tally struct {
	done     atomic.Int64
	failures atomic.Int64
	firstErr atomic.Value
}

func (t *tally) note(err error) {
	if err != nil {
		t.failures.Add(1)
		t.firstErr.CompareAndSwap(nil, err)
		return
	}
	t.done.Add(1)
}

// err names the operations ("replacements").
func (t *tally) err(what string) error {
	if e, ok := t.firstErr.Load().(error); ok && t.failures.Load()*10 > t.done.Load() {
		return fmt.Errorf("%d %s failed, the first: %w", t.failures.Load(), what, e)
	}
	return nil
}

// churn replaces pods across the simulated nodes at rate per second, as a cluster's deployments
// do: each replacement creates a pod and allocates its address in its node's block (the CNI
// ADD's write), then releases the node's oldest pod's address and deletes that pod. That is two
// IPAMBlock updates and a pod create and delete per replacement; blocksOnly leaves the Pod
// objects alone, the churn as IPAM writes it (two IPAMBlock updates), which halves what the API
// server takes per replacement.
type churn struct {
	w          *world
	rate       int
	blocksOnly bool
	tally
}

// run churns until ctx ends, with enough writers that the API server, not the bench, sets the
// pace when it cannot keep up (the achieved rate is reported).
func (c *churn) run(ctx context.Context) {
	work := make(chan int, 4*c.rate)
	var wg sync.WaitGroup
	for range min(64, max(4, c.rate/2)) {
		wg.Go(func() {
			for i := range work {
				err := c.replace(ctx, c.w.nodes[i%len(c.w.nodes)])
				if err != nil && ctx.Err() != nil {
					return
				}
				c.note(err)
			}
		})
	}
	t := time.NewTicker(time.Second / time.Duration(c.rate))
	defer func() { t.Stop(); close(work); wg.Wait() }()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			select {
			case work <- i:
			default: // the writers are behind: this tick is skipped, and the achieved rate says so
			}
		}
	}
}

func (c *churn) perSecond() int   { return c.rate }
func (c *churn) completed() int64 { return c.done.Load() }

func (c *churn) replace(ctx context.Context, sn *simNode) (err error) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	defer func() {
		// A write whose reply was lost (a timeout on a loaded machine) may have landed: the
		// next replacement starts from the block as it is.
		if err != nil && ctx.Err() == nil {
			if b, gerr := c.w.client.IPAMBlocks().Get(ctx, sn.obj.Name); gerr == nil {
				sn.obj = b
			}
		}
	}()
	p := sn.newPod()
	p.noObject = c.blocksOnly
	if !p.noObject {
		if err := c.w.createPod(ctx, sn, p); err != nil {
			return err
		}
	}
	b := sn.obj.DeepCopy()
	b.Spec.Allocations[strconv.Itoa(p.ordinal)] = sn.allocation(p)
	got, err := c.w.client.IPAMBlocks().Update(ctx, b)
	if err != nil {
		return fmt.Errorf("allocate in %s: %w", b.Name, err)
	}
	sn.obj = got
	sn.live = append(sn.live, p)
	old := sn.live[0]
	sn.live = sn.live[1:]
	b = sn.obj.DeepCopy()
	delete(b.Spec.Allocations, strconv.Itoa(old.ordinal))
	if got, err = c.w.client.IPAMBlocks().Update(ctx, b); err != nil {
		return fmt.Errorf("release in %s: %w", b.Name, err)
	}
	sn.obj = got
	// A churn of IPAMBlock updates alone leaves Pod objects as they are; a later full churn
	// skips the pods such a churn made no object for.
	if c.blocksOnly || old.noObject {
		return nil
	}
	zero := int64(0)
	if err := c.w.kube.CoreV1().Pods(old.ns).Delete(ctx, old.name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return fmt.Errorf("delete pod %s/%s: %w", old.ns, old.name, err)
	}
	return nil
}

// err: a lost reply is retried from the block as it is.
func (c *churn) err() error { return c.tally.err("replacements") }

// nodeChurn has empty nodes join and leave the cluster, rate of each per second, as an
// autoscaler scales a node group out and in: a join is the Node (registered with its status,
// as a kubelet does), its block's affinity and the block; a leave the block, the affinity and
// the Node. It cycles through the world's spare nodes, each joining a rack of the simulated
// cluster, whose BGPPeers then select it. The cluster is as before when it ends.
type nodeChurn struct {
	w     *world
	rate  int
	tally // joins and leaves
}

func (c *nodeChurn) perSecond() int   { return c.rate }
func (c *nodeChurn) completed() int64 { return c.done.Load() / 2 }

func (c *nodeChurn) run(ctx context.Context) {
	var joined []*simNode // oldest first
	free := slices.Clone(c.w.spare)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, sn := range joined {
			c.note(c.w.removeNode(cctx, sn))
		}
	}()
	t := time.NewTicker(time.Second / time.Duration(2*c.rate))
	defer t.Stop()
	for step := 0; ; step++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var err error
		if len(free) > 0 && (len(joined) == 0 || step%2 == 0) {
			sn := free[0]
			free = free[1:]
			// Listed as joined even when the join failed half way: its leave removes the rest.
			joined = append(joined, sn)
			err = c.w.addNode(ctx, sn, sn.index, rack(sn.index%spareNodes*nodesPerRack), 0)
		} else {
			sn := joined[0]
			joined = joined[1:]
			free = append(free, sn)
			err = c.w.removeNode(ctx, sn)
		}
		if ctx.Err() != nil {
			return
		}
		c.note(err)
	}
}

func (c *nodeChurn) err() error { return c.tally.err("joins or leaves") }
