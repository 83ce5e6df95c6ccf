// Command lab runs a tabby cluster in network namespaces on this machine.
//
//	go run -C hack ./lab/cmd/lab demo      # 3 nodes, 2 pods each, a ping matrix; Ctrl-C ends it
//	go run -C hack ./lab/cmd/lab --families dual demo   # the same, dual-stack: a matrix per family
//	go run -C hack ./lab/cmd/lab --encap vxlan demo     # no BGP; pods across nodes over VXLAN
//	go run -C hack ./lab/cmd/lab cleanup   # remove what a lab killed hard left behind (make demo-clean)
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/lab/cmd/lab/app"
)

func main() {
	fs := flag.NewFlagSet("lab", flag.ExitOnError)
	nodes := fs.Int("nodes", 3, "demo: number of nodes")
	pods := fs.Int("pods", 2, "demo: pods per node")
	stub := fs.Bool("stub", false, "demo: wire pods with the reference ptp/host-local plugins instead of tabby")
	families := fs.String("families", "ipv4", "demo: the pods' address families: ipv4, dual (an address of each) or ipv6 (IPv6 only)")
	typha := fs.Int("typha", 0, "demo: tabby-typha replicas the nodes watch through (0: the API server directly)")
	encap := fs.String("encap", "none", "demo: none (pods routed natively, BGP between the nodes) or vxlan (pools with vxlanMode Always, every node without BGP)")
	uiAddr := fs.String("ui", "127.0.0.1:8080", "demo: where to serve the web view of flows and BGP (\"\": nowhere)")
	verbose := fs.Bool("v", false, "debug logging")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: lab [flags] demo|cleanup\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	// A closed terminal (SIGHUP) ends the lab like Ctrl-C: everything is removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	fam, err := lab.ParseFamilies(*families)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(2)
	}
	vxlan, err := app.ParseEncap(*encap)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(2)
	}
	switch fs.Arg(0) {
	case "demo":
		err = app.Demo(ctx, os.Stdout, app.DemoOptions{Nodes: *nodes, PodsPerNode: *pods, Stub: *stub, Families: fam, Typha: *typha, VXLAN: vxlan, UI: *uiAddr})
	case "cleanup":
		err = app.Cleanup(ctx, os.Stdout)
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}
