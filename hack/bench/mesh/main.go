// Command mesh benchmarks tabby at cluster level in the lab (hack/lab: a real kube-apiserver and
// etcd, one network namespace and one real tabby-node per node): how long a new block takes from
// its IPAMBlock appearing in the datastore to its route in every other node's kernel, in a
// 20-node full mesh and with 2 route reflectors + 18 clients; how long its deletion takes to
// remove that route everywhere, block by block and for all blocks at once; tabby-node's RSS and
// CPU at idle with 19 peers; and, for reference, BIRD2 daemons in the same namespaces doing the
// same from a static route added or removed. Everything it makes is removed at the end, on
// failure and on Ctrl-C. Run as root: go run -C hack ./bench/mesh
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tabbynet/tabby/hack/bench/benchutil"
)

type options struct {
	nodes    int
	blocks   int
	idle     time.Duration
	bird2    bool
	profiles string
	benchutil.LabFlags
}

func main() {
	var o options
	o.Register()
	flag.IntVar(&o.nodes, "nodes", 20, "nodes per cluster")
	flag.IntVar(&o.blocks, "blocks", 50, "blocks measured per topology")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "idle window for tabby-node's CPU")
	flag.BoolVar(&o.bird2, "bird2", true, "measure BIRD2 in the same namespaces")
	flag.StringVar(&o.profiles, "profiles", "", "write every agent's CPU profile while the blocks are deleted one at a time into this directory (<topology>-<node>.cpu)")
	flag.Parse()
	benchutil.Main("mesh", validate(o), func(ctx context.Context) error { return run(ctx, o, os.Stdout) })
}

func validate(o options) error {
	if err := benchutil.NeedRoot("bench"); err != nil {
		return err
	}
	switch {
	case o.nodes < 4 || o.nodes > 100:
		return fmt.Errorf("-nodes=%d: want 4..100", o.nodes)
	case o.blocks < 1 || o.blocks > 200:
		return fmt.Errorf("-blocks=%d: want 1..200", o.blocks)
	case o.idle < time.Second:
		return fmt.Errorf("-idle=%v: want at least 1s", o.idle)
	}
	return nil
}

// results is everything one run measured.
type results struct {
	mesh, rr     propagation
	meshUp, rrUp time.Duration
	usage        []benchutil.Usage
	bird2Mesh    *bird2Result
	bird2RR      *bird2Result
}

// run measures both topologies, one lab at a time, and prints the table.
func run(ctx context.Context, o options, out io.Writer) error {
	start := time.Now()
	var r results
	mesh := topo{name: "full mesh"}
	rr := topo{name: "2 RR + clients", rrs: 2}

	if err := phase(ctx, o, mesh, func(c *cluster) error {
		r.meshUp = c.up
		var err error
		if r.usage, err = benchutil.MeasureUsage(ctx, c.nodes, o.idle); err != nil {
			return fmt.Errorf("idle usage: %w", err)
		}
		if r.mesh, err = c.measure(ctx, o.blocks, 100, o.profiles); err != nil {
			return err
		}
		r.bird2Mesh, err = bird2Phase(ctx, o, c)
		return err
	}); err != nil {
		return err
	}
	if err := phase(ctx, o, rr, func(c *cluster) error {
		r.rrUp = c.up
		var err error
		if r.rr, err = c.measure(ctx, o.blocks, 150, o.profiles); err != nil {
			return err
		}
		r.bird2RR, err = bird2Phase(ctx, o, c)
		return err
	}); err != nil {
		return err
	}
	report(out, o, r, time.Since(start))
	var errs []error
	for _, p := range []struct {
		name string
		res  propagation
	}{{"full mesh", r.mesh}, {"route reflectors", r.rr}} {
		if p.res.withdrawErr != nil {
			errs = append(errs, fmt.Errorf("%s: routes outlived their deleted blocks: %w", p.name, p.res.withdrawErr))
		}
	}
	return errors.Join(errs...)
}

// bird2Result is BIRD2's run in one topology; err says why it was not measured.
type bird2Result struct {
	res propagation
	up  time.Duration
	err error
}

// bird2Phase runs BIRD2 in the cluster's namespaces once tabby-node is stopped (one port 179
// per node). A BIRD2 failure is reported in the table, not fatal, unless the run was cancelled.
func bird2Phase(ctx context.Context, o options, c *cluster) (*bird2Result, error) {
	if !o.bird2 {
		return nil, nil
	}
	res, up, err := bird2Run(ctx, c, o.blocks)
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	return &bird2Result{res: res, up: up, err: err}, nil
}

// phase runs fn on a fresh cluster and always removes the cluster afterwards.
func phase(ctx context.Context, o options, t topo, fn func(*cluster) error) (err error) {
	c, err := startCluster(ctx, o, t)
	defer func() {
		if cerr := c.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("%s: remove lab: %w", t.name, cerr))
		}
	}()
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	if err := fn(c); err != nil {
		o.HoldFailed(ctx, c.lab, fmt.Sprintf("%s failed: %v", t.name, err))
		return fmt.Errorf("%s: %w", t.name, err)
	}
	return nil
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func report(w io.Writer, o options, r results, took time.Duration) {
	peers := o.nodes - 1
	fmt.Fprintf(w, "How it was measured:\n")
	fmt.Fprintf(w, "  cluster: hack/lab, real kube-apiserver+etcd, %d node namespaces on one bridge, one tabby-node each, no pods\n", o.nodes)
	fmt.Fprintf(w, "  tabby propagation: t0 = just before the IPAMBlock Create (affinity host:<node>; BlockAffinity pending before, confirmed after, as IPAM does);\n")
	fmt.Fprintf(w, "    end = RTM_NEWROUTE '<block> via <owner> proto 201' in the main table of the LAST of the %d other nodes (netlink route subscription per netns);\n", peers)
	fmt.Fprintf(w, "    %d blocks one at a time, owners round robin; so it includes the API write, the watch to %d agents, BGP and the kernel write\n", o.blocks, o.nodes)
	fmt.Fprintf(w, "  withdrawal per block: the same %d blocks deleted one at a time; t0 = just before the IPAMBlock Delete, end = RTM_DELROUTE of its route\n", o.blocks)
	fmt.Fprintf(w, "    in the LAST of the %d other nodes; so it includes the API write, the watch, the owner's withdrawal over BGP and the kernel write\n", peers)
	fmt.Fprintf(w, "  withdrawal of all: the blocks claimed again, then all %d deleted at once (in parallel), until no node holds any of their routes\n", o.blocks)
	fmt.Fprintf(w, "    (the deletes' own time in brackets)\n")
	fmt.Fprintf(w, "  idle usage: every tabby-node of the mesh, /proc/<pid>/status VmRSS and utime+stime over %v, %d established sessions each\n", o.idle, peers)
	if o.bird2 {
		fmt.Fprintf(w, "  BIRD2 (Debian bird 2.0): same namespaces and topology after tabby-node stopped (iBGP mesh, or rr client + rr cluster id), connect delay/retry 1 s, kernel { export all; learn };\n")
		fmt.Fprintf(w, "    t0 = just before `birdc configure` with one more static blackhole at the owner; end = route via owner (proto bird) in the last other kernel.\n")
		fmt.Fprintf(w, "    Withdrawal per static: one static removed per `birdc configure` at its owner, t0 just before it, end = its route gone from the last\n")
		fmt.Fprintf(w, "    other kernel; of all: the statics added again, then every daemon reconfigured without them, one after the other, until none is left.\n")
		fmt.Fprintf(w, "    BIRD2 has no datastore step: tabby's figure also pays the API write and watch, BIRD2's the config reload\n")
	}
	fmt.Fprintf(w, "\n%-50s %12s %12s %12s  %s\n", "figure", "p50/median", "p99/max", "target", "")
	row := func(name, a, b, target, v string) {
		fmt.Fprintf(w, "%-50s %12s %12s %12s  %s\n", name, a, b, target, v)
	}
	prop := func(label string, p propagation) {
		p99 := benchutil.Pct(p.last, 99)
		row(label+": block → last node", benchutil.Ms(benchutil.Pct(p.last, 50)), benchutil.Ms(p99), "p99 < 250 ms", benchutil.Verdict(p99 < 250*time.Millisecond))
		row(label+": block → each node", benchutil.Ms(benchutil.Pct(p.each, 50)), benchutil.Ms(benchutil.Pct(p.each, 99)), "", "")
		row(label+": IPAMBlock Create call", benchutil.Ms(benchutil.Pct(p.create, 50)), benchutil.Ms(benchutil.Pct(p.create, 99)), "", "")
		if len(p.gone) > 0 {
			row(label+": block deleted → gone, last node", benchutil.Ms(benchutil.Pct(p.gone, 50)), benchutil.Ms(benchutil.Pct(p.gone, 99)), "", "")
			row(label+": block deleted → gone, each node", benchutil.Ms(benchutil.Pct(p.goneEach, 50)), benchutil.Ms(benchutil.Pct(p.goneEach, 99)), "", "")
			row(label+": IPAMBlock Delete call", benchutil.Ms(benchutil.Pct(p.del, 50)), benchutil.Ms(benchutil.Pct(p.del, 99)), "", "")
			row(label+": agents' CPU per block deleted, all", benchutil.Ms(p.cpuPerDelete), "", "", "IPAMBlock and BlockAffinity deleted, the route gone")
		}
		if p.withdrawErr != nil {
			row(label+": withdrawal of all blocks", "-", "-", "all gone", "FAILED (below)")
		} else {
			row(label+": withdrawal of all blocks", fmt.Sprintf("%s (%s)", benchutil.Ms(p.withdraw), benchutil.Ms(p.deletes)), "", "all gone", "ok")
		}
	}
	prop(fmt.Sprintf("tabby mesh %d", o.nodes), r.mesh)
	prop(fmt.Sprintf("tabby 2 RR + %d", o.nodes-2), r.rr)
	var rss, anon []int
	var cpu []float64
	maxNode, maxRSS := "", 0
	for _, u := range r.usage {
		rss = append(rss, u.RSSKB)
		anon = append(anon, u.AnonKB)
		cpu = append(cpu, u.CPU)
		if u.RSSKB > maxRSS {
			maxNode, maxRSS = u.Node, u.RSSKB
		}
	}
	if len(rss) > 0 {
		rm, rx := benchutil.MedianMax(rss)
		am, ax := benchutil.MedianMax(anon)
		cm, cx := benchutil.MedianMax(cpu)
		row(fmt.Sprintf("tabby-node RSS, %d peers (%d agents)", peers, len(rss)), fmt.Sprintf("%.1f MB", float64(rm)/1024), fmt.Sprintf("%.1f MB (%s)", float64(rx)/1024, maxNode), "< 60 MB", benchutil.Verdict(float64(rx)/1024 < 60))
		row("  of which the agent's own (RssAnon)", fmt.Sprintf("%.1f MB", float64(am)/1024), fmt.Sprintf("%.1f MB", float64(ax)/1024), "", "the rest: the binary's pages, shared by every agent on a host")
		row(fmt.Sprintf("tabby-node CPU idle, %d peers", peers), fmt.Sprintf("%.2f %%", cm), fmt.Sprintf("%.2f %%", cx), "< 1 %", benchutil.Verdict(cx < 1))
	}
	birdRows := func(label string, b *bird2Result, tabby propagation) {
		switch {
		case b == nil:
		case b.err != nil:
			row("BIRD2 "+label, "-", "-", "", "not measured: "+b.err.Error())
		default:
			row("BIRD2 "+label+": static → last node", benchutil.Ms(benchutil.Pct(b.res.last, 50)), benchutil.Ms(benchutil.Pct(b.res.last, 99)), "(reference)", "")
			row("BIRD2 "+label+": static → each node", benchutil.Ms(benchutil.Pct(b.res.each, 50)), benchutil.Ms(benchutil.Pct(b.res.each, 99)), "", "")
			row("BIRD2 "+label+": static removed → gone, last", benchutil.Ms(benchutil.Pct(b.res.gone, 50)), benchutil.Ms(benchutil.Pct(b.res.gone, 99)), "", "")
			row("BIRD2 "+label+": withdrawal of all", benchutil.Ms(b.res.withdraw), "", "", "")
			times := func(a, b time.Duration) string { return fmt.Sprintf("%.1f×", ratio(a, b)) }
			row("tabby/BIRD2 "+label+", last node", times(benchutil.Pct(tabby.last, 50), benchutil.Pct(b.res.last, 50)),
				times(benchutil.Pct(tabby.last, 99), benchutil.Pct(b.res.last, 99)), "", "")
			if tabby.withdrawErr == nil {
				row("tabby/BIRD2 "+label+", withdrawal per block", times(benchutil.Pct(tabby.gone, 50), benchutil.Pct(b.res.gone, 50)),
					times(benchutil.Pct(tabby.gone, 99), benchutil.Pct(b.res.gone, 99)), "< 2×", benchutil.Verdict(benchutil.Pct(tabby.gone, 50) < 2*benchutil.Pct(b.res.gone, 50)))
				row("tabby/BIRD2 "+label+", withdrawal of all", times(tabby.withdraw, b.res.withdraw), "", "< 2×", benchutil.Verdict(tabby.withdraw < 2*b.res.withdraw))
			}
		}
	}
	birdRows(fmt.Sprintf("mesh %d", o.nodes), r.bird2Mesh, r.mesh)
	birdRows(fmt.Sprintf("2 RR + %d", o.nodes-2), r.bird2RR, r.rr)
	fmt.Fprintf(w, "\nclusters up (lab + agents + all sessions): mesh %s, RR %s", r.meshUp.Round(time.Millisecond), r.rrUp.Round(time.Millisecond))
	for _, b := range []struct {
		name string
		r    *bird2Result
	}{{"mesh", r.bird2Mesh}, {"RR", r.bird2RR}} {
		if b.r != nil && b.r.err == nil {
			fmt.Fprintf(w, "; BIRD2 %s converged %s after start", b.name, b.r.up.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(w, "\nwhole benchmark: %s\n", took.Round(time.Second))
}
