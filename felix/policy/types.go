// Package policy is tabby's NetworkPolicy calculation: from pods, namespaces and
// networking.k8s.io/v1 NetworkPolicies to the iptables chains and ipsets that enforce them on
// one node. It imports no netlink and runs no command. Calculator is the whole calculation, a
// pure function of an Input (tabbyctl's, and the reference); State is the same rendering kept up
// to date change by change, which felix's policy manager feeds and whose differences it hands
// to the writers. See README.md in this folder for the design (chain layout, set naming, what
// is and is not policed, what a change recomputes).
package policy

import (
	"net/netip"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Key names a namespaced object: a pod or a NetworkPolicy. It is the model's PodKey, so a
// workload of the change stream names its pod as policy does.
type Key = model.PodKey

// Protocol is a NetworkPolicy port protocol: "TCP", "UDP" or "SCTP".
type Protocol string

// NamedPort is a container port with a name, as a NetworkPolicy port by name resolves it.
type NamedPort struct {
	Name     string
	Protocol Protocol
	Port     uint16
}

// Pod is what policy needs to know of any pod in the cluster.
type Pod struct {
	Key
	Labels map[string]string
	// IPs are the pod's addresses, both families (tabby's IPAM knows them the moment the CNI
	// ADD allocated them; the Pod's status learns them later).
	IPs        []netip.Addr
	NamedPorts []NamedPort
	// HostNetwork pods are never policed and never selected as peers by a podSelector (their
	// address is the node's).
	HostNetwork bool
}

// PodAddr is one address of one pod (felix is told of the pods' addresses as they come and go).
type PodAddr struct {
	Pod Key
	IP  netip.Addr
}

// ApplyAddrs changes ips, every pod's addresses (each pod's sorted), by the addresses that went
// and came, and calls touched for each pod whose addresses it changed. A pod's slice is
// replaced, never modified: a calculation made before shares it (WithAddresses).
func ApplyAddrs(ips map[Key][]netip.Addr, removed, added []PodAddr, touched func(Key)) {
	for _, a := range removed {
		cur := ips[a.Pod]
		i := slices.Index(cur, a.IP)
		switch {
		case i < 0:
			continue
		case len(cur) == 1:
			delete(ips, a.Pod)
		default:
			ips[a.Pod] = slices.Delete(slices.Clone(cur), i, i+1)
		}
		touched(a.Pod)
	}
	for _, a := range added {
		cur := ips[a.Pod]
		i, found := slices.BinarySearchFunc(cur, a.IP, netip.Addr.Compare)
		if found {
			continue
		}
		ips[a.Pod] = slices.Insert(slices.Clip(cur), i, a.IP)
		touched(a.Pod)
	}
}

// Namespace is what policy needs to know of a namespace.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Endpoint is a workload on this node: the pod behind a host veth.
type Endpoint struct {
	Interface string // caliXXXXXXXXXXX
	Pod       Key
}

// Input is the whole state the calculator reads. The maps are read only.
type Input struct {
	Pods map[Key]*Pod
	// IPs, when not nil, are the pods' addresses in place of each Pod's IPs: IPAM's view, which
	// knows a pod's address from its CNI ADD on (felix's and tabbyctl's way; a copy of every
	// pod to set its addresses costs memory per pod of the cluster). A pod with no entry has no address;
	// an entry for a pod not in Pods is left out: it cannot be selected by labels nobody has
	// seen.
	IPs        map[Key][]netip.Addr
	Namespaces map[string]*Namespace
	Policies   map[Key]*networkingv1.NetworkPolicy
	// Admin holds the AdminNetworkPolicies and the BaselineAdminNetworkPolicy.
	Admin map[AdminKey]*AdminPolicy
	// Nodes are the cluster's nodes, for admin policies' nodes peers.
	Nodes     map[string]*Node
	Endpoints []Endpoint
}

// Addrs is the addresses of the pod k: IPs's when set, else the Pod's own.
func (in Input) Addrs(k Key) []netip.Addr {
	return addrsOf(in.IPs, in.Pods[k])
}

func addrsOf(ips map[Key][]netip.Addr, p *Pod) []netip.Addr {
	switch {
	case p == nil:
		return nil
	case ips != nil:
		return ips[p.Key]
	}
	return p.IPs
}

// IPSet is one ipset as the writer creates it.
type IPSet struct {
	Type    string          // "hash:ip", "hash:net" or "hash:ip,port"
	Family  ipfamily.Family // of its members
	Members []string        // sorted, in `ipset add` syntax ("10.0.0.0/24 nomatch", "10.0.0.1,tcp:80")
}

// Rendered is what the writers put in the kernel for one family: tabby's chains of the filter
// table (rules are iptables arguments after "-A <chain>") and the sets those rules use.
// Everything not in it that starts with "tabby-" in the filter table, and every policy set,
// is stale.
type Rendered struct {
	Chains map[string][]string
	IPSets map[string]IPSet
	// FlowRules: what each NFLOG prefix of the chains stands for, with flow logs on
	// (Calculator.SetFlowLogs); nil otherwise.
	FlowRules map[string]FlowRule
}
