package node

import (
	"fmt"
	"strings"
	"time"

	"github.com/tabbynet/tabby/bird/autodetect"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Config is tabby-node's configuration; every field is a flag of cmd/tabby-node.
type Config struct {
	NodeName   string
	Namespace  string // Secrets for BGP passwords and the LoadBalancer IPAM Lease live here
	Kubeconfig string // empty: $KUBECONFIG, ~/.kube/config, in-cluster
	// BGPAddress is the autodetection method of each family: "" (the Node's InternalIP of the
	// family; for IPv6 none when it has no IPv6 one), cidr=…, interface=…, can-reach=…, or none.
	// An IPv6-only node has IPv4 none and an IPv6 method.
	BGPAddress ipfamily.Pair[string]
	// BGP is "bird" (the default when empty: tabby's BGP agent runs) or "none": no BGP agent at
	// all, for clusters whose pools use VXLAN (Calico's calico_backend: vxlan). The BGP address
	// is still detected and recorded: it is the node's underlay address.
	BGP         string
	HealthAddr  string
	MetricsAddr string
	RunDir      string // ipam.sock and bird.sock live here
	GoBGPAPI    string // "" disables GoBGP's own gRPC API
	MTU         int    // 0: the uplink's
	// Shutdown is "restart" (graceful restart: peers keep routes) or "final" (withdraw).
	Shutdown       string
	ResyncInterval time.Duration
	GCInterval     time.Duration
	GCGrace        time.Duration
	// CNIKubeconfig is the CNI plugins' kubeconfig as mounted from the host; when set, tabby-node
	// rewrites it as the service account token rotates. Empty: off (the lab writes its own).
	CNIKubeconfig string
	// Pprof serves /debug/pprof on the metrics address.
	Pprof bool
	// WorkloadGrace protects routes the CNI plugin made before felix learned of the pod.
	WorkloadGrace time.Duration
	// Typha is where the cluster-wide watches go: tabby-typha's Service (namespace/name, found
	// from its EndpointSlices) or addresses (host:port,...); empty: the API server.
	TyphaService    string
	TyphaAddrs      []string
	TyphaCAFile     string
	TyphaServerName string
	// LBIPAM runs LoadBalancer IPAM: while this node holds its Lease, it assigns the addresses of
	// Services of type LoadBalancer from the LoadBalancer pools.
	LBIPAM bool
	// PolicyStatus writes the status conditions of the AdminNetworkPolicies,
	// BaselineAdminNetworkPolicy and ClusterNetworkPolicies while this node holds its Lease.
	PolicyStatus bool
	// ObserveAddr serves the node's flow log and BGP status over HTTPS (observe/server) at
	// host:port; empty: off. ObserveAdvertise is the address recorded on the Node for readers
	// (default: the node's BGP address and ObserveAddr's port).
	ObserveAddr      string
	ObserveAdvertise string
	ObserveCertFile  string
	ObserveKeyFile   string
}

// Validate checks the configuration before anything starts.
func (c *Config) Validate() error {
	if c.NodeName == "" {
		return fmt.Errorf("--node-name is required (NODE_NAME from the downward API in a DaemonSet)")
	}
	switch c.Shutdown {
	case "", "restart", "final":
	default:
		return fmt.Errorf("--shutdown=%q: want restart or final", c.Shutdown)
	}
	switch c.BGP {
	case "", BGPBird, BGPNone:
	default:
		return fmt.Errorf("--bgp=%q: want %s (run BGP) or %s (no BGP: VXLAN pools)", c.BGP, BGPBird, BGPNone)
	}
	if c.RunDir == "" {
		return fmt.Errorf("--run-dir is required")
	}
	// Detection runs only once the Node exists; a typo must fail at once, not after that wait.
	for _, fam := range ipfamily.All {
		if _, err := autodetect.ParseFamily(fam, c.BGPAddress.Get(fam)); err != nil {
			return fmt.Errorf("%s: %w", bgpAddressFlag(fam), err)
		}
	}
	if c.TyphaService != "" && len(c.TyphaAddrs) > 0 {
		return fmt.Errorf("--typha-service=%s and --typha-addr=%s: name one way to find tabby-typha", c.TyphaService, strings.Join(c.TyphaAddrs, ","))
	}
	if c.TyphaService != "" {
		if ns, name, ok := strings.Cut(c.TyphaService, "/"); !ok || ns == "" || name == "" {
			return fmt.Errorf("--typha-service=%q: want namespace/name", c.TyphaService)
		}
	}
	if (c.TyphaService != "" || len(c.TyphaAddrs) > 0) && c.TyphaCAFile == "" {
		return fmt.Errorf("--typha-ca-file is required with tabby-typha: the agent verifies its certificate")
	}
	if err := c.checkObserve(); err != nil {
		return err
	}
	if v6 := c.BGPAddress.Get(ipfamily.IPv6); c.BGPAddress.Get(ipfamily.IPv4) == autodetect.None && (v6 == autodetect.None || v6 == "") {
		// "" for IPv6 would let a Node without an IPv6 InternalIP start with no address at all.
		return fmt.Errorf("--bgp-address=none: an IPv6-only node needs --bgp-address6 (a method, not %q)", v6)
	}
	return nil
}

// The values of --bgp.
const (
	BGPBird = "bird"
	BGPNone = "none"
)

// BGPEnabled tells whether the node runs a BGP agent.
func (c *Config) BGPEnabled() bool { return c.BGP != BGPNone }

// bgpAddressFlag is the flag that sets a family's BGP address method.
func bgpAddressFlag(fam ipfamily.Family) string {
	if fam == ipfamily.IPv6 {
		return "--bgp-address6"
	}
	return "--bgp-address"
}
