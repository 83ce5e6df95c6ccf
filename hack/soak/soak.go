// Package soak runs a lab for a long time under churn and watches for what only time shows:
// memory, goroutines, file descriptors, rules, set members, routes, conntrack entries or IPAM
// addresses that keep growing, and dataplane counts that drift from the datastore's truth.
//
// Every round churns (a churned client per node replaced, a NetworkPolicy created and
// removed; by turns a tabby-node restarted or crashed, which flaps its BGP sessions; now and
// then kube-apiserver restarted), then waits for a quiet point at which every node's routes,
// rules and sets, and IPAM, must equal what the datastore says, and the clients must reach the
// web pods; then samples tabby-node and tabby-typha. At the end the samples go to a CSV and a
// PNG plot, and every series is judged by Leaks.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

// Options describe a soak.
type Options struct {
	Duration time.Duration // how long to churn (the soak then reports)
	Interval time.Duration // a round: churn, settle, sample
	// FlapEvery and APIRestartEvery space the BGP flaps (tabby-node restarts) and the
	// kube-apiserver restarts.
	FlapEvery, APIRestartEvery time.Duration
	// Settle bounds the wait for a quiet point after a round's churn: past it, the round's
	// differences from the datastore's truth are drifts.
	Settle time.Duration
	Nodes  int
	Typha  int
	Out    string // artifacts directory: samples.csv, soak.png, summary.txt
	Log    *slog.Logger
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.FlapEvery <= 0 {
		o.FlapEvery = 3 * o.Interval
	}
	if o.APIRestartEvery <= 0 {
		o.APIRestartEvery = 5 * time.Minute
	}
	if o.Settle <= 0 {
		o.Settle = 2 * time.Minute
	}
	if o.Nodes <= 0 {
		o.Nodes = 3
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Result is what a soak found.
type Result struct {
	Rounds   int
	Flaps    int
	Restarts int // kube-apiserver restarts
	Points   []Point
	Growths  []Growth
	Short    []string // series too short to judge
	Drifts   []string // quiet points that never came: the difference from the truth, by time
	Errors   []string // churn steps that failed
}

// Failed tells whether the soak found a leak, a drift or a failed step.
func (r *Result) Failed() bool { return len(r.Growths)+len(r.Drifts)+len(r.Errors) > 0 }

type soak struct {
	o     Options
	lab   *lab.Lab
	start time.Time
	flaps int
	res   Result
}

// Run builds a lab, soaks it for o.Duration and writes the artifacts; the error says why the
// soak failed (a leak, a drift, a failed step) after the artifacts are written.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("artifacts directory: %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	l, err := lab.New(lctx, lab.Options{Typha: o.Typha, Log: o.Log})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("start lab: %w", err)
	}
	s := &soak{o: o, lab: l}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := l.Close(cctx); err != nil {
			o.Log.Error("lab teardown", "err", err)
		}
	}()
	runErr := s.run(ctx)
	if runErr != nil && ctx.Err() != nil && s.res.Rounds > 0 {
		// Stopped (Ctrl-C, SIGTERM): what was sampled until then is judged.
		o.Log.Info("soak stopped early: judging the samples so far", "rounds", s.res.Rounds)
		runErr = nil
	}
	if runErr != nil {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		o.Log.Error("soak stopped", "err", runErr, "diagnostics", l.Diagnostics(dctx))
		cancel()
	}
	res := &s.res
	if err := s.writeArtifacts(); err != nil {
		return res, errors.Join(runErr, err)
	}
	if runErr != nil {
		return res, runErr
	}
	if res.Failed() {
		return res, fmt.Errorf("soak failed: %d growing series, %d drifts, %d failed steps (see %s)", len(res.Growths), len(res.Drifts), len(res.Errors), filepath.Join(o.Out, "summary.txt"))
	}
	return res, nil
}

func (s *soak) run(ctx context.Context) error {
	l, log := s.lab, s.o.Log
	names := make([]lab.NodeSpec, s.o.Nodes)
	for i := range names {
		names[i] = lab.NodeSpec{Name: fmt.Sprintf("node-%d", i+1)}
	}
	nodes, err := l.AddNodes(ctx, names...)
	if err != nil {
		return fmt.Errorf("add nodes: %w", err)
	}
	if _, err := l.Kube.NetworkingV1().NetworkPolicies(lab.PodNamespace).Create(ctx, standingPolicy(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the standing NetworkPolicy: %w", err)
	}
	if _, err := l.AddPods(ctx, append(basePods(nodes), churnPods(nodes, 0)...)...); err != nil {
		return fmt.Errorf("add pods: %w", err)
	}
	s.start = time.Now()
	if _, err := s.quiet(ctx, "start"); err != nil {
		return err
	}
	lastFlap, lastRestart := s.start, s.start
	end := s.start.Add(s.o.Duration)
	for round := 1; time.Now().Before(end); round++ {
		roundStart := time.Now()
		var did []string
		if err := s.churnRound(ctx, round); err != nil {
			s.stepFailed(err)
		}
		did = append(did, "pods and policy churned")
		if time.Since(lastFlap) >= s.o.FlapEvery {
			lastFlap = time.Now()
			what, err := s.flap(ctx)
			if err != nil {
				s.stepFailed(fmt.Errorf("%s: %w", what, err))
			}
			s.res.Flaps++
			did = append(did, what)
		}
		if time.Since(lastRestart) >= s.o.APIRestartEvery {
			lastRestart = time.Now()
			if err := s.restartAPIServer(ctx); err != nil {
				s.stepFailed(err)
			}
			s.res.Restarts++
			did = append(did, "kube-apiserver restarted")
		}
		s.res.Rounds = round
		settle, err := s.quiet(ctx, fmt.Sprintf("round %d", round))
		if err != nil {
			return err
		}
		log.Info("soak round", "round", round, "elapsed", time.Since(s.start).Round(time.Second), "did", strings.Join(did, ", "), "settled", settle.Round(time.Millisecond))
		// Rounds, and so samples, come at the pace of the interval, not of the churn.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(roundStart.Add(s.o.Interval))):
		}
	}
	return nil
}

func (s *soak) stepFailed(err error) {
	if errors.Is(err, context.Canceled) {
		return // the soak was stopped, not the step
	}
	msg := fmt.Sprintf("%s: %v", time.Since(s.start).Round(time.Second), err)
	s.res.Errors = append(s.res.Errors, msg)
	s.o.Log.Error("soak step failed", "err", err)
}

// quiet waits for the datastore's truth, records a drift if it does not come within Settle,
// and samples; it returns how long the truth took to come.
func (s *soak) quiet(ctx context.Context, when string) (time.Duration, error) {
	settleStart := time.Now()
	var last error
	err := lab.Eventually(ctx, s.o.Settle, func(ctx context.Context) error {
		last = s.truth(ctx)
		return last
	})
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		msg := fmt.Sprintf("%s (%s): not at the datastore's truth after %s: %v", when, time.Since(s.start).Round(time.Second), s.o.Settle, last)
		s.res.Drifts = append(s.res.Drifts, msg)
		s.o.Log.Error("drift", "when", when, "err", last)
	}
	settled := time.Since(settleStart)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pts, err := takeSample(sctx, s.lab, time.Since(s.start))
	if err != nil {
		s.stepFailed(fmt.Errorf("sample at %s: %w", when, err))
		return settled, nil
	}
	s.res.Points = append(s.res.Points, pts...)
	// The artifacts as of now: a soak of days can be looked at while it runs, and what it
	// sampled survives a crash of the soak itself.
	if err := s.writeArtifacts(); err != nil {
		return settled, err
	}
	return settled, nil
}

// truth compares the cluster with the datastore: every node's routes with its and the other
// nodes' blocks and pods, every node's rules and ipsets with the policies and the pods they
// select (tabbyctl policy check), IPAM with the pods (tabbyctl ipam check, and one address in
// use per pod address), and reachability of the web pods from every client.
func (s *soak) truth(ctx context.Context) error {
	l := s.lab
	for _, n := range l.Nodes() {
		if err := l.CheckRoutes(ctx, n); err != nil {
			return err
		}
		if out, err := l.Tabbyctl(ctx, "policy", "check", "--node", n.Name, "--netns", n.NS); err != nil {
			return fmt.Errorf("tabbyctl policy check on %s: %w\n%s", n.Name, err, out)
		}
	}
	if out, err := l.Tabbyctl(ctx, "ipam", "check"); err != nil {
		return fmt.Errorf("tabbyctl ipam check: %w\n%s", err, out)
	}
	want := 0
	var clients, webs []lab.Endpoint
	for _, p := range l.Pods() {
		want += len(p.Addrs())
		switch p.Labels()[labelApp] {
		case appWeb:
			webs = append(webs, p.Endpoint())
		default:
			clients = append(clients, p.Endpoint())
		}
	}
	used, err := ipamInUse(ctx, l)
	if err != nil {
		return err
	}
	if used != want {
		return fmt.Errorf("IPAM: %d addresses in use, the pods hold %d", used, want)
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if f := lab.PingMatrix(pctx, clients, webs).Failures(); len(f) > 0 {
		return fmt.Errorf("clients to web pods: %d pairs unreachable: %s", len(f), strings.Join(f, "; "))
	}
	return nil
}

// writeArtifacts judges the samples so far and writes samples.csv, soak.png and summary.txt.
func (s *soak) writeArtifacts() error {
	res := &s.res
	res.Growths, res.Short = Leaks(ToSeries(res.Points))
	f, err := os.Create(filepath.Join(s.o.Out, "samples.csv"))
	if err != nil {
		return err
	}
	if err := WriteCSV(f, res.Points); err != nil {
		f.Close()
		return fmt.Errorf("samples.csv: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := PlotPNG(filepath.Join(s.o.Out, "soak.png"), res.Points, s.o.Duration); err != nil {
		return fmt.Errorf("soak.png: %w", err)
	}
	sf, err := os.Create(filepath.Join(s.o.Out, "summary.txt"))
	if err != nil {
		return err
	}
	WriteSummary(sf, res)
	return sf.Close()
}

// WriteSummary reports a soak's verdict: rounds, faults, and every growth, drift and error.
func WriteSummary(w io.Writer, r *Result) {
	verdict := "flat: no growth, no drift"
	if r.Failed() {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "soak: %s\nrounds %d, tabby-node restarts (BGP flaps) %d, kube-apiserver restarts %d, samples %d\n", verdict, r.Rounds, r.Flaps, r.Restarts, len(r.Points))
	series := ToSeries(r.Points)
	fmt.Fprintf(w, "\n%-10s %-15s %10s %10s %10s %10s\n", "source", "metric", "first", "min", "max", "last")
	for _, s := range series {
		lo, hi := s.Values[0], s.Values[0]
		for _, v := range s.Values {
			lo, hi = min(lo, v), max(hi, v)
		}
		fmt.Fprintf(w, "%-10s %-15s %10.1f %10.1f %10.1f %10.1f\n", s.Source, s.Metric, s.Values[0], lo, hi, s.Values[len(s.Values)-1])
	}
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	var gs []string
	for _, g := range r.Growths {
		gs = append(gs, g.String())
	}
	section("growth (a leak, or not levelled off)", gs)
	section("drift from the datastore's truth", r.Drifts)
	section("failed steps", r.Errors)
	section(fmt.Sprintf("too short to judge (fewer than %d samples)", MinSamples), r.Short)
}
