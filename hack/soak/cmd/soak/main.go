// Command soak runs the lab under churn for a long time and fails on a leak or a drift from
// the datastore's truth (see package soak); `make soak DURATION=1h SOAK_INTERVAL=1m`.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/soak"
)

func main() {
	var o soak.Options
	flag.DurationVar(&o.Duration, "duration", time.Hour, "how long to churn")
	flag.DurationVar(&o.Interval, "interval", time.Minute, "a round: churn, wait for the datastore's truth, sample")
	flag.DurationVar(&o.FlapEvery, "flap-every", 0, "restart (by turns crash) one node's tabby-node this often (default 3 intervals)")
	flag.DurationVar(&o.APIRestartEvery, "apiserver-restart-every", 5*time.Minute, "restart kube-apiserver this often")
	flag.DurationVar(&o.Settle, "settle", 2*time.Minute, "longest wait for the datastore's truth after a round")
	flag.IntVar(&o.Nodes, "nodes", 3, "nodes")
	flag.IntVar(&o.Typha, "typha", 1, "tabby-typha replicas the nodes watch through")
	flag.StringVar(&o.Out, "out", "_artifacts/soak", "artifacts directory (samples.csv, soak.png, summary.txt)")
	verbose := flag.Bool("v", false, "debug logging")
	flag.Parse()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	res, err := soak.Run(ctx, o)
	if res != nil {
		soak.WriteSummary(os.Stdout, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}
