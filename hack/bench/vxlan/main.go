// Command vxlan measures what VXLAN costs pod traffic between nodes: a bulk TCP transfer from a
// pod on one lab node to a pod on another, and one-byte request/response round trips over TCP
// between them (netperf's TCP_RR: the per-packet cost), routed natively (a pool with vxlanMode Never, its
// routes over BGP) against the same between pods of a VXLAN pool (vxlanMode Always) on the
// same two nodes, in the same lab, the two alternating round after round so that the machine's
// load falls on both alike. Each pod's MTU is the one tabby gives it (the uplink's, less
// VXLAN's overhead in the VXLAN pool), so the figure includes the smaller segments. One lab
// per family: IPv4, then IPv6 (an IPv6-only lab, VXLAN over the nodes' IPv6 addresses).
// Everything it makes is removed at the end, on failure and on Ctrl-C. Run as root:
// go run -C hack ./bench/vxlan
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

type options struct {
	rounds   int
	duration time.Duration
	families string
	benchutil.LabFlags
}

func main() {
	var o options
	o.Register()
	flag.IntVar(&o.rounds, "rounds", 11, "measurements of each kind per family, alternating")
	flag.DurationVar(&o.duration, "duration", 500*time.Millisecond, "length of one measurement")
	flag.StringVar(&o.families, "families", "ipv4,ipv6", "families measured, one lab each: ipv4, ipv6 or both")
	flag.Parse()
	benchutil.Main("vxlan", validate(o), func(ctx context.Context) error { return run(ctx, o, os.Stdout) })
}

func validate(o options) error {
	if err := benchutil.NeedRoot("bench"); err != nil {
		return err
	}
	switch {
	case o.rounds < 1 || o.rounds > 50:
		return fmt.Errorf("-rounds=%d: want 1..50", o.rounds)
	case o.duration < 100*time.Millisecond || o.duration > time.Minute:
		return fmt.Errorf("-duration=%v: want 100ms..1m", o.duration)
	}
	for _, f := range strings.Split(o.families, ",") {
		if _, ok := families[f]; !ok {
			return fmt.Errorf("-families=%s: %q is not ipv4 or ipv6", o.families, f)
		}
	}
	return nil
}

// family is one lab's setup: the chart's pool, narrowed to half the lab's pod range, stays
// native; the other half is the VXLAN pool.
type family struct {
	title    string
	lab      lab.Families
	helmSet  []string
	vxlan    netip.Prefix
	poolAnno string
	// nativePool is the chart's pool of the family.
	nativePool string
}

var families = map[string]family{
	"ipv4": {
		title: "IPv4", lab: lab.IPv4Only,
		helmSet: []string{"ipPool.cidr=10.244.0.0/17"}, vxlan: netip.MustParsePrefix("10.244.128.0/17"),
		poolAnno: v1.AnnotationIPv4Pools, nativePool: lab.DefaultPoolName,
	},
	"ipv6": {
		title: "IPv6", lab: lab.IPv6Only,
		helmSet: []string{"ipv6Pool.cidr=fd00:10:244::/49"}, vxlan: netip.MustParsePrefix("fd00:10:244:8000::/49"),
		poolAnno: v1.AnnotationIPv6Pools, nativePool: lab.DefaultPool6Name,
	},
}

const vxlanPool = "bench-vxlan"

// result is one family's measurements.
type result struct {
	title              string
	native, vxlan      []lab.Transfer
	nativeMTU, vxlMTU  int
	nativeMSS, vxlMSS  int
	up                 time.Duration
	nativeGbps, vxGbps float64
	// Round trips a second, per round.
	nativeRR, vxlanRR []float64
}

func run(ctx context.Context, o options, out io.Writer) error {
	fmt.Fprintf(out, "pods on two nodes, native routing (BGP) against VXLAN (vxlanMode Always): %d alternating rounds of %v of bulk TCP, then of round trips\n", o.rounds, o.duration)
	var results []result
	for _, name := range strings.Split(o.families, ",") {
		r, err := measure(ctx, o, families[name])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, r)
	}
	fmt.Fprintf(out, "\n%-6s %-28s %-28s %s\n", "family", "native (MTU, MSS)", "VXLAN (MTU, MSS)", "VXLAN / native")
	for _, r := range results {
		ratios := make([]float64, len(r.native))
		for i := range r.native {
			ratios[i] = r.vxlan[i].Gbps() / r.native[i].Gbps()
		}
		fmt.Fprintf(out, "%-6s %-28s %-28s %.2f× (rounds %.2f–%.2f×)\n", r.title,
			fmt.Sprintf("%.2f Gbit/s (%d, %d)", r.nativeGbps, r.nativeMTU, r.nativeMSS),
			fmt.Sprintf("%.2f Gbit/s (%d, %d)", r.vxGbps, r.vxlMTU, r.vxlMSS),
			medianOf(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	fmt.Fprintf(out, "\n%-6s %-28s %-28s %s\n", "family", "native round trips", "VXLAN round trips", "VXLAN / native")
	for _, r := range results {
		ratios := make([]float64, len(r.nativeRR))
		for i := range r.nativeRR {
			ratios[i] = r.vxlanRR[i] / r.nativeRR[i]
		}
		n, v := medianOf(r.nativeRR), medianOf(r.vxlanRR)
		fmt.Fprintf(out, "%-6s %-28s %-28s %.2f× (rounds %.2f–%.2f×)\n", r.title,
			fmt.Sprintf("%.0f/s", n), fmt.Sprintf("%.0f/s", v), medianOf(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	fmt.Fprintln(out, "(medians of the rounds; the ratio is the median of each round's, the two measured back to back;")
	fmt.Fprintln(out, " goodput as the receiving pod counted it; round trips of one byte each way over one TCP connection, one at a time)")
	return nil
}

// measure runs one family's lab: two nodes with BGP, a native and a VXLAN pod on each, and
// the transfers from node-1's pods to node-2's.
func measure(ctx context.Context, o options, f family) (r result, err error) {
	r.title = f.title
	start := time.Now()
	l, err := lab.New(ctx, o.Lab(lab.Options{Families: f.lab, HelmSet: f.helmSet}))
	if err != nil {
		return r, err
	}
	defer func() {
		if err != nil {
			o.HoldFailed(ctx, l, err.Error())
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = errors.Join(err, l.Close(cctx))
	}()
	pool := &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: vxlanPool}, Spec: v1.IPPoolSpec{CIDR: f.vxlan.String(), VXLANMode: v1.VXLANModeAlways}}
	if _, err := l.Client.IPPools().Create(ctx, pool); err != nil {
		return r, fmt.Errorf("create IPPool %s: %w", vxlanPool, err)
	}
	if _, err := l.AddNodes(ctx, lab.NodeSpec{Name: "node-1"}, lab.NodeSpec{Name: "node-2"}); err != nil {
		return r, err
	}
	inVXLAN := map[string]string{f.poolAnno: `["` + vxlanPool + `"]`}
	inNative := map[string]string{f.poolAnno: `["` + f.nativePool + `"]`}
	pods, err := l.AddPods(ctx,
		lab.PodSpec{Name: "native-1", Node: "node-1", Annotations: inNative}, lab.PodSpec{Name: "native-2", Node: "node-2", Annotations: inNative},
		lab.PodSpec{Name: "vxlan-1", Node: "node-1", Annotations: inVXLAN}, lab.PodSpec{Name: "vxlan-2", Node: "node-2", Annotations: inVXLAN})
	if err != nil {
		return r, err
	}
	for _, p := range pods[2:] {
		if !f.vxlan.Contains(p.IP) {
			return r, fmt.Errorf("pod %s has %s, not an address of %s", p.Key(), p.IP, f.vxlan)
		}
	}
	native, vxlan := [2]*lab.Pod{pods[0], pods[1]}, [2]*lab.Pod{pods[2], pods[3]}
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	m := lab.PingMatrix(mctx, l.PodEndpoints(), l.PodEndpoints())
	cancel()
	if fails := m.Failures(); len(fails) > 0 {
		return r, fmt.Errorf("pods do not reach each other: %v", fails)
	}
	if err := requireRouteDev(ctx, native[0].Node, native[1].IP, "eth0"); err != nil {
		return r, err
	}
	if err := requireRouteDev(ctx, vxlan[0].Node, vxlan[1].IP, lab.VXLANDevice(ipfamily.OfAddr(vxlan[1].IP))); err != nil {
		return r, err
	}
	r.up = time.Since(start)
	if r.nativeMTU, err = podMTU(ctx, native[0]); err != nil {
		return r, err
	}
	if r.vxlMTU, err = podMTU(ctx, vxlan[0]); err != nil {
		return r, err
	}
	send := func(pair [2]*lab.Pod, d time.Duration) (lab.Transfer, error) {
		tctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
		defer cancel()
		return lab.SendTCP(tctx, pair[0].NS, pair[1].NS, netip.AddrPortFrom(pair[1].IP, 5201), lab.TransferOptions{Duration: d})
	}
	// A first short transfer each way warms the path (neighbour entries, the TCP metrics cache).
	for _, pair := range [][2]*lab.Pod{native, vxlan} {
		if _, err := send(pair, o.duration/4); err != nil {
			return r, err
		}
	}
	for i := range o.rounds {
		order := [][2]*lab.Pod{native, vxlan}
		if i%2 == 1 {
			order = [][2]*lab.Pod{vxlan, native}
		}
		for _, pair := range order {
			t, err := send(pair, o.duration)
			if err != nil {
				return r, err
			}
			if pair == native {
				r.native, r.nativeMSS = append(r.native, t), t.MSS
			} else {
				r.vxlan, r.vxlMSS = append(r.vxlan, t), t.MSS
			}
		}
		for _, pair := range order {
			rctx, cancel := context.WithTimeout(ctx, o.duration+30*time.Second)
			n, err := lab.RoundTrips(rctx, pair[0].NS, pair[1].NS, netip.AddrPortFrom(pair[1].IP, 5202), o.duration)
			cancel()
			if err != nil {
				return r, err
			}
			rate := float64(n) / o.duration.Seconds()
			if pair == native {
				r.nativeRR = append(r.nativeRR, rate)
			} else {
				r.vxlanRR = append(r.vxlanRR, rate)
			}
		}
	}
	r.nativeGbps, r.vxGbps = median(r.native), median(r.vxlan)
	return r, nil
}

// requireRouteDev checks that the node routes the pod address out of dev: the bench measures
// what it says it does.
func requireRouteDev(ctx context.Context, n *lab.Node, dst netip.Addr, dev string) error {
	out, err := n.Exec(ctx, "ip", "route", "get", dst.String())
	if err != nil {
		return err
	}
	if !strings.Contains(out, " dev "+dev+" ") {
		return fmt.Errorf("node %s routes %s %q, not out of %s", n.Name, dst, strings.TrimSpace(out), dev)
	}
	return nil
}

func podMTU(ctx context.Context, p *lab.Pod) (int, error) {
	link, err := lab.Link(ctx, p.NS, "eth0")
	return link.MTU, err
}

func median(ts []lab.Transfer) float64 {
	g := make([]float64, len(ts))
	for i, t := range ts {
		g[i] = t.Gbps()
	}
	return medianOf(g)
}

func medianOf(xs []float64) float64 {
	g := slices.Clone(xs)
	slices.Sort(g)
	if len(g)%2 == 1 {
		return g[len(g)/2]
	}
	return (g[len(g)/2-1] + g[len(g)/2]) / 2
}
