// Command node benchmarks felix inside the real tabby-node, with the datastore path in the loop,
// on a node whose kernel holds 12,000 tabby routes: 11,000 pod /32s over 100 veths, the 172
// blackholes of their blocks and 830 remote /26s learned over BGP from a second node. It
// prints what the felix benchmark (felix alone, hack/bench/felix) prints for the same events:
//
//   - new pod → felix done: a pod added the way a runtime adds one (Pod object, netns, the
//     tabby CNI binary through libcni and tabby-node's IPAM socket, the IPAMBlock update) until
//     felix in tabby-node has applied it (its apply counter moved), and felix's own apply time
//     for it;
//   - no-op event: an update of an IPAMBlock of another node that changes nothing for this
//     node: how many felix applies and how much tabby-node CPU each costs (none and ~0 once
//     felix compares its inputs before marking them dirty).
//
// Run as root after `make build` (TABBY_BIN=bin); `make bench` runs it.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
)

const (
	veths       = 100
	podRoutes   = 11000
	remoteCount = 830
	newPods     = 30
	noopEvents  = 50
)

func main() { benchutil.MainWithDatastoreLab("node", run) }

func run(ctx context.Context, l *lab.Lab) (err error) {
	nodes, err := l.AddNodes(ctx, lab.NodeSpec{Name: "node-1"}, lab.NodeSpec{Name: "node-2"})
	if err != nil {
		return err
	}
	n1 := nodes[0]
	start := time.Now()
	blocks, err := populate(ctx, l)
	if err != nil {
		return err
	}
	var vethNames []string
	for i := range veths {
		vethNames = append(vethNames, names.HostVethName("bench", fmt.Sprintf("p%d", i), ""))
	}
	if err := benchutil.AddHostVeths(n1.NS, vethNames); err != nil {
		return err
	}
	want := podRoutes + blocks + remoteCount
	if err := waitRoutes(ctx, n1, want); err != nil {
		return err
	}
	fmt.Printf("tabby-node with %d tabby routes in its kernel (%d pod /32s over %d veths, %d blackholes, %d remote /26s by BGP) after %s\n",
		want, podRoutes, veths, blocks, remoteCount, time.Since(start).Round(time.Second))

	// New pods, one at a time.
	var e2e, added, applied []time.Duration
	for i := 0; i < newPods; i++ {
		before, err := felixApplies(ctx, n1)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := l.AddPod(ctx, lab.PodSpec{Name: fmt.Sprintf("probe-%d", i), Node: "node-1"}); err != nil {
			return err
		}
		added = append(added, time.Since(t0))
		for {
			after, err := felixApplies(ctx, n1)
			if err != nil {
				return err
			}
			if after.Count > before.Count {
				e2e = append(e2e, time.Since(t0))
				applied = append(applied, before.Mean(after))
				break
			}
			if time.Since(t0) > 10*time.Second {
				return fmt.Errorf("pod %d: felix did not apply within 10s", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	fmt.Printf("new pod → felix done (pod object, netns, CNI ADD via the IPAM socket, IPAMBlock, syncer, felix): p50 %s p99 %s\n", benchutil.Pct(e2e, 50), benchutil.Pct(e2e, 99))
	fmt.Printf("  of which the pod's ADD (lab: Pod object, netns, CNI):  p50 %s p99 %s\n", benchutil.Pct(added, 50), benchutil.Pct(added, 99))
	fmt.Printf("  felix's own apply for that pod:                 p50 %s p99 %s\n", benchutil.Pct(applied, 50), benchutil.Pct(applied, 99))

	// No-op events: another node's block changes in a way that means nothing to this node.
	// First let felix's timers for the new pods' CNI-made routes (--workload-grace, 10 s) run
	// out, so that what is counted below is the events' doing.
	time.Sleep(11 * time.Second)
	pid := n1.PID()
	before, err := felixApplies(ctx, n1)
	if err != nil {
		return err
	}
	cpu0, err := benchutil.CPUTime(pid)
	if err != nil {
		return err
	}
	for i := 0; i < noopEvents; i++ {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"bench.tabby.dev/touch":"%d"}}}`, i)
		if _, err := l.Client.IPAMBlocks().Patch(ctx, names.BlockName(remoteBlock(0)), types.MergePatchType, []byte(patch)); err != nil {
			return fmt.Errorf("touch a remote block: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // let the last events through the informer
	after, err := felixApplies(ctx, n1)
	if err != nil {
		return err
	}
	cpu1, err := benchutil.CPUTime(pid)
	if err != nil {
		return err
	}
	fmt.Printf("no-op event (another node's IPAMBlock updated), %d events: %d felix applies, tabby-node CPU %s per event (syncer, snapshot and felix's comparisons included)\n",
		noopEvents, int(after.Count-before.Count), ((cpu1 - cpu0) / noopEvents).Round(10*time.Microsecond))
	return nil
}

func localBlock(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(64 + i/4), byte(i % 4 * 64)}), 26)
}

func remoteBlock(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(112 + i/4), byte(i % 4 * 64)}), 26)
}

// populate writes what a busy cluster's datastore holds: node-1's blocks full of pods (100
// pods' worth of names, so 100 host veths carry them) and node-2's blocks, which node-2
// announces and node-1 learns over BGP. It returns node-1's block count.
func populate(ctx context.Context, l *lab.Lab) (int, error) {
	var objs []*v1.IPAMBlock
	left := podRoutes
	local := 0
	for ; left > 0; local++ {
		b := &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(localBlock(local))},
			Spec: v1.IPAMBlockSpec{CIDR: localBlock(local).String(), Affinity: v1.AffinityPrefixHost + "node-1", Allocations: map[string]v1.Allocation{}}}
		for ord := 0; ord < 64 && left > 0; ord++ {
			k := podRoutes - left
			b.Spec.Allocations[strconv.Itoa(ord)] = v1.Allocation{Handle: fmt.Sprintf("bench.c%d", k), Namespace: "bench", Pod: fmt.Sprintf("p%d", k%veths), Node: "node-1"}
			left--
		}
		objs = append(objs, b)
	}
	for i := 0; i < remoteCount; i++ {
		objs = append(objs, &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(remoteBlock(i))},
			Spec: v1.IPAMBlockSpec{CIDR: remoteBlock(i).String(), Affinity: v1.AffinityPrefixHost + "node-2"}})
	}
	errs := make(chan error, len(objs))
	sem := make(chan struct{}, 8)
	for _, o := range objs {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := l.Client.IPAMBlocks().Create(ctx, o)
			errs <- err
		}()
	}
	for range objs {
		if err := <-errs; err != nil {
			return 0, fmt.Errorf("create IPAMBlock: %w", err)
		}
	}
	return local, nil
}

func waitRoutes(ctx context.Context, n *lab.Node, want int) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		routes, err := n.TabbyRoutes(ctx)
		if err != nil {
			return err
		}
		if len(routes) >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node-1 has %d tabby routes after 3 minutes, want %d", len(routes), want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// felixApplies reads felix's apply-duration histogram from tabby-node's metrics.
func felixApplies(ctx context.Context, n *lab.Node) (benchutil.Histogram, error) {
	return benchutil.ReadHistogram(ctx, n, "tabby_felix_apply_duration_seconds")
}
