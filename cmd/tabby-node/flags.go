package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/node"
)

// flagGroup is one section of `tabby-node --help`, as Kubernetes components group theirs.
type flagGroup struct {
	name  string
	flags *pflag.FlagSet
}

// agentFlags defines every flag of the agent, by section. Names and defaults are the ones the
// chart and the docs use.
func agentFlags(cfg *node.Config, logLevel *string) []flagGroup {
	group := func(name string, add func(fs *pflag.FlagSet)) flagGroup {
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		add(fs)
		return flagGroup{name: name, flags: fs}
	}
	return []flagGroup{
		group("Node identity", func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's Kubernetes name (default $NODE_NAME)")
			fs.StringVar(&cfg.Namespace, "namespace", envOr("POD_NAMESPACE", "tabby-system"), "namespace of the Secrets BGP passwords refer to")
			fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
		}),
		group("BGP", func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.BGP, "bgp", node.BGPBird, "bird: run tabby's BGP agent; none: no BGP at all on this node (routes for VXLAN pools come from IPAM's block affinities; native and IPIP pools need BGP)")
			fs.StringVar(cfg.BGPAddress.Ptr(ipfamily.IPv4), "bgp-address", "", "BGP address detection: cidr=CIDR, interface=REGEX, can-reach=IP (default: the interface holding the Node's InternalIP)")
			fs.StringVar(cfg.BGPAddress.Ptr(ipfamily.IPv6), "bgp-address6", "", "IPv6 BGP address detection: cidr=CIDR, interface=REGEX, can-reach=IP or none (default: the Node's IPv6 InternalIP if it has one, else no IPv6)")
			fs.StringVar(&cfg.GoBGPAPI, "gobgp-api", "127.0.0.1:50051", "GoBGP's own gRPC API (loopback only; empty disables)")
			fs.StringVar(&cfg.Shutdown, "shutdown", "restart", "on SIGTERM: restart (peers keep routes: graceful restart) or final (withdraw everything)")
		}),
		group("IPAM", func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.RunDir, "run-dir", "/var/run/tabby", "directory of the ipam.sock and bird.sock unix sockets")
			fs.DurationVar(&cfg.GCInterval, "ipam-gc-interval", time.Minute, "how often IPAM garbage collection runs")
			fs.DurationVar(&cfg.GCGrace, "ipam-gc-grace", 5*time.Minute, "how long an allocation must look orphaned before GC releases it")
			fs.BoolVar(&cfg.LBIPAM, "lb-ipam", true, "assign addresses to Services of type LoadBalancer from the LoadBalancer pools (one node at a time, under the tabby-lbipam Lease)")
			fs.StringVar(&cfg.CNIKubeconfig, "cni-kubeconfig", "", "the CNI plugins' kubeconfig (host mount) to keep fresh as the token rotates; empty: off")
		}),
		group("Dataplane", func(fs *pflag.FlagSet) {
			fs.IntVar(&cfg.MTU, "mtu", 0, "uplink MTU override (0: detect)")
			fs.DurationVar(&cfg.ResyncInterval, "resync-interval", 90*time.Second, "felix's periodic full resync")
			fs.DurationVar(&cfg.WorkloadGrace, "workload-grace", 10*time.Second, "how long felix keeps a CNI-made route it has not yet learned of")
			fs.BoolVar(&cfg.PolicyStatus, "policy-status", true, "write the status conditions (Accepted, PriorityConflict) of the AdminNetworkPolicies, BaselineAdminNetworkPolicy and ClusterNetworkPolicies (one node at a time, under the tabby-policy-status Lease)")
		}),
		group("Fan-out (tabby-typha)", func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.TyphaService, "typha-service", "", "watch the cluster-wide kinds through tabby-typha, found from this Service's EndpointSlices (namespace/name); empty: the API server")
			fs.StringSliceVar(&cfg.TyphaAddrs, "typha-addr", nil, "tabby-typha's addresses (host:port,...) instead of --typha-service")
			fs.StringVar(&cfg.TyphaCAFile, "typha-ca-file", "", "CA that issued tabby-typha's certificate (PEM)")
			fs.StringVar(&cfg.TyphaServerName, "typha-server-name", "tabby-typha", "name tabby-typha's certificate is issued to")
		}),
		group("Health and observability", func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.HealthAddr, "health-addr", ":9099", "liveness/readiness HTTP address (/livez, /readyz); empty disables")
			fs.StringVar(&cfg.MetricsAddr, "metrics-addr", ":9091", "Prometheus metrics HTTP address (/metrics); empty disables")
			fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go profiles at /debug/pprof on the metrics address")
			fs.StringVar(&cfg.ObserveAddr, "observe-addr", "", "serve the node's flow log and BGP status over HTTPS here (e.g. :9095; tabbyctl flows and the web view read it); empty disables")
			fs.StringVar(&cfg.ObserveAdvertise, "observe-advertise-addr", "", "the address readers reach --observe-addr at, recorded on the Node (default: the node's BGP address and that port)")
			fs.StringVar(&cfg.ObserveCertFile, "observe-tls-cert-file", "", "serving certificate of --observe-addr (PEM), issued to tabby-node")
			fs.StringVar(&cfg.ObserveKeyFile, "observe-tls-key-file", "", "its key (PEM)")
		}),
		group("Logging", func(fs *pflag.FlagSet) {
			fs.StringVar(logLevel, "log-level", "info", "debug, info, warn or error")
		}),
	}
}

// groupedUsage prints the flags section by section.
func groupedUsage(groups []flagGroup) func(*cobra.Command) error {
	return func(c *cobra.Command) error {
		w := c.OutOrStderr()
		fmt.Fprintf(w, "Usage:\n  %s [flags]\n  %s install-cni [flags]\n", c.CommandPath(), c.CommandPath())
		for _, g := range groups {
			fmt.Fprintf(w, "\n%s flags:\n%s", g.name, g.flags.FlagUsages())
		}
		fmt.Fprintf(w, "\nOther flags:\n  -h, --help      help for tabby-node\n  -v, --version   print the version\n")
		return nil
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
