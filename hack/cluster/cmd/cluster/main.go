// Command cluster starts a real Kubernetes cluster with tabby (hack/cluster) and keeps it up
// until interrupted, or removes what a dead one left behind.
//
//	cluster up [-nodes 2] [-encap vxlan]   start, print how to use it, stop on Ctrl-C, SIGTERM or SIGHUP
//	cluster conformance [-encap vxlan]     start, run the upstream sig-network e2e subset, print the results
//	cluster anp-conformance -bin FILE -artifacts DIR [-encap vxlan]
//	                                      start, run network-policy-api's conformance suite, print the results
//	cluster clean           remove a dead cluster's processes, mounts, cgroups and namespaces
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/cluster"
	"github.com/tabbynet/tabby/internal/testenv"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cluster up [-nodes N] [-encap vxlan] | cluster conformance [-focus REGEX] [-encap vxlan] | cluster anp-conformance -bin FILE -artifacts DIR | cluster clean")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:], log)
	case "conformance":
		err = conformance(os.Args[2:], log)
	case "anp-conformance":
		err = anpConformance(os.Args[2:], log)
	case "clean":
		err = cluster.Cleanup(context.Background(), log)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

const encapUsage = `pod network encapsulation: "none" (native routes, BGP) or "vxlan" (the pool in VXLAN, BGP off)`

func up(args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	nodes := fs.Int("nodes", 2, "number of nodes")
	encap := fs.String("encap", "", encapUsage)
	noTabby := fs.Bool("no-tabby", false, "leave the chart uninstalled (helm install it yourself; nodes stay NotReady until a CNI is installed)")
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	return untilStopped(ctx, func(ctx context.Context) (func(context.Context) error, error) {
		c, err := cluster.Up(ctx, cluster.Options{Nodes: *nodes, NoTabby: *noTabby, Encap: *encap, Log: log})
		if err != nil {
			return nil, err
		}
		fmt.Printf(`
The cluster is up: %d nodes with tabby installed by helm (release %q in namespace tabby-system).

  export KUBECONFIG=%s
  %s get nodes -o wide
  %s get pods -A -o wide

Node logs (containerd, kubelet, kube-proxy) are under %s/nodes/<node>/root.
Stop it with Ctrl-C (or SIGTERM/SIGHUP); if this process is killed, run `+"`make cluster-clean`"+`.
`, len(c.Nodes), cluster.Release, c.Kubeconfig, testenv.Kubectl(), testenv.Kubectl(), c.Lab.Dir)
		return func(ctx context.Context) error {
			log.Info("stopping the cluster")
			return c.Close(ctx)
		}, nil
	})
}

// stopSignals stop `cluster up`: Ctrl-C, SIGTERM, a closed terminal.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// untilStopped starts what start starts, waits until ctx ends (Ctrl-C, SIGTERM, SIGHUP) and stops
// it. A stop that was asked for and went through is a success: the process exits 0, and `make
// cluster` ends without an error.
func untilStopped(ctx context.Context, start func(context.Context) (stop func(context.Context) error, err error)) error {
	stop, err := start(ctx)
	if err != nil {
		return err
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := stop(cctx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}

func conformance(args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("conformance", flag.ExitOnError)
	focus := fs.String("focus", "", "e2e focus regex (default: the sig-network subset in hack/cluster)")
	verbose := fs.Bool("v", false, "print e2e.test's output as it runs (else only on failure)")
	encap := fs.String("encap", "", encapUsage)
	podStart := fs.Int("podstart", 100, "after the tests, time this many pods started at once on one node, tabby against ptp + host-local (0: skip)")
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	c, err := cluster.Up(ctx, cluster.Options{Encap: *encap, Log: log})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Close(cctx); err != nil {
			log.Error("cluster teardown", "err", err)
		}
	}()
	fo := cluster.ConformanceFocus
	if *focus != "" {
		fo = []string{*focus}
	}
	var buf bytes.Buffer
	var out io.Writer = &buf
	if *verbose {
		out = os.Stdout
	}
	log.Info("running the upstream e2e tests", "focus", len(fo))
	res, err := c.RunConformance(ctx, fo, cluster.ConformanceSkip, out)
	if err != nil {
		os.Stdout.Write(buf.Bytes())
		return err
	}
	sum, ok := cluster.Summary(res)
	if !ok && !*verbose {
		os.Stdout.Write(buf.Bytes())
	}
	if *podStart > 0 {
		// Printed before the summary, whose last line is the verdict.
		if err := printPodStart(ctx, c, *podStart); err != nil {
			return err
		}
	}
	fmt.Print(sum)
	if !ok {
		return fmt.Errorf("conformance failed")
	}
	return nil
}

// printPodStart times count pods on the first node with tabby, then with the reference plugins,
// in this one cluster.
func printPodStart(ctx context.Context, c *cluster.Cluster, count int) error {
	node := c.Nodes[0]
	var got []cluster.PodStart
	for _, ref := range []bool{false, true} {
		r, err := c.MeasurePodStart(ctx, node, count, ref)
		if err != nil {
			return fmt.Errorf("pod start (%s): %w", r.CNI, err)
		}
		got = append(got, r)
	}
	fmt.Printf("pod start: %d pods created at once on %s until all Running with an address:\n", count, node.Name)
	for _, r := range got {
		fmt.Printf("  %-18s %6.2fs\n", r.CNI, r.Total.Seconds())
	}
	fmt.Printf("  tabby / reference: %.2f×\n", got[0].Total.Seconds()/got[1].Total.Seconds())
	return nil
}

func anpConformance(args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("anp-conformance", flag.ExitOnError)
	bin := fs.String("bin", "", "the suite's test binary (go test -c in hack/anpconformance)")
	artifacts := fs.String("artifacts", "", "where the conformance report and the suite's output go")
	version := fs.String("version", "dev", "tabby's version, for the report")
	verbose := fs.Bool("v", false, "print the suite's output as it runs (else only on failure)")
	encap := fs.String("encap", "", encapUsage)
	_ = fs.Parse(args)
	if *bin == "" || *artifacts == "" {
		return fmt.Errorf("anp-conformance: -bin and -artifacts are required")
	}
	if err := os.MkdirAll(*artifacts, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	c, err := cluster.Up(ctx, cluster.Options{Encap: *encap, Log: log})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Close(cctx); err != nil {
			log.Error("cluster teardown", "err", err)
		}
	}()
	if err := c.PrepareANPConformance(ctx); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(*artifacts, "anp-conformance.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	var buf bytes.Buffer
	out := io.MultiWriter(logFile, &buf)
	if *verbose {
		out = io.MultiWriter(logFile, os.Stdout)
	}
	report := filepath.Join(*artifacts, "anp-conformance-report.yaml")
	log.Info("running network-policy-api's conformance suite", "profile", cluster.ANPProfile, "features", cluster.ANPFeatures)
	res, err := c.RunANPConformance(ctx, *bin, report, *version, out)
	if err != nil {
		os.Stdout.Write(buf.Bytes())
		return err
	}
	sum, ok := cluster.SummaryOf("anp-conformance", res)
	if !ok && !*verbose {
		os.Stdout.Write(buf.Bytes())
	}
	fmt.Printf("report: %s\nlog: %s\n", report, logFile.Name())
	if n := cluster.SCTPFailures(res); n > 0 {
		fmt.Printf("%d of the failed tests failed only at SCTP probes (no SCTP in this kernel; a subtest stops at its first failed probe)\n", n)
	}
	fmt.Print(sum)
	if !ok {
		return fmt.Errorf("anp conformance failed")
	}
	return nil
}
