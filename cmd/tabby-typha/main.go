// Command tabby-typha is tabby's fan-out tier: one watch of the API server for each cluster-wide
// kind, served to every tabby-node; see package typha.
package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/internal/cli"
	"github.com/tabbynet/tabby/internal/version"
	"github.com/tabbynet/tabby/typha"
)

func main() {
	os.Exit(cli.Main(newCommand(), os.Args[1:]))
}

func newCommand() *cobra.Command {
	var cfg typha.Config
	var logLevel string
	root := &cobra.Command{
		Use:   "tabby-typha",
		Short: "tabby's fan-out tier: one watch of the API server, served to every tabby-node",
		Long: `tabby-typha watches the cluster-wide kinds every tabby-node reads (Nodes, Pods, Namespaces,
NetworkPolicies, IPPools, IPAMBlocks, BGPConfigurations, BGPPeers) and serves them to the agents
in the API server's own list and watch format, each event encoded once for all of them. Agents
present their service account token; tabby-typha checks it, and their right to list and watch,
with the API server.`,
		Version:       version.Version,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := cli.Logger(logLevel)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			log.Info("tabby-typha starting", "version", version.Version)
			return typha.Run(ctx, cfg, log)
		},
	}
	fs := root.Flags()
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&cfg.Listen, "listen", ":5473", "address the agents connect to (TLS)")
	fs.StringVar(&cfg.CertFile, "tls-cert-file", "", "serving certificate (PEM), issued to the name agents verify (--typha-server-name)")
	fs.StringVar(&cfg.KeyFile, "tls-key-file", "", "the certificate's private key (PEM)")
	fs.StringVar(&cfg.HealthAddr, "health-addr", ":9098", "liveness/readiness HTTP address (/livez, /readyz); empty disables")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", ":9093", "Prometheus /metrics address; empty disables")
	fs.DurationVar(&cfg.MaxConnAge, "max-connection-age", 15*time.Minute, "close an agent's connection at a random age between this and twice it, so that agents spread over the replicas again after one restarted (they resume where they were); 0: never")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return root
}
