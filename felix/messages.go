package felix

import (
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tabbynet/tabby/felix/policy"
)

// The messages below reach the managers through Felix.OnUpdate, in the order they were sent.
// Each carries one object (or, for what tabby-node derives from IPAM, one whole view), so an
// informer event is one message and a manager can tell exactly what changed.

// PodUpdate: a pod's labels, named ports or host networking, anywhere in the cluster. Its
// addresses come separately, from IPAM (PodIPsUpdate). felix keeps the pointer (one copy of
// every pod in the cluster, the sender's): neither side may modify the pod after sending it.
type PodUpdate struct{ Pod *policy.Pod }

// PodRemove: the pod is gone.
type PodRemove struct{ Key policy.Key }

// NamespaceUpdate: a namespace and its labels.
type NamespaceUpdate struct{ Namespace policy.Namespace }

// NamespaceRemove: the namespace is gone.
type NamespaceRemove struct{ Name string }

// NetworkPolicyUpdate: a NetworkPolicy was created or changed. Felix keeps the pointer: the
// sender must not modify the object afterwards (informer objects are never modified).
type NetworkPolicyUpdate struct{ Policy *networkingv1.NetworkPolicy }

// NetworkPolicyRemove: the NetworkPolicy is gone.
type NetworkPolicyRemove struct{ Key policy.Key }

// AdminPolicyUpdate: an AdminNetworkPolicy or the BaselineAdminNetworkPolicy, parsed
// (policy.FromANP, policy.FromBANP). Felix keeps the pointer.
type AdminPolicyUpdate struct{ Policy *policy.AdminPolicy }

// AdminPolicyRemove: the admin policy is gone.
type AdminPolicyRemove struct{ Key policy.AdminKey }

// PodIPsUpdate: every pod's addresses in the cluster, as IPAM allocated them (a pod has its
// address from the moment its CNI ADD allocated it, before the kubelet reports it). The map
// is felix's afterwards. The syncer sends it once, in its first pass, after that pass's
// WorkloadUpdates: from then on the policy manager knows this node's endpoints too. This
// node's endpoints are its workloads (the model's WorkloadUpdate and WorkloadRemove).
type PodIPsUpdate struct{ IPs map[policy.Key][]netip.Addr }

// PodIPsDelta: the addresses that went and came since the last PodIPsUpdate or PodIPsDelta
// (an address is in at most one of the two).
type PodIPsDelta struct{ Removed, Added []policy.PodAddr }

// PolicyInSync: every pod, namespace and NetworkPolicy has been sent once. Until then the
// policy manager writes nothing: a restart must not replace the rules in the kernel with ones
// computed from half the cluster.
type PolicyInSync struct{}
