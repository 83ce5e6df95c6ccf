// Package config parses and checks the network configuration the runtime passes to the tabby and
// tabby-ipam plugins, filling in defaults.
package config

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// SupportedVersions are the CNI spec versions tabby accepts and answers in.
var SupportedVersions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// PluginInfo is what VERSION reports.
var PluginInfo = version.PluginSupports(SupportedVersions...)

// IPAMType is the IPAM type tabby serves in-process (and the name of the standalone binary).
const IPAMType = "tabby-ipam"

// IPAM is the "ipam" section.
type IPAM struct {
	Type string `json:"type"`
	// Pools restricts allocation to these IPPools (names or CIDRs); empty = every enabled pool
	// whose nodeSelector matches the node.
	Pools []string `json:"pools,omitempty"`
	// AssignIPv4 and AssignIPv6 ("true"/"false", as in Calico) force or skip a family; unset,
	// a family is assigned when a usable pool of it exists for the node.
	AssignIPv4 string `json:"assign_ipv4,omitempty"`
	AssignIPv6 string `json:"assign_ipv6,omitempty"`
	// StrictAffinity forbids borrowing addresses from blocks affine to other nodes. It applies
	// to the in-process (fallback) allocator; tabby-node's allocator has its own setting.
	StrictAffinity bool `json:"strictAffinity,omitempty"`
}

// MaxTimeoutSeconds bounds timeoutSeconds: the runtime gives up on a pod's sandbox long before an
// hour, and a larger count of seconds would overflow a time.Duration.
const MaxTimeoutSeconds = 3600

// NetConf is tabby's network configuration (one plugin entry of a conflist).
type NetConf struct {
	types.NetConf
	// NodeName is this node's Kubernetes name: the owner of the blocks addresses come from.
	NodeName string `json:"nodename,omitempty"`
	// Kubeconfig is used when tabby-node's socket does not answer (the direct path).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// IPAMSocket is tabby-node's IPAM service; "" means api.DefaultSocket, "none" disables it.
	IPAMSocket string `json:"ipamSocket,omitempty"`
	// MTU of the pod interface; 0 means: the MTU of NodeAddressInterface (or of the interface
	// of the default route), minus the largest encapsulation overhead of the pod's pools (20 for
	// IPIP, 50 for VXLAN over IPv4, 70 over IPv6).
	MTU int `json:"mtu,omitempty"`
	// NodeAddressInterface is the underlay interface whose MTU sets the default pod MTU.
	NodeAddressInterface string `json:"nodeAddressInterface,omitempty"`
	// TimeoutSeconds bounds one invocation's IPAM work (default 60, at most MaxTimeoutSeconds).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// LogLevel for the plugin's stderr log: debug, info, warn (default), error.
	LogLevel string `json:"logLevel,omitempty"`

	IPAM IPAM `json:"ipam"`
}

// Parse decodes and checks a configuration from stdin. Errors name the field and the value.
func Parse(stdin []byte) (*NetConf, error) {
	c := &NetConf{}
	if err := json.Unmarshal(stdin, c); err != nil {
		return nil, fmt.Errorf("decode network configuration: %w", err)
	}
	if err := version.ParsePrevResult(&c.NetConf); err != nil {
		return nil, fmt.Errorf("prevResult: %w", err)
	}
	if err := checkPrevResult(c); err != nil {
		return nil, err
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("nodename not set and hostname unknown: %w", err)
		}
		c.NodeName = strings.ToLower(h)
	}
	if c.IPAMSocket == "" {
		c.IPAMSocket = api.DefaultSocket
	}
	if c.IPAM.Type == "" {
		c.IPAM.Type = IPAMType
	}
	if c.IPAM.Type != IPAMType {
		return nil, fmt.Errorf("ipam.type %q is not supported: tabby allocates with %q", c.IPAM.Type, IPAMType)
	}
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 65535) {
		return nil, fmt.Errorf("mtu %d out of range [576, 65535]", c.MTU)
	}
	if c.TimeoutSeconds < 0 || c.TimeoutSeconds > MaxTimeoutSeconds {
		return nil, fmt.Errorf("timeoutSeconds %d out of range [0, %d]", c.TimeoutSeconds, MaxTimeoutSeconds)
	}
	for _, f := range []struct{ name, val string }{{"ipam.assign_ipv4", c.IPAM.AssignIPv4}, {"ipam.assign_ipv6", c.IPAM.AssignIPv6}} {
		if f.val != "" && f.val != "true" && f.val != "false" {
			return nil, fmt.Errorf("%s %q: want \"true\" or \"false\"", f.name, f.val)
		}
	}
	if c.IPAM.AssignIPv4 == "false" && c.IPAM.AssignIPv6 == "false" {
		return nil, fmt.Errorf("ipam.assign_ipv4 and ipam.assign_ipv6 are both \"false\": the pod would get no address")
	}
	for i, p := range c.IPAM.Pools {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("ipam.pools[%d] is empty", i)
		}
	}
	switch c.LogLevel {
	case "", "debug", "info", "warn", "warning", "error":
	default:
		return nil, fmt.Errorf("logLevel %q is not one of debug, info, warn, error", c.LogLevel)
	}
	return c, nil
}

// checkPrevResult refuses a prevResult that lists an address entry without an address: CHECK and
// DEL would not know what it was.
func checkPrevResult(c *NetConf) error {
	if c.PrevResult == nil {
		return nil
	}
	prev, err := current.NewResultFromResult(c.PrevResult)
	if err != nil {
		return fmt.Errorf("prevResult: %w", err)
	}
	for i, ipc := range prev.IPs {
		if _, ok := netip.AddrFromSlice(ipc.Address.IP); !ok {
			return fmt.Errorf("prevResult.ips[%d].address %q is not an address", i, ipc.Address.String())
		}
	}
	return nil
}

// Timeout is the IPAM deadline of one invocation.
func (c *NetConf) Timeout() time.Duration {
	if c.TimeoutSeconds == 0 {
		return 60 * time.Second
	}
	return time.Duration(c.TimeoutSeconds) * time.Second
}

// PrevAddresses are the addresses prevResult lists (none without one).
func (c *NetConf) PrevAddresses() ([]netip.Addr, error) {
	if c.PrevResult == nil {
		return nil, nil
	}
	prev, err := current.NewResultFromResult(c.PrevResult)
	if err != nil {
		return nil, fmt.Errorf("convert prevResult: %w", err)
	}
	var out []netip.Addr
	for _, ipc := range prev.IPs {
		if ip, ok := netip.AddrFromSlice(ipc.Address.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// SocketEnabled tells whether the plugin should try tabby-node first.
func (c *NetConf) SocketEnabled() bool { return c.IPAMSocket != "none" }

// K8sArgs are the CNI_ARGS a Kubernetes runtime passes.
type K8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive // CNI_ARGS key
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive
	K8S_POD_UID                types.UnmarshallableString //nolint:revive
}

// ParseArgs decodes CNI_ARGS; unknown keys are ignored (runtimes add their own).
func ParseArgs(args string) (*K8sArgs, error) {
	a := &K8sArgs{}
	a.IgnoreUnknown = true
	if err := types.LoadArgs(args, a); err != nil {
		return nil, fmt.Errorf("CNI_ARGS %q: %w", args, err)
	}
	return a, nil
}

// Handle is the IPAM handle of an attachment: "<network>.<containerID>", as in Calico.
func Handle(network, containerID string) string { return network + "." + containerID }
