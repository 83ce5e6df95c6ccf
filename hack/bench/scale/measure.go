package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/promtext"
	"github.com/tabbynet/tabby/node/syncer"
)

// probe claims a block for one agent, as that agent's IPAM would, and times until every other
// agent's kernel routes it via the owner: the datastore write, the owner's watch and snapshot,
// BGP, and the others' felix. Then it releases the block and waits until the routes are gone,
// so every sample starts from the same state.
type probe struct {
	l      *lab.Lab
	owner  *lab.Node
	others []string
	watch  *benchutil.RouteWatch
	k      int
}

// probeBlock is one of 12 blocks in 10.244.1.0–10.244.3.255, below the simulated nodes' blocks
// and above the agents' own.
func probeBlock(k int) netip.Prefix {
	j := 4 + k%12
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(j / 4), byte(j % 4 * 64)}), 26)
}

// sample is one probe, from the start of the IPAMBlock Create call: until the route was in the
// last other agent's kernel (last), until the owner's felix had its blackhole in its own kernel
// (owner: the API server's write and watch, and the owner's agent), the Create call alone, and
// until the block's watch event reached the bench (event: what the API server took before any
// agent could know; last - event is tabby's part). last - owner is the BGP leg: the owner's
// announcement to the others' kernels.
type sample struct {
	last, owner, create, event time.Duration
}

// once claims a block and times its route into the agents' kernels.
func (p *probe) once(ctx context.Context) (sample, error) {
	b := probeBlock(p.k)
	p.k++
	// A watch of its own, as an agent's: it sees the event when the API server sends it.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := p.l.Client.IPAMBlocks().Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + names.BlockName(b)})
	if err != nil {
		return sample{}, fmt.Errorf("watch IPAMBlock %s: %w", names.BlockName(b), err)
	}
	defer w.Stop()
	seen := make(chan time.Time, 1)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				seen <- time.Now()
				return
			}
		}
	}()
	t0, create, err := benchutil.ClaimBlock(ctx, p.l, p.owner.Name, b)
	if err != nil {
		return sample{}, err
	}
	got, err := p.watch.Arrived(ctx, 10*time.Second, b, p.owner.IP(), p.others)
	if err != nil {
		return sample{}, fmt.Errorf("block %s of %s: %w", b, p.owner.Name, err)
	}
	own, err := p.watch.Arrived(ctx, 10*time.Second, b, netip.Addr{}, []string{p.owner.Name})
	if err != nil {
		return sample{}, fmt.Errorf("block %s: blackhole at its owner %s: %w", b, p.owner.Name, err)
	}
	s := sample{owner: own[p.owner.Name].Sub(t0), create: create}
	select {
	case at := <-seen:
		s.event = at.Sub(t0)
	case <-time.After(10 * time.Second):
		return sample{}, fmt.Errorf("block %s: no watch event", b)
	}
	for _, at := range got {
		s.last = max(s.last, at.Sub(t0))
	}
	if err := benchutil.ReleaseBlock(ctx, p.l, p.owner.Name, b); err != nil {
		return sample{}, err
	}
	return s, p.watch.Gone(ctx, 10*time.Second, []netip.Prefix{b})
}

// samples runs the probe every interval until ctx ends.
func (p *probe) samples(ctx context.Context, interval time.Duration) ([]sample, error) {
	var out []sample
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		// A sample takes up to 20 s when things go wrong: none is started that the window's
		// end would cut (its claim or release half done).
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < time.Second {
			return out, nil
		}
		s, err := p.once(context.WithoutCancel(ctx))
		if err != nil {
			return out, err
		}
		out = append(out, s)
		select {
		case <-ctx.Done():
			return out, nil
		case <-t.C:
		}
	}
}

// agentCounters is what one agent's metrics say about its datastore side.
type agentCounters struct {
	events        float64 // watch events received, every resource
	snapshots     float64
	snapshotTotal float64 // seconds
	// felix's applies: how many, their time (seconds), and how many took over slowApply (a
	// route change that arrives meanwhile waits for the apply to end).
	applies, applyTotal, appliesSlow float64
	// lag: watch event → snapshot handed to felix and BGP; applyLag: felix's input → applied.
	lag, applyLag buckets
}

func readAgent(ctx context.Context, n *lab.Node) (agentCounters, error) {
	text, err := n.Metrics(ctx)
	if err != nil {
		return agentCounters{}, err
	}
	m := promtext.Parse(text, "tabby_datastore_events_total", "tabby_datastore_snapshot_seconds_count", "tabby_datastore_snapshot_seconds_sum",
		"tabby_felix_apply_duration_seconds_count", "tabby_felix_apply_duration_seconds_sum", "tabby_felix_apply_duration_seconds_bucket",
		"tabby_datastore_lag_seconds_bucket", "tabby_felix_apply_lag_seconds_bucket")
	applies := promtext.Sum(m["tabby_felix_apply_duration_seconds_count"], nil)
	fast := promtext.Sum(m["tabby_felix_apply_duration_seconds_bucket"], func(l map[string]string) bool { return l["le"] == slowApplyLe })
	return agentCounters{events: promtext.Sum(m["tabby_datastore_events_total"], nil),
		snapshots: promtext.Sum(m["tabby_datastore_snapshot_seconds_count"], nil), snapshotTotal: promtext.Sum(m["tabby_datastore_snapshot_seconds_sum"], nil),
		applies: applies, applyTotal: promtext.Sum(m["tabby_felix_apply_duration_seconds_sum"], nil), appliesSlow: applies - fast,
		lag: readBuckets(m["tabby_datastore_lag_seconds_bucket"]), applyLag: readBuckets(m["tabby_felix_apply_lag_seconds_bucket"])}, nil
}

func readAgents(ctx context.Context, ns []*lab.Node) ([]agentCounters, error) {
	out := make([]agentCounters, len(ns))
	for i, n := range ns {
		var err error
		if out[i], err = readAgent(ctx, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// apiRequests reads the API server's request counters for tabby's resources (group tabby.dev),
// by "VERB resource code".
func apiRequests(ctx context.Context, l *lab.Lab) (map[string]float64, error) {
	raw, err := l.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	out := map[string]float64{}
	for _, m := range promtext.Parse(string(raw), "apiserver_request_total")["apiserver_request_total"] {
		if m.Labels["group"] != "tabby.dev" {
			continue
		}
		out[m.Labels["verb"]+" "+m.Labels["resource"]+" "+m.Labels["code"]] += m.Value
	}
	return out, nil
}

// snapshotBuild times syncer.Build over what the datastore holds now, as the agent node sees it:
// the cost of one full rebuild, which the agent pays per burst of events.
func snapshotBuild(ctx context.Context, w *world, nodeName string) (testing.BenchmarkResult, error) {
	in := syncer.Inputs{NodeName: nodeName}
	nodes, err := w.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return testing.BenchmarkResult{}, err
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	pools, err := w.client.IPPools().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return testing.BenchmarkResult{}, err
	}
	for i := range pools.Items {
		in.Pools = append(in.Pools, &pools.Items[i])
	}
	blocks, err := w.client.IPAMBlocks().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return testing.BenchmarkResult{}, err
	}
	for i := range blocks.Items {
		in.Blocks = append(in.Blocks, &blocks.Items[i])
	}
	peers, err := w.client.BGPPeers().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return testing.BenchmarkResult{}, err
	}
	for i := range peers.Items {
		in.BGPPeers = append(in.BGPPeers, &peers.Items[i])
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			syncer.Build(in, quiet)
		}
	}), nil
}
