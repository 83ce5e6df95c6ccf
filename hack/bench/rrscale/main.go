// Command rrscale benchmarks tabby's route reflectors at cluster scale: two real tabby-node
// reflectors (hack/lab: a real kube-apiserver and etcd, IPv6-only nodes, mesh off, Calico-style
// BGPPeers) with N clients (default 1000) that each announce one block, and, as the reference,
// BIRD2 as the same two reflectors in the same namespaces with the same clients. The clients
// are a light BGP injector in one namespace, one address and router ID per client, learned by
// the reflectors from N Node objects. It prints the figures side by side with their targets.
// Everything it makes is removed at the end, on failure and on Ctrl-C.
// Run as root: go run -C hack ./bench/rrscale -clients=50 (a quick run).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tabbynet/tabby/hack/bench/benchutil"
)

type options struct {
	clients      int
	samples      int
	idle         time.Duration
	timeout      time.Duration
	settle       time.Duration
	holdTime     time.Duration
	bird2        bool
	profile      string
	profileFor   time.Duration
	heapProfile  string
	closeTimeout time.Duration
	benchutil.LabFlags
}

func main() {
	var o options
	o.Register()
	flag.IntVar(&o.clients, "clients", 1000, "BGP clients of the two reflectors, one block each")
	flag.IntVar(&o.samples, "samples", 20, "new blocks measured one at a time")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "idle window for the reflectors' CPU after convergence")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on convergence after this long")
	flag.DurationVar(&o.settle, "settle", 10*time.Second, "after convergence, wait this long for every block on every session (both reflectors)")
	flag.DurationVar(&o.holdTime, "hold-time", 0, "BGP hold time between nodes for both reflector implementations (0: tabby's default, 9s)")
	flag.BoolVar(&o.bird2, "bird2", true, "measure BIRD2 as the reflectors too")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the first tabby reflector from its start to this file")
	flag.DurationVar(&o.profileFor, "cpuprofile-for", 30*time.Second, "length of that profile")
	flag.StringVar(&o.heapProfile, "heapprofile", "", "write a heap profile of the first tabby reflector after the idle window to this file (and FILE.txt: as text, with the runtime's memory statistics; FILE.goroutines.txt: its goroutines)")
	flag.Parse()
	o.closeTimeout = time.Minute
	benchutil.Main("rrscale", validate(o), func(ctx context.Context) error { return run(ctx, o, os.Stdout) })
}

func validate(o options) error {
	if err := benchutil.NeedRoot("bench-scale"); err != nil {
		return err
	}
	switch {
	case o.clients < 2 || o.clients > 5000:
		return fmt.Errorf("-clients=%d: want 2..5000", o.clients)
	case o.samples < 1 || o.samples > 1000:
		return fmt.Errorf("-samples=%d: want 1..1000", o.samples)
	case o.idle < time.Second:
		return fmt.Errorf("-idle=%v: want at least 1s", o.idle)
	case o.holdTime != 0 && (o.holdTime < 3*time.Second || o.holdTime > 65535*time.Second):
		return fmt.Errorf("-hold-time=%v: want 3s..65535s", o.holdTime)
	case o.profileFor < time.Second:
		return fmt.Errorf("-cpuprofile-for=%v: want at least 1s", o.profileFor)
	}
	return nil
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	start := time.Now()
	w, err := startWorld(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := w.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("remove lab: %w", cerr))
		}
	}()
	setup := time.Since(start)
	tabby := w.tabbyPhase(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var bird *result
	if o.bird2 {
		b := w.bird2Phase(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		bird = &b
	}
	report(out, o, tabby, bird, setup, time.Since(start))
	if tabby.err != nil {
		return fmt.Errorf("tabby: %w", tabby.err)
	}
	return nil
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
func mb(kb int) string            { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }

func report(w io.Writer, o options, t result, b *result, setup, took time.Duration) {
	n := o.clients
	fmt.Fprintf(w, "How it was measured:\n")
	fmt.Fprintf(w, "  lab: real kube-apiserver+etcd, IPv6-only nodes, mesh off, BGPPeers rr-clients/rr-mesh; 2 reflector nodes (cluster ID %s)\n", rrClusterID)
	fmt.Fprintf(w, "  clients: %d Node objects (tabby.dev/bgp-ipv6-address) and one injector namespace on the same switch speaking BGP from\n", n)
	fmt.Fprintf(w, "    %d addresses (2001:db8:100::1:1 up), distinct router IDs, each announcing one /122 of fd00:10:244::/48; passive,\n", n)
	fmt.Fprintf(w, "    as tabby clients above their reflector's address are; every reflected route timestamped as it is read off the wire\n")
	fmt.Fprintf(w, "  start = both reflector processes started (clients' Node objects written and injector listening before)\n")
	fmt.Fprintf(w, "  converged = all %d sessions established and every client holds all %d other blocks (from either reflector);\n", 2*n, n-1)
	fmt.Fprintf(w, "    then up to %v more for every block on every session (each client from both reflectors)\n", o.settle)
	fmt.Fprintf(w, "  RR cost: the larger of the two reflectors; CPU = utime+stime from start to convergence, peak = VmHWM,\n")
	fmt.Fprintf(w, "    idle = the %v after convergence (VmRSS at its end)\n", o.idle)
	fmt.Fprintf(w, "  new block: %d samples, one /122 announced by one client on both sessions, until the last of the %d others holds it\n", o.samples, n-1)
	fmt.Fprintf(w, "  withdrawn: each sample's block, 200 ms after it arrived, withdrawn by its owner on both sessions, until no client holds it from\n")
	fmt.Fprintf(w, "    either reflector (each client's time: its last session's withdrawal, as read off the wire)\n")
	fmt.Fprintf(w, "  status: after the samples, the first reflector's sessions with their route counts, %d calls one after the other: tabby: its BGP\n", statusCalls)
	fmt.Fprintf(w, "    status socket, as `tabbyctl node status` asks it; BIRD2: `birdc show protocols all`; metrics scrape: GET /metrics (tabby)\n")
	fmt.Fprintf(w, "  stop: SIGTERM to both reflectors after the samples until both exited (tabby-node: graceful, restart-style: a Cease to every client first)\n")
	fmt.Fprintf(w, "  BIRD2 (Debian bird 2.0) as both reflectors in the same namespaces: rr client + the same cluster ID, sibling as a plain iBGP\n")
	fmt.Fprintf(w, "    peer, hold %v / keepalive %v, connect delay 1 s, kernel export of all routes (tabby's felix installs them too)\n\n", o.hold9(), o.hold9()/3)

	fmt.Fprintf(w, "%-44s %14s %14s %8s  %-24s %s\n", "figure", "tabby", "BIRD2", "ratio", "target", "")
	row := func(name, a, bv string, ratio float64, target, verdict string) {
		r := "-"
		if ratio > 0 {
			r = fmt.Sprintf("%.2f×", ratio)
		}
		fmt.Fprintf(w, "%-44s %14s %14s %8s  %-24s %s\n", name, a, bv, r, target, verdict)
	}
	if b == nil {
		b = &result{err: errors.New("not run (-bird2=false)")}
	}
	durRow := func(name string, get func(*result) time.Duration, f func(time.Duration) string, target time.Duration, targetText string) {
		tv, bv := "-", "-" // not measured
		if get(&t) > 0 {
			tv = f(get(&t))
		}
		if get(b) > 0 {
			bv = f(get(b))
		}
		ratio := 0.0
		if get(&t) > 0 && get(b) > 0 {
			ratio = float64(get(&t)) / float64(get(b))
		}
		verdict := ""
		if targetText != "" {
			met := get(&t) > 0 && get(&t) < target
			if ratio > 0 {
				met = met && ratio <= 2
			}
			verdict = map[bool]string{true: "ok", false: "MISSED"}[met]
			if ratio == 0 && get(&t) > 0 && get(&t) < target {
				verdict = "ok (no BIRD2 ratio)"
			}
		}
		row(name, tv, bv, ratio, targetText, verdict)
	}
	durRow(fmt.Sprintf("all %d sessions established", 2*n), func(r *result) time.Duration { return r.sessionsUp }, secs, 0, "")
	{
		resets := func(r *result) string {
			if r.sessionsUp == 0 {
				return "-"
			}
			return fmt.Sprint(r.resets)
		}
		verdict := ""
		if t.sessionsUp > 0 {
			verdict = map[bool]string{true: "ok", false: "MISSED"}[t.resets == 0]
		}
		row("sessions reset until converged", resets(&t), resets(b), 0, "0", verdict)
		byClients := func(r *result) string {
			if r.sessionsUp == 0 {
				return "-"
			}
			return fmt.Sprint(r.clientHold)
		}
		row("… by a client's hold timer (reflector silent)", byClients(&t), byClients(b), 0, "", "")
		for _, r := range []struct {
			name string
			r    *result
		}{{"tabby", &t}, {"BIRD2", b}} {
			if r.r != nil && r.r.resetWhy != "" {
				fmt.Fprintf(w, "    %s's sessions ended, as the clients saw it: %s\n", r.name, r.r.resetWhy)
			}
		}
	}
	if t.routesUp < 0 || b.routesUp < 0 {
		show := func(r *result) string {
			if r.routesUp < 0 {
				return fmt.Sprintf("%d never", r.missingCovered)
			}
			if r.routesUp > 0 {
				return secs(r.routesUp)
			}
			return "-"
		}
		verdict := ""
		if t.routesUp < 0 {
			verdict = "MISSED: some clients never got some blocks (below)"
		}
		row("all routes reflected to all clients", show(&t), show(b), 0, "< 60 s, ≤ 2× BIRD2", verdict)
	} else {
		durRow("all routes reflected to all clients", func(r *result) time.Duration { return r.routesUp }, secs, 60*time.Second, "< 60 s, ≤ 2× BIRD2")
	}
	durRow("99.9% of routes reflected to the clients", func(r *result) time.Duration { return r.nearlyUp }, secs, 0, "")
	maxDur := func(ds []time.Duration) time.Duration { return benchutil.Pct(ds, 100) }
	{
		both := func(r *result) string {
			switch {
			case r.bothUp > 0:
				return secs(r.bothUp)
			case r.bothUp < 0:
				return fmt.Sprintf("%d missing", r.missingBoth)
			}
			return "-"
		}
		verdict := ""
		if t.bothUp < 0 {
			verdict = fmt.Sprintf("MISSED: %d (client, reflector, block) routes never sent (below)", t.missingBoth)
		}
		row("… from both reflectors on every session", both(&t), both(b), 0, "all", verdict)
	}
	durRow("RR CPU, start to converged/timeout (max)", func(r *result) time.Duration { return maxDur(r.convCPU) }, secs, 0, "")
	kbRow := func(name string, get func(*result) []int) {
		tv, bv, ratio := "-", "-", 0.0
		tm, bm := maxOf(get(&t)), maxOf(get(b))
		if tm > 0 {
			tv = mb(tm)
		}
		if bm > 0 {
			bv = mb(bm)
		}
		if tm > 0 && bm > 0 {
			ratio = float64(tm) / float64(bm)
		}
		row(name, tv, bv, ratio, "", "")
	}
	kbRow("RR peak RSS until then (VmHWM, max)", func(r *result) []int { return r.convPeak })
	kbRow("RR RSS at idle (max of 2)", func(r *result) []int { return r.idleRSS })
	kbRow("… of which its own (RssAnon, not the binary)", func(r *result) []int { return r.idleAnon })
	{
		tc, bc := maxOf(t.idleCPU), maxOf(b.idleCPU)
		tv, bv, ratio := "-", "-", 0.0
		if len(t.idleCPU) > 0 {
			tv = fmt.Sprintf("%.2f %%", tc)
		}
		if len(b.idleCPU) > 0 {
			bv = fmt.Sprintf("%.2f %%", bc)
		}
		if tc > 0 && bc > 0 {
			ratio = tc / bc
		}
		row(fmt.Sprintf("RR CPU at idle, %d sessions (max of 2)", n+1), tv, bv, ratio, "", "")
	}
	pct := func(p int) func(*result) time.Duration {
		return func(r *result) time.Duration { return benchutil.Pct(r.last, p) }
	}
	if len(t.last) > 0 || len(b.last) > 0 {
		durRow(fmt.Sprintf("new block → all %d clients p50", n-1), pct(50), benchutil.Ms, 0, "")
		if len(t.last) < o.samples {
			tv := "-"
			if len(t.last) > 0 {
				tv = benchutil.Ms(pct(99)(&t))
			}
			row(fmt.Sprintf("new block → all %d clients p99", n-1), tv, benchutil.Ms(pct(99)(b)), 0, "p99 < 1 s, ≤ 2× BIRD2",
				fmt.Sprintf("MISSED: %d of %d samples arrived (below)", len(t.last), o.samples))
		} else {
			durRow(fmt.Sprintf("new block → all %d clients p99", n-1), pct(99), benchutil.Ms, time.Second, "p99 < 1 s, ≤ 2× BIRD2")
		}
		each := func(p int) func(*result) time.Duration {
			return func(r *result) time.Duration { return benchutil.Pct(r.each, p) }
		}
		durRow("new block → each client p50", each(50), benchutil.Ms, 0, "")
	}
	if len(t.gone) > 0 || len(b.gone) > 0 {
		gone := func(p int) func(*result) time.Duration {
			return func(r *result) time.Duration { return benchutil.Pct(r.gone, p) }
		}
		durRow(fmt.Sprintf("block withdrawn → gone at all %d clients p50", n-1), gone(50), benchutil.Ms, 0, "")
		durRow(fmt.Sprintf("block withdrawn → gone at all %d clients p99", n-1), gone(99), benchutil.Ms, time.Second, "≤ 2× BIRD2")
		goneEach := func(p int) func(*result) time.Duration {
			return func(r *result) time.Duration { return benchutil.Pct(r.goneEach, p) }
		}
		durRow("block withdrawn → gone at each client p50", goneEach(50), benchutil.Ms, 0, "")
	}
	p50 := func(get func(*result) []time.Duration) func(*result) time.Duration {
		return func(r *result) time.Duration { return benchutil.Pct(get(r), 50) }
	}
	durRow(fmt.Sprintf("status of a reflector, p50 of %d", statusCalls), p50(func(r *result) []time.Duration { return r.status }), benchutil.Ms, 0, "")
	durRow(fmt.Sprintf("metrics scrape of a reflector, p50 of %d", statusCalls), p50(func(r *result) []time.Duration { return r.scrape }), benchutil.Ms, 0, "")
	durRow("RR stop, SIGTERM → both exited (tabby: graceful)", func(r *result) time.Duration { return r.stopped }, secs, 0, "")
	for _, e := range []struct {
		name string
		r    *result
	}{{"tabby", &t}, {"BIRD2", b}} {
		switch {
		case e.r.routesUp < 0:
			fmt.Fprintf(w, "\n%s: %d (client, block) pairs never arrived from either reflector (no progress for %v): %s", e.name, e.r.missingCovered, o.settle, e.r.missingWhat)
		case e.r.missingWhat != "":
			fmt.Fprintf(w, "\n%s: %d (client, reflector, block) routes not sent %v after convergence: %s", e.name, e.r.missingBoth, o.settle, e.r.missingWhat)
		}
		if e.r.err != nil {
			fmt.Fprintf(w, "\n%s: %v", e.name, e.r.err)
		}
		for _, n := range e.r.notes {
			fmt.Fprintf(w, "\n%s: %s", e.name, n)
		}
		if e.r.stopErr != nil {
			fmt.Fprintf(w, "\n%s: stopping the reflectors: %s", e.name, firstLines(e.r.stopErr))
		}
	}
	fmt.Fprintf(w, "\nsetup (lab, %d Node objects, injector): %s; whole benchmark: %s\n", n, setup.Round(time.Second), took.Round(time.Second))
}

func maxOf[T int | float64](xs []T) T {
	var m T
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// firstLines keeps an error's own lines, not the log tails the lab appends.
func firstLines(err error) string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l, _, _ = strings.Cut(l, "; log tail:")
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "time=") && !strings.HasPrefix(l, "====") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// hold9 is the hold time between nodes: the flag's, else tabby's default.
func (o options) hold9() time.Duration {
	if o.holdTime > 0 {
		return o.holdTime
	}
	return 9 * time.Second
}
