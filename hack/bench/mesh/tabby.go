package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
)

const rrClusterID = "244.0.0.1"

// topo is one cluster shape: how many route reflectors among the nodes (0: full mesh).
type topo struct {
	name string
	rrs  int
}

func (t topo) specs(nodes int) []lab.NodeSpec {
	specs := make([]lab.NodeSpec, nodes)
	for i := range specs {
		if i < t.rrs {
			specs[i] = lab.NodeSpec{Name: fmt.Sprintf("rr-%d", i+1), RouteReflectorClusterID: rrClusterID}
		} else {
			specs[i] = lab.NodeSpec{Name: fmt.Sprintf("node-%d", i+1-t.rrs)}
		}
	}
	return specs
}

// wantPeers is the set of sessions node i must have established.
func (t topo) wantPeers(nodes []*lab.Node, i int) []netip.Addr {
	var out []netip.Addr
	for j, n := range nodes {
		if j == i {
			continue
		}
		// Mesh: everyone. RR: reflectors peer with everyone, clients with reflectors only.
		if t.rrs == 0 || i < t.rrs || j < t.rrs {
			out = append(out, n.IP())
		}
	}
	return out
}

// cluster is a lab with its nodes and a route watch over their namespaces.
type cluster struct {
	lab   *lab.Lab
	topo  topo
	nodes []*lab.Node
	watch *benchutil.RouteWatch
	up    time.Duration // lab + nodes + every session established
}

// startCluster builds the lab for one topology and waits until every expected BGP session is up.
func startCluster(ctx context.Context, o options, t topo) (_ *cluster, err error) {
	start := time.Now()
	// The agents run as in production: the lab's e2e defaults (a GC every second, for tests that
	// wait on it) would inflate the resource figures.
	args := []string{"--ipam-gc-interval=1m", "--ipam-gc-grace=5m"}
	if o.profiles != "" {
		args = append(args, "--pprof")
	}
	l, err := lab.New(ctx, o.Lab(lab.Options{AgentArgs: args}))
	if err != nil {
		return nil, fmt.Errorf("start lab: %w", err)
	}
	c := &cluster{lab: l, topo: t}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if t.rrs > 0 {
		if err := l.UseRouteReflectors(ctx); err != nil {
			return c, err
		}
	}
	if c.nodes, err = l.AddNodes(ctx, t.specs(o.nodes)...); err != nil {
		return c, fmt.Errorf("add %d nodes: %w", o.nodes, err)
	}
	paths := map[string]string{}
	for _, n := range c.nodes {
		paths[n.Name] = lab.NetnsPath(n.NS)
	}
	if c.watch, err = benchutil.WatchRoutes(paths, v1.RouteProtocol, lab.PodCIDR); err != nil {
		return c, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.WaitPeers(ctx, 90*time.Second, t.wantPeers(c.nodes, i)...) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("BGP sessions: %w", err)
	}
	c.up = time.Since(start)
	return c, nil
}

// close removes the lab; it is the one cleanup path, also on failure and Ctrl-C.
func (c *cluster) close() error {
	if c == nil || c.lab == nil {
		return nil
	}
	if c.watch != nil {
		c.watch.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := c.lab.Close(ctx)
	c.lab = nil
	return err
}

// blockAt is the k-th benchmark block of a run: /26s from 10.244.<base>.0 upwards, inside the
// lab's pool and clear of anything IPAM would hand out first.
func blockAt(base, k int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("10.244.%d.%d/26", base+k/4, (k%4)*64))
}

// propagation is what one topology's run measured.
type propagation struct {
	last   []time.Duration // per block: datastore write → route in the last other node
	each   []time.Duration // per block and other node
	create []time.Duration // the IPAMBlock Create call alone
	// gone: per block, deleted one at a time: the delete → its route gone from the last other
	// node; goneEach the same per other node; del the IPAMBlock Delete call alone.
	gone, goneEach, del []time.Duration
	// cpuPerDelete: the CPU all agents used while the blocks went one at a time (each block's
	// IPAMBlock and BlockAffinity deleted, its route gone everywhere), per block.
	cpuPerDelete time.Duration
	withdraw     time.Duration // all blocks deleted → every route gone
	deletes      time.Duration // the IPAMBlock deletes, all at once, until the last returned
	// withdrawErr says which routes outlived their blocks; the figures above still stand.
	withdrawErr error
}

// measure claims blocks one at a time, each for the next node in turn, and waits until every
// other node's kernel routes it via the owner; deletes them one at a time and waits until
// every other node's route is gone; claims them all again and deletes them all at once.
func (c *cluster) measure(ctx context.Context, blocks, base int, profiles string) (propagation, error) {
	var res propagation
	owners := map[netip.Prefix]*lab.Node{}
	var ps []netip.Prefix
	for k := range blocks {
		owner := c.nodes[k%len(c.nodes)]
		b := blockAt(base, k)
		t0, took, err := benchutil.ClaimBlock(ctx, c.lab, owner.Name, b)
		owners[b], ps = owner, append(ps, b)
		if err != nil {
			return res, err
		}
		got, err := c.watch.Arrived(ctx, 10*time.Second, b, owner.IP(), othersThan(c.nodes, owner))
		if err != nil {
			return res, fmt.Errorf("block %s of %s: %w", b, owner.Name, err)
		}
		last := spread(got, t0, &res.each)
		res.last = append(res.last, last)
		res.create = append(res.create, took)
	}
	cpu0, err := benchutil.AgentsCPU(ctx, c.nodes)
	if err != nil {
		return res, err
	}
	if profiles != "" {
		// Long enough for the deletions, with room to spare; the idle tail costs the profile
		// nothing.
		wait := benchutil.ProfileAgents(ctx, c.nodes, profiles, strings.ReplaceAll(c.topo.name, " ", ""), time.Duration(len(ps))*100*time.Millisecond)
		defer func() {
			if err := wait(); err != nil {
				fmt.Fprintln(os.Stderr, "profiles:", err)
			}
		}()
	}
	for _, b := range ps {
		owner := owners[b]
		t0 := time.Now()
		if err := benchutil.DeleteBlock(ctx, c.lab, b); err != nil {
			return res, err
		}
		res.del = append(res.del, time.Since(t0))
		got, err := c.watch.Withdrawn(ctx, 10*time.Second, b, othersThan(c.nodes, owner))
		if err != nil {
			if ctx.Err() != nil {
				return res, err
			}
			res.withdrawErr = fmt.Errorf("block %s of %s deleted alone: %w", b, owner.Name, err)
			return res, nil
		}
		res.gone = append(res.gone, spread(got, t0, &res.goneEach))
		if err := benchutil.ReleaseBlock(ctx, c.lab, owner.Name, b); err != nil {
			return res, err
		}
	}
	cpu1, err := benchutil.AgentsCPU(ctx, c.nodes)
	if err != nil {
		return res, err
	}
	res.cpuPerDelete = (cpu1 - cpu0) / time.Duration(len(ps))
	// The same blocks again, all at once and not timed, for the bulk withdrawal.
	g, gctx := errgroup.WithContext(ctx)
	for _, b := range ps {
		g.Go(func() error {
			if _, _, err := benchutil.ClaimBlock(gctx, c.lab, owners[b].Name, b); err != nil {
				return err
			}
			_, err := c.watch.Arrived(gctx, 20*time.Second, b, owners[b].IP(), othersThan(c.nodes, owners[b]))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return res, fmt.Errorf("claim the blocks again: %w", err)
	}
	// The blocks go at once, as when nodes are drained (each owner's IPAM releases its own, in
	// parallel): one client deleting 50 blocks and 50 affinities in series would measure its own
	// round trips, not the withdrawal. The affinities go afterwards.
	start := time.Now()
	g, gctx = errgroup.WithContext(ctx)
	for _, b := range ps {
		g.Go(func() error { return benchutil.DeleteBlock(gctx, c.lab, b) })
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	res.deletes = time.Since(start)
	if err := c.watch.Gone(ctx, 10*time.Second, ps); err != nil {
		if ctx.Err() != nil {
			return res, err
		}
		res.withdrawErr = err
		return res, nil
	}
	res.withdraw = time.Since(start)
	for _, b := range ps {
		if err := benchutil.ReleaseBlock(ctx, c.lab, owners[b].Name, b); err != nil {
			return res, err
		}
	}
	return res, nil
}

// spread appends each node's delay after t0 to each and returns the largest.
func spread(at map[string]time.Time, t0 time.Time, each *[]time.Duration) time.Duration {
	var last time.Duration
	for _, t := range at {
		d := t.Sub(t0)
		*each = append(*each, d)
		last = max(last, d)
	}
	return last
}
