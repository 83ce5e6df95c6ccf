// Command tabby-node is tabby's per-node agent (felix + bird + the IPAM service); see package node.
// `tabby-node install-cni` is the DaemonSet's init container step.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/internal/cli"
	"github.com/tabbynet/tabby/internal/memlimit"
	"github.com/tabbynet/tabby/internal/version"
	"github.com/tabbynet/tabby/node"
	"github.com/tabbynet/tabby/node/installcni"
)

func main() {
	os.Exit(cli.Main(newCommand(), os.Args[1:]))
}

// newCommand is the agent's command line: the agent itself, and install-cni.
func newCommand() *cobra.Command {
	var cfg node.Config
	var logLevel string
	root := &cobra.Command{
		Use:   "tabby-node",
		Short: "tabby's per-node agent: the dataplane (felix), BGP (bird) and the node's IPAM service",
		Long: `tabby-node runs on every node (the chart's DaemonSet, host network): felix programs the
node's routes, tunl0, NAT outgoing and sysctls; bird runs the node's BGP sessions; the IPAM
service answers the tabby CNI plugin on a unix socket.`,
		Version:       version.Version,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A long-lived agent with a small live heap: collect at half the growth Go's default
			// allows (unless the operator set GOGC), which keeps RSS low at a CPU cost that is
			// noise at idle.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(50)
			}
			log, err := cli.Logger(logLevel)
			if err != nil {
				return err
			}
			// Near the container's memory limit, collect harder rather than be killed: a
			// route reflector's memory grows with its clients.
			switch lim, from, err := memlimit.Apply(); {
			case err != nil:
				log.Warn("no Go memory limit from the cgroup", "err", err)
			case from == "GOMEMLIMIT":
				log.Info("Go memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
			case lim > 0:
				log.Info("Go memory limit from the cgroup", "bytes", lim, "share", memlimit.Share, "from", from)
			default:
				log.Info("no Go memory limit: the cgroup has none", "from", from)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			log.Info("tabby-node starting", "version", version.Version, "node", cfg.NodeName)
			return node.Run(ctx, cfg, log)
		},
	}
	groups := agentFlags(&cfg, &logLevel)
	for _, g := range groups {
		root.Flags().AddFlagSet(g.flags)
	}
	root.SetUsageFunc(groupedUsage(groups))
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see tabby-node --help)", err)
	})
	root.AddCommand(&cobra.Command{
		Use:   "install-cni [flags]",
		Short: "Install the CNI binaries and configuration on the host (the DaemonSet's init container)",
		// installcni parses its own flags (tabby-node install-cni --help lists them).
		DisableFlagParsing: true,
		SilenceUsage:       true,
		SilenceErrors:      true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := installcni.Main(ctx, args); err != nil {
				return fmt.Errorf("install-cni: %w", err)
			}
			return nil
		},
	})
	return root
}
