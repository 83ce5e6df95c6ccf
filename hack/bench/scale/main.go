// Command scale measures what tabby-node and the API server pay in a 1,000-node cluster, on
// this machine: the lab's real kube-apiserver and etcd hold what such a cluster holds (Nodes
// with tabby's annotations, a block and affinity per node with 30 allocations, 30 pods per node,
// explicit BGP peers per rack), and a few real tabby-nodes run in it, in their own network
// namespaces and BGP sessions. Then pods churn across the simulated nodes at 10/s and 100/s
// while a probe times a block of one agent to the kernels of the others. Everything it makes is
// removed at the end, on failure and on Ctrl-C. Run as root: go run -C hack ./bench/scale
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tabbynet/tabby/hack/bench/benchutil"
)

type options struct {
	nodes, podsPerNode, peers int
	agents                    int
	rates                     []int
	window, idle, settle      time.Duration
	parallel                  int
	apiPods                   int
	nodeRate, watchers        int
	blocksOnlyRate            int             // a churn of IPAMBlock updates alone, per second (0: none)
	typha                     int             // tabby-typha replicas the agents watch through (0: none)
	watch                     map[string]bool // what the more agents' watches watch
	profileDir                string
	benchutil.LabFlags
}

func main() {
	var o options
	o.Register()
	rates := flag.String("rates", "10,100", "pod replacements per second across the cluster, one run each")
	flag.IntVar(&o.nodes, "nodes", 1000, "simulated nodes in the datastore")
	flag.IntVar(&o.podsPerNode, "pods-per-node", 30, "pods (and allocations in its block) per simulated node")
	flag.IntVar(&o.peers, "peers", 300, "explicit BGPPeers (per rack, selecting simulated nodes only)")
	flag.IntVar(&o.agents, "agents", 3, "real tabby-nodes")
	flag.DurationVar(&o.window, "window", 30*time.Second, "measuring window per churn rate")
	flag.DurationVar(&o.idle, "idle", 20*time.Second, "idle window for the agents' CPU")
	flag.DurationVar(&o.settle, "settle", 40*time.Second, "wait after the first idle window before the idle figure")
	flag.IntVar(&o.parallel, "parallel", 32, "concurrent writers while building the datastore")
	flag.IntVar(&o.watchers, "watchers", 100, "more agents' watches (IPAMBlocks and Pods, a connection each), in a run of the first churn rate after one without them: the API server's cost of sending every event to every agent (0: no such runs)")
	watch := flag.String("watch", "ipamblocks,pods", "what those watches watch: ipamblocks, pods or both (what a tabby-node's watches receive under pod churn)")
	flag.IntVar(&o.typha, "typha", 1, "tabby-typha replicas the agents watch the cluster-wide kinds through (0: the API server directly)")
	flag.IntVar(&o.blocksOnlyRate, "blocks-only-rate", 100, "pod replacements per second as IPAM writes them, the two IPAMBlock updates without the Pod objects' create and delete, in a run of their own (0: none)")
	flag.IntVar(&o.nodeRate, "node-rate", 1, "empty nodes joining, and leaving, per second, in a window of their own (0: none)")
	flag.IntVar(&o.apiPods, "api-pods", 20, "pods added and deleted through tabby-node to count API requests per pod")
	flag.StringVar(&o.profileDir, "profiles", "", "write the first agent's heap and CPU profiles (idle, and under each churn rate) into this directory")
	flag.Parse()
	benchutil.Main("scale", validate(&o, *rates, *watch), func(ctx context.Context) error { return run(ctx, o, os.Stdout) })
}

func validate(o *options, rates, watch string) error {
	o.watch = map[string]bool{}
	for _, w := range strings.Split(watch, ",") {
		w = strings.TrimSpace(w)
		if w != "ipamblocks" && w != "pods" {
			return fmt.Errorf("-watch=%s: %q is not ipamblocks or pods", watch, w)
		}
		o.watch[w] = true
	}
	for _, r := range strings.Split(rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n < 1 || n > 1000 {
			return fmt.Errorf("-rates=%s: want numbers in 1..1000", rates)
		}
		o.rates = append(o.rates, n)
	}
	if err := benchutil.NeedRoot("bench-scale"); err != nil {
		return err
	}
	switch {
	case o.nodes < 1 || o.nodes > 1000:
		return fmt.Errorf("-nodes=%d: want 1..1000", o.nodes)
	case o.podsPerNode < 1 || o.podsPerNode > 60:
		return fmt.Errorf("-pods-per-node=%d: want 1..60 (one /26 block each)", o.podsPerNode)
	case o.agents < 2 || o.agents > 10:
		return fmt.Errorf("-agents=%d: want 2..10", o.agents)
	case o.window < 5*time.Second || o.idle < 5*time.Second:
		return fmt.Errorf("-window=%v -idle=%v: want at least 5s each", o.window, o.idle)
	case o.nodeRate < 0 || o.nodeRate > 10:
		return fmt.Errorf("-node-rate=%d: want 0..10", o.nodeRate)
	case o.settle < 0:
		return fmt.Errorf("-settle=%v: want 0 or more", o.settle)
	case o.watchers < 0 || o.watchers > 1000:
		return fmt.Errorf("-watchers=%d: want 0..1000", o.watchers)
	case o.blocksOnlyRate < 0 || o.blocksOnlyRate > 1000:
		return fmt.Errorf("-blocks-only-rate=%d: want 0..1000", o.blocksOnlyRate)
	}
	return nil
}

// watched says what the more agents' watches watch.
func (o options) watched() string { return strings.Join(slices.Sorted(maps.Keys(o.watch)), " and ") }

func row(w io.Writer, figure, value, target, verdict string) {
	fmt.Fprintf(w, "%-58s %-34s %-14s %s\n", figure, value, target, verdict)
}
