// Command chaos runs tabby's fault campaign on a lab (`make chaos`) and prints the measured
// table in markdown; it exits 1 when a fault's outcome breaks its expectation.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/hack/chaos"
)

func main() {
	outage := flag.Duration("outage", 2*time.Minute, "how long the API server stays stopped")
	rounds := flag.Int("rounds", 3, "injections per window of the repeatable faults (agent, API server kills)")
	flap := flag.Duration("flap", 3*time.Second, "how long a node's uplink stays down")
	typha := flag.Int("typha", 2, "tabby-typha replicas in the lab")
	only := flag.String("faults", "", "comma-separated words: run only the faults whose names contain one")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	var words []string
	if *only != "" {
		words = strings.Split(*only, ",")
	}
	faults := chaos.Select(chaos.Faults(chaos.Settings{Outage: *outage, Rounds: *rounds, Flap: *flap, Hold: 9 * time.Second}), words...)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rs, err := chaos.RunTopologies(ctx, chaos.Options{Typha: *typha, Log: log}, faults)
	fmt.Print(chaos.Table(rs))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	for _, r := range rs {
		if !r.OK() {
			os.Exit(1)
		}
	}
}
