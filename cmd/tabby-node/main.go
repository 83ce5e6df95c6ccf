// Command tabby-node is tabby's per-node agent (felix + bird + the IPAM service); see package node.
// `tabby-node install-cni` is the DaemonSet's init container step.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/internal/version"
	"github.com/tabbynet/tabby/node"
	"github.com/tabbynet/tabby/node/installcni"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "install-cni" {
		os.Exit(installCNI(os.Args[2:]))
	}
	var cfg node.Config
	var logLevel string
	fs := flag.NewFlagSet("tabby-node", flag.ExitOnError)
	fs.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's Kubernetes name (default $NODE_NAME)")
	fs.StringVar(&cfg.Namespace, "namespace", envOr("POD_NAMESPACE", "tabby-system"), "namespace of the Secrets BGP passwords refer to")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&cfg.BGPAddress, "bgp-address", "", "BGP address detection: cidr=CIDR, interface=REGEX, can-reach=IP (default: the interface holding the Node's InternalIP)")
	fs.StringVar(&cfg.HealthAddr, "health-addr", ":9099", "liveness/readiness HTTP address (/livez, /readyz); empty disables")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", ":9091", "Prometheus metrics HTTP address (/metrics); empty disables")
	fs.StringVar(&cfg.RunDir, "run-dir", "/var/run/tabby", "directory of the ipam.sock and bird.sock unix sockets")
	fs.StringVar(&cfg.GoBGPAPI, "gobgp-api", "127.0.0.1:50051", "GoBGP's own gRPC API (loopback only; empty disables)")
	fs.IntVar(&cfg.MTU, "mtu", 0, "uplink MTU override (0: detect)")
	fs.StringVar(&cfg.Shutdown, "shutdown", "restart", "on SIGTERM: restart (peers keep routes: graceful restart) or final (withdraw everything)")
	fs.DurationVar(&cfg.ResyncInterval, "resync-interval", 90*time.Second, "felix's periodic full resync")
	fs.DurationVar(&cfg.GCInterval, "ipam-gc-interval", time.Minute, "how often IPAM garbage collection runs")
	fs.DurationVar(&cfg.GCGrace, "ipam-gc-grace", 5*time.Minute, "how long an allocation must look orphaned before GC releases it")
	fs.DurationVar(&cfg.WorkloadGrace, "workload-grace", 10*time.Second, "how long felix keeps a CNI-made route it has not yet learned of")
	fs.StringVar(&cfg.CNIKubeconfig, "cni-kubeconfig", "", "the CNI plugins' kubeconfig (host mount) to keep fresh as the token rotates; empty: off")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go profiles at /debug/pprof on the metrics address")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	showVersion := fs.Bool("version", false, "print the version and exit")
	_ = fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	// A long-lived agent with a small live heap: collect at 50% growth instead of 100% (unless
	// the operator set GOGC), which keeps RSS low at a CPU cost that is noise at idle.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	log := newLogger(logLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("tabby-node starting", "version", version.Version, "node", cfg.NodeName)
	if err := node.Run(ctx, cfg, log); err != nil {
		log.Error("tabby-node failed", "error", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// installCNI is the DaemonSet's init container: install the CNI binaries and configuration.
func installCNI(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := installcni.Main(ctx, args); err != nil {
		fmt.Fprintln(os.Stderr, "tabby-node install-cni:", err)
		return 1
	}
	return 0
}
