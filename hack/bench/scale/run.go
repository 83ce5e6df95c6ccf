package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
)

// agentLabel selects the real agents; their BGPPeer meshes them with each other only.
const agentLabel = "bench"

// churnResult is one churn rate's window.
type churnResult struct {
	rate     int
	achieved float64 // replacements per second the API server took
	probe    []sample
	usage    []benchutil.Usage
	events   float64 // per agent per second
	snapshot time.Duration
	// felix, all agents: applies per agent per second, their mean, and how many took over
	// slowApply
	applies, appliesSlow float64
	apply                time.Duration
	// every agent's lag histograms over the window (agentCounters)
	lag, applyLag buckets
	// the control plane's CPU over the window, % of a core (0: not known, an external lab)
	apiCPU, etcdCPU float64
	// tabby-typha's CPU over the window, all replicas (0: none runs), and the largest
	// replica's RSS at its end, MB
	typhaCPU, typhaRSS float64
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	start := time.Now()
	// The agents run as in production, except the IPAM garbage collector: the simulated pods
	// have no sandboxes, and a collector must not race the churn.
	args := []string{"--ipam-gc-interval=1h", "--ipam-gc-grace=1h"}
	if o.profileDir != "" {
		args = append(args, "--pprof")
	}
	l, err := lab.New(ctx, o.Lab(lab.Options{AgentArgs: args, Typha: o.typha}))
	if err != nil {
		return fmt.Errorf("start lab: %w", err)
	}
	defer func() {
		if err != nil {
			o.HoldFailed(ctx, l, fmt.Sprintf("failed: %v", err))
		}
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err = errors.Join(err, l.Close(cctx))
	}()
	w, err := newWorld(l.Config)
	if err != nil {
		return err
	}
	if err := meshAgentsOnly(ctx, l); err != nil {
		return err
	}

	t0 := time.Now()
	if err := w.build(ctx, o.nodes, o.podsPerNode, o.peers, o.parallel); err != nil {
		return fmt.Errorf("build the datastore: %w", err)
	}
	buildTook := time.Since(t0)
	held, err := w.counts(ctx)
	if err != nil {
		return err
	}

	var specs []lab.NodeSpec
	for i := range o.agents {
		specs = append(specs, lab.NodeSpec{Name: fmt.Sprintf("agent-%c", 'a'+i), Labels: map[string]string{agentLabel: "agent"}})
	}
	t0 = time.Now()
	agents, err := l.AddNodes(ctx, specs...)
	if err != nil {
		return fmt.Errorf("add agents: %w", err)
	}
	agentsUp := time.Since(t0)
	paths := map[string]string{}
	for _, n := range agents {
		paths[n.Name] = lab.NetnsPath(n.NS)
	}
	watch, err := benchutil.WatchRoutes(paths, v1.RouteProtocol, lab.PodCIDR)
	if err != nil {
		return err
	}
	defer watch.Close()
	if err := waitMesh(ctx, agents); err != nil {
		return err
	}
	if err := l.EnsureNamespace(ctx, "bench", nil); err != nil {
		return err
	}
	for _, n := range agents {
		if _, err := l.AddPod(ctx, lab.PodSpec{Name: "web-" + n.Name, Namespace: "bench", Node: n.Name}); err != nil {
			return err
		}
	}
	if err := w.addPolicy(ctx, "bench"); err != nil {
		return err
	}

	fmt.Fprintf(out, "tabby at %d nodes (hack/bench/scale): the lab's real kube-apiserver+etcd holding a %d-node cluster, %d real tabby-nodes in it\n", o.nodes+o.agents, o.nodes+o.agents, o.agents)
	fmt.Fprintf(out, "  datastore: %s; built in %v\n", held, buildTook.Round(time.Second))
	fmt.Fprintf(out, "  agents: labelled %s=agent, meshed with each other only (mesh off; %d BGPPeers select simulated racks); a NetworkPolicy on their pods admits app=a1 pods cluster-wide\n", agentLabel, o.peers)
	fmt.Fprintf(out, "  churn: a pod replaced on a simulated node = pod create, IPAMBlock update (ADD), IPAMBlock update (DEL), pod delete\n")
	if o.blocksOnlyRate > 0 {
		fmt.Fprintf(out, "  then %d/s of IPAMBlock updates only: the same replacements with the Pod objects left alone (half the API server's writes)\n", o.blocksOnlyRate)
	}
	fmt.Fprintf(out, "  node churn: an empty node joins a rack (Node with its status, BlockAffinity, IPAMBlock) and one leaves (the reverse), %d/s each\n", o.nodeRate)
	fmt.Fprintf(out, "  probe: every 500 ms a block claimed for %s (BlockAffinity + IPAMBlock, as IPAM does), until the route is in the last other agent's kernel,\n    timed from the start of the IPAMBlock Create call; and the legs: until the owner's blackhole, and from it to the others (BGP);\n    until the block's watch event reached a watch of the bench's own (the API server's part), and from it to the last kernel (tabby's)\n", agents[0].Name)
	if o.typha > 0 {
		fmt.Fprintf(out, "  fan-out: the agents watch the cluster-wide kinds through %d tabby-typha replica(s) (-typha 0: the API server directly)\n", o.typha)
	} else {
		fmt.Fprintf(out, "  fan-out: none, the agents watch the API server directly (-typha N: through N tabby-typha replicas)\n")
	}
	fmt.Fprintf(out, "  in the agents: every event's time inside tabby-node from their metrics, the watch event to the snapshot handed off\n    (tabby_datastore_lag_seconds), and felix's from a change of its input to the end of the apply (tabby_felix_apply_lag_seconds)\n")
	if o.watchers > 0 {
		fmt.Fprintf(out, "  more agents: the first rate again, then with %d more watches of %s, a connection each as every tabby-node has, the events thrown away;\n    kube-apiserver's CPU against the run just before is what each agent costs it\n", o.watchers, o.watched())
		if o.typha > 0 {
			fmt.Fprintf(out, "    then the same two runs with those watches on the first tabby-typha replica: what each agent costs the API server and tabby-typha there\n")
		}
	}
	fmt.Fprintln(out)
	row(out, "figure", "measured", "target", "")
	row(out, fmt.Sprintf("agents started → ready (%d at once)", o.agents), agentsUp.Round(time.Millisecond).String(), "", "")
	// Just after ready an agent still finishes its start (its first IPAM rounds, the collection of
	// the initial lists' garbage); idle is what it costs once that is over.
	first, err := benchutil.MeasureUsage(ctx, agents, o.idle)
	if err != nil {
		return err
	}
	reportUsage(out, fmt.Sprintf("first %v after ready", o.idle), first, false)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.settle):
	}
	idle, err := benchutil.MeasureUsage(ctx, agents, o.idle)
	if err != nil {
		return err
	}
	reportUsage(out, fmt.Sprintf("idle (%v after ready)", o.idle+o.settle), idle, true)
	if err := saveProfiles(ctx, o.profileDir, agents[0], "idle", o.idle); err != nil {
		return err
	}
	build, err := snapshotBuild(ctx, w, agents[0].Name)
	if err != nil {
		return err
	}
	row(out, "full snapshot build (the first; syncer.Build, in process)", fmt.Sprintf("%s, %d allocs, %.1f MB", benchutil.Ms(time.Duration(build.NsPerOp())), build.AllocsPerOp(), float64(build.AllocedBytesPerOp())/1e6), "", "")
	var others []string
	for _, n := range agents[1:] {
		others = append(others, n.Name)
	}
	p := &probe{l: l, owner: agents[0], others: others, watch: watch}
	quiet, err := measureChurn(ctx, p, agents, nil, o.window/2, nil)
	reportProbe(out, "no churn", quiet, false)
	if err != nil {
		return fmt.Errorf("probe without churn: %w", err)
	}
	for _, rate := range o.rates {
		c := &churn{w: w, rate: rate}
		// The profiles are taken while the churn runs, from its warm-up's end.
		profile := func(ctx context.Context) error {
			return saveProfiles(ctx, o.profileDir, agents[0], fmt.Sprintf("churn%d", rate), 5*time.Second)
		}
		r, err := measureChurn(ctx, p, agents, c, o.window, profile)
		if err := reportLoad(out, fmt.Sprintf("churn %d/s (achieved %.0f/s)", r.rate, r.achieved), r, err, r.rate >= 100); err != nil {
			return fmt.Errorf("churn at %d/s: %w", rate, err)
		}
	}
	if rate := o.blocksOnlyRate; rate > 0 {
		r, err := measureChurn(ctx, p, agents, &churn{w: w, rate: rate, blocksOnly: true}, o.window, nil)
		if err := reportLoad(out, fmt.Sprintf("churn %d/s, IPAMBlock updates only (achieved %.0f/s)", r.rate, r.achieved), r, err, r.rate >= 100); err != nil {
			return fmt.Errorf("churn of IPAMBlock updates at %d/s: %w", rate, err)
		}
	}
	if o.watchers > 0 {
		if err := measureFanOut(ctx, out, p, agents, w, l, o, o.rates[0]); err != nil {
			return err
		}
	}
	if o.nodeRate > 0 && len(w.spare) > 0 {
		nc := &nodeChurn{w: w, rate: o.nodeRate}
		profile := func(ctx context.Context) error {
			return saveProfiles(ctx, o.profileDir, agents[0], "nodes", 5*time.Second)
		}
		r, err := measureChurn(ctx, p, agents, nc, o.window, profile)
		if err := reportLoad(out, fmt.Sprintf("nodes joining and leaving, %d/s each (achieved %.1f/s)", r.rate, r.achieved), r, err, false); err != nil {
			return fmt.Errorf("node churn: %w", err)
		}
	}
	perPod, breakdown, err := requestsPerPod(ctx, l, agents[0], o.apiPods)
	if err != nil {
		return err
	}

	row(out, "API server requests per pod ADD+DEL (through tabby-node)", fmt.Sprintf("%.2f", perPod), "<= 3", benchutil.Verdict(perPod <= 3))
	fmt.Fprintf(out, "  of which: %s\n", breakdown)
	fmt.Fprintf(out, "\nwhole benchmark: %v\n", time.Since(start).Round(time.Second))
	return nil
}

// meshAgentsOnly turns the node-to-node mesh off and meshes the agents with each other: a
// 1,000-node mesh is not a configuration anyone runs.
func meshAgentsOnly(ctx context.Context, l *lab.Lab) error {
	if err := l.SetNodeToNodeMesh(ctx, false); err != nil {
		return err
	}
	sel := agentLabel + " == 'agent'"
	p := &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1.BGPPeerSpec{NodeSelector: sel, PeerSelector: sel}}
	if _, err := l.Client.BGPPeers().Create(ctx, p); err != nil {
		return fmt.Errorf("BGPPeer agents: %w", err)
	}
	return nil
}

func waitMesh(ctx context.Context, agents []*lab.Node) error {
	var wg sync.WaitGroup
	errs := make([]error, len(agents))
	for i, n := range agents {
		wg.Go(func() {
			var addrs []netip.Addr
			for j, m := range agents {
				if j != i {
					addrs = append(addrs, m.IP())
				}
			}
			errs[i] = n.WaitPeers(ctx, 90*time.Second, addrs...)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// measureChurn runs the churn (if any) and the probe together for window, after a warm-up, and
// samples the agents' usage and counters over the same window.
func measureChurn(ctx context.Context, p *probe, agents []*lab.Node, c load, window time.Duration, during func(context.Context) error) (churnResult, error) {
	var r churnResult
	cctx, stopChurn := context.WithCancel(ctx)
	churnDone := make(chan struct{})
	// On every return the load has stopped (the node churn has removed the nodes it added).
	defer func() { stopChurn(); <-churnDone }()
	if c != nil {
		r.rate = c.perSecond()
		go func() { defer close(churnDone); c.run(cctx) }()
		time.Sleep(3 * time.Second) // the warm-up: informers and queues at their steady state
	} else {
		close(churnDone)
	}
	before, err := readAgents(ctx, agents)
	if err != nil {
		return r, err
	}
	var done0 int64
	if c != nil {
		done0 = c.completed()
	}
	cp0 := controlPlaneCPU(p.l)
	t0 := time.Now()
	pctx, stopProbe := context.WithTimeout(ctx, window)
	defer stopProbe()
	type probed struct {
		ss  []sample
		err error
	}
	pc := make(chan probed, 1)
	go func() { ss, err := p.samples(pctx, probeEvery); pc <- probed{ss, err} }()
	profiled := make(chan error, 1)
	if during == nil {
		profiled <- nil
	} else {
		go func() { profiled <- during(ctx) }()
	}
	r.usage, err = benchutil.MeasureUsage(ctx, agents, window)
	if err != nil {
		return r, err
	}
	got := <-pc
	if perr := <-profiled; perr != nil {
		got.err = errors.Join(got.err, fmt.Errorf("profiles: %w", perr))
	}
	elapsed := time.Since(t0)
	cp1 := controlPlaneCPU(p.l)
	r.apiCPU = (cp1[0] - cp0[0]).Seconds() / elapsed.Seconds() * 100
	r.etcdCPU = (cp1[1] - cp0[1]).Seconds() / elapsed.Seconds() * 100
	r.typhaCPU = (cp1[2] - cp0[2]).Seconds() / elapsed.Seconds() * 100
	for _, t := range p.l.Typhas {
		if kb, err := benchutil.RSSKB(t.Pid()); err == nil {
			r.typhaRSS = max(r.typhaRSS, float64(kb)/1000)
		}
	}
	if c != nil {
		r.achieved = float64(c.completed()-done0) / elapsed.Seconds()
	}
	after, err := readAgents(ctx, agents)
	if err != nil {
		return r, err
	}
	var ev, snaps, snapTime, applies, applyTime float64
	r.lag, r.applyLag = buckets{}, buckets{}
	for i := range agents {
		r.lag.add(after[i].lag, before[i].lag)
		r.applyLag.add(after[i].applyLag, before[i].applyLag)
		ev += after[i].events - before[i].events
		snaps += after[i].snapshots - before[i].snapshots
		snapTime += after[i].snapshotTotal - before[i].snapshotTotal
		applies += after[i].applies - before[i].applies
		applyTime += after[i].applyTotal - before[i].applyTotal
		r.appliesSlow += after[i].appliesSlow - before[i].appliesSlow
	}
	r.events = ev / float64(len(agents)) / elapsed.Seconds()
	if snaps > 0 {
		r.snapshot = time.Duration(snapTime / snaps * float64(time.Second))
	}
	r.applies = applies / float64(len(agents)) / elapsed.Seconds()
	if applies > 0 {
		r.apply = time.Duration(applyTime / applies * float64(time.Second))
	}
	r.probe = got.ss
	stopChurn()
	<-churnDone
	if c != nil {
		if err := c.err(); err != nil {
			return r, err
		}
	}
	return r, got.err
}

func reportProbe(out io.Writer, label string, r churnResult, target bool) {
	if len(r.probe) == 0 {
		row(out, label+": block → other agents' kernels", "no sample", "", "MISSED")
		return
	}
	var last, owner, bgp, create, event, tabby, toOwner []time.Duration
	for _, s := range r.probe {
		last, owner, bgp, create = append(last, s.last), append(owner, s.owner), append(bgp, s.last-s.owner), append(create, s.create)
		event, tabby, toOwner = append(event, s.event), append(tabby, s.last-s.event), append(toOwner, s.owner-s.event)
	}
	pcts := func(ds []time.Duration) string {
		return fmt.Sprintf("p50 %s, p99 %s", benchutil.Ms(benchutil.Pct(ds, 50)), benchutil.Ms(benchutil.Pct(ds, 99)))
	}
	p99 := benchutil.Pct(last, 99)
	t, v := "", ""
	if target {
		t, v = "p99 < 100 ms", benchutil.Verdict(p99 < 100*time.Millisecond)
	}
	row(out, label+": block → other agents' kernels", fmt.Sprintf("%s (n=%d)", pcts(last), len(last)), t, v)
	row(out, label+":   to the owner's own kernel (its blackhole)", pcts(owner), "", "")
	row(out, label+":   the IPAMBlock Create call alone", pcts(create), "", "")
	row(out, label+":   until the block's watch event (API server)", pcts(event), "", "")
	tt, tv := "", ""
	if target {
		tt, tv = "p99 < 100 ms", benchutil.Verdict(benchutil.Pct(tabby, 99) < 100*time.Millisecond)
	}
	row(out, label+":   watch event → last other agent's kernel (tabby)", pcts(tabby), tt, tv)
	row(out, label+":   watch event → owner's kernel (its watch, then the agent)", pcts(toOwner), "", "")
	row(out, label+":   owner's kernel → last other agent's (BGP)", pcts(bgp), "", "")
}

// reportLoad prints what one measureChurn found, and passes its error on.
func reportLoad(out io.Writer, label string, r churnResult, err error, target bool) error {
	reportProbe(out, label, r, target)
	if err != nil {
		return err
	}
	reportUsage(out, label, r.usage, false)
	row(out, label+": watch events per agent", fmt.Sprintf("%.0f /s", r.events), "", "")
	if r.apiCPU > 0 {
		row(out, label+": kube-apiserver CPU; etcd", fmt.Sprintf("%.0f %%; %.0f %% of a core", r.apiCPU, r.etcdCPU), "", "")
	}
	if r.typhaCPU > 0 {
		row(out, label+": tabby-typha CPU; RSS", fmt.Sprintf("%.1f %% of a core; %.1f MB", r.typhaCPU, r.typhaRSS), "", "")
	}
	row(out, label+": snapshot, mean per rebuild", benchutil.Ms(r.snapshot), "", "")
	row(out, label+": felix applies per agent; mean; over 50 ms (all agents)", fmt.Sprintf("%.1f /s; %d µs; %.0f", r.applies, r.apply.Microseconds(), r.appliesSlow), "", "")
	row(out, label+": in the agents, every event: watch event → snapshot handed to felix and BGP", quantiles(r.lag), "", "")
	row(out, label+":   felix: input → applied", quantiles(r.applyLag), "", "")
	return nil
}

// controlPlaneCPU is the CPU kube-apiserver, etcd and the tabby-typha replicas have used so far
// (zero in a lab on an external control plane, or without tabby-typha).
func controlPlaneCPU(l *lab.Lab) [3]time.Duration {
	var out [3]time.Duration
	if l.Env == nil {
		return out
	}
	for i, name := range []string{"kube-apiserver", "etcd"} {
		if pid := l.Env.Pid(name); pid != 0 {
			out[i], _ = benchutil.CPUTime(pid)
		}
	}
	for _, t := range l.Typhas {
		if pid := t.Pid(); pid != 0 {
			cpu, _ := benchutil.CPUTime(pid)
			out[2] += cpu
		}
	}
	return out
}

// quantiles are a lag histogram's p50 and p99, as histogram_quantile estimates them, and how
// many of its samples were over slowApply.
func quantiles(b buckets) string {
	p50, ok := b.quantile(0.5)
	if !ok {
		return "no sample"
	}
	p99, _ := b.quantile(0.99)
	return fmt.Sprintf("p50 %s, p99 %s (histogram); %.0f of %.0f over %s", benchutil.Ms(p50), benchutil.Ms(p99), b.above(slowApply.Seconds()), b.total(), slowApply)
}

func reportUsage(out io.Writer, label string, us []benchutil.Usage, targets bool) {
	var rss, anon []int
	var cpu []float64
	for _, u := range us {
		rss, anon, cpu = append(rss, u.RSSKB), append(anon, u.AnonKB), append(cpu, u.CPU)
	}
	_, rx := benchutil.MedianMax(rss)
	_, ax := benchutil.MedianMax(anon)
	_, cx := benchutil.MedianMax(cpu)
	rt, rv, ct, cv := "", "", "", ""
	if targets {
		rt, rv, ct, cv = "< 100 MB", benchutil.Verdict(rx < 100*1024), "< 1 %", benchutil.Verdict(cx < 1)
	}
	row(out, label+": agent RSS, max (own memory, RssAnon)", fmt.Sprintf("%.1f MB (%.1f MB)", float64(rx)/1024, float64(ax)/1024), rt, rv)
	row(out, label+": agent CPU, max", fmt.Sprintf("%.2f %% of a core", cx), ct, cv)
}

// requestsPerPod adds n pods to node through the CNI plugin and tabby-node (as a runtime would),
// deletes them, and counts the API server's requests for tabby's resources meanwhile.
//
// A pod's requests are reads and writes; a watch or list that ends meanwhile is an informer
// re-opening its watch, whatever the pods do, and is listed apart.
func requestsPerPod(ctx context.Context, l *lab.Lab, node *lab.Node, n int) (float64, string, error) {
	// The churn before leaves requests the API server is still answering (its cancelled writes
	// end as 504s): counting starts once tabby's resources have seen no request for a second.
	before, err := apiQuiet(ctx, l, time.Second, time.Minute)
	if err != nil {
		return 0, "", err
	}
	for i := range n {
		p, err := l.AddPod(ctx, lab.PodSpec{Name: fmt.Sprintf("count-%02d", i), Namespace: "bench", Node: node.Name})
		if err != nil {
			return 0, "", err
		}
		if err := l.DeletePod(ctx, p.Key()); err != nil {
			return 0, "", err
		}
	}
	after, err := apiRequests(ctx, l)
	if err != nil {
		return 0, "", err
	}
	var total float64
	var parts, apart []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		d := after[k] - before[k]
		switch {
		case d <= 0:
		case strings.HasPrefix(k, "WATCH ") || strings.HasPrefix(k, "LIST "):
			apart = append(apart, fmt.Sprintf("%s %.0f", k, d))
		default:
			total += d
			parts = append(parts, fmt.Sprintf("%s %.2f", k, d/float64(n)))
		}
	}
	breakdown := strings.Join(parts, ", ")
	if len(apart) > 0 {
		breakdown += "; not per pod, informers' watches ended meanwhile: " + strings.Join(apart, ", ")
	}
	return total / float64(n), breakdown, nil
}

// apiQuiet waits until the API server's counts of requests for tabby's resources have not moved
// for quiet, and returns them.
func apiQuiet(ctx context.Context, l *lab.Lab, quiet, timeout time.Duration) (map[string]float64, error) {
	deadline := time.Now().Add(timeout)
	last, err := apiRequests(ctx, l)
	if err != nil {
		return nil, err
	}
	since := time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the API server still answered requests for tabby's resources %v after the churn", timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(quiet / 5):
		}
		now, err := apiRequests(ctx, l)
		if err != nil {
			return nil, err
		}
		if !maps.Equal(now, last) {
			last, since = now, time.Now()
		}
	}
	return last, nil
}

// saveProfiles writes the agent's metrics (the Go runtime's memory classes, before the profile's
// collection), its heap profile (after a collection: what is live) and a CPU profile of the given
// length as <dir>/<label>.metrics, .heap and .cpu (nothing without a directory).
func saveProfiles(ctx context.Context, dir string, n *lab.Node, label string, cpu time.Duration) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cpuPath := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(cpu.Seconds()))
	for _, p := range []struct{ path, ext string }{{"/metrics", "metrics"}, {"/debug/pprof/heap?gc=1", "heap"}, {cpuPath, "cpu"}} {
		b, err := n.MetricsPath(ctx, p.path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, label+"."+p.ext), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
