package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Allocation is one address handed out from a block.
type Allocation struct {
	// Handle is the IPAMHandle's handleID (<network>.<containerID>, or ipip-tunnel-addr-<node>).
	Handle string `json:"handle"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Pod string `json:"pod,omitempty"`
	// Node that allocated it; differs from the block's affinity when the address is borrowed.
	// +optional
	Node string `json:"node,omitempty"`
}

// IPAMBlockSpec is a block of a pool and the addresses allocated in it. Every write is a
// compare-and-swap on the object's resourceVersion.
type IPAMBlockSpec struct {
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).masked() == cidr(self)",messageExpression="'cidr: ' + self + ' is not a canonical CIDR'"
	// +kubebuilder:validation:MaxLength=43
	CIDR string `json:"cidr"`
	// Affinity is "host:<node>" while the block belongs to a node; empty once released.
	// +optional
	Affinity string `json:"affinity,omitempty"`
	// Allocations by ordinal: the address's offset in the block, in decimal.
	// Atomic for server-side apply: tabby writes the map whole with compare-and-swap anyway, and
	// tracking each entry's field manager made every update of a full block cost the API server
	// twice as much.
	// +optional
	// +mapType=atomic
	Allocations map[string]Allocation `json:"allocations,omitempty"`
}

// IPAMBlock is a block of addresses cut from an IPPool.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="CIDR",type=string,JSONPath=`.spec.cidr`
// +kubebuilder:printcolumn:name="Affinity",type=string,JSONPath=`.spec.affinity`
type IPAMBlock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAMBlockSpec `json:"spec"`
}

// IPAMBlockList is a list of IPAMBlock.
// +kubebuilder:object:root=true
type IPAMBlockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAMBlock `json:"items"`
}

// BlockAffinityState is the life cycle of a node's claim on a block.
// +kubebuilder:validation:Enum=pending;confirmed;pendingDeletion
type BlockAffinityState string

const (
	AffinityPending         BlockAffinityState = "pending"
	AffinityConfirmed       BlockAffinityState = "confirmed"
	AffinityPendingDeletion BlockAffinityState = "pendingDeletion"
)

// BlockAffinitySpec records that a node claimed a block.
type BlockAffinitySpec struct {
	// +kubebuilder:validation:MinLength=1
	Node string `json:"node"`
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).masked() == cidr(self)",messageExpression="'cidr: ' + self + ' is not a canonical CIDR'"
	// +kubebuilder:validation:MaxLength=43
	CIDR string `json:"cidr"`
	// +kubebuilder:default=pending
	// +optional
	State BlockAffinityState `json:"state,omitempty"`
}

// BlockAffinity is a node's claim on a block; the node advertises the block by BGP.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="CIDR",type=string,JSONPath=`.spec.cidr`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
type BlockAffinity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BlockAffinitySpec `json:"spec"`
}

// BlockAffinityList is a list of BlockAffinity.
// +kubebuilder:object:root=true
type BlockAffinityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BlockAffinity `json:"items"`
}

// IPAMHandleSpec lists, per block, how many addresses one attachment holds.
type IPAMHandleSpec struct {
	// HandleID is <network>.<containerID> (or ipip-tunnel-addr-<node>); the object's name is a
	// DNS-safe form of it.
	// +kubebuilder:validation:MinLength=1
	HandleID string `json:"handleID"`
	// Block maps a block CIDR to the number of addresses this handle holds in it.
	// +optional
	Block map[string]int `json:"block,omitempty"`
}

// IPAMHandle is the record of one attachment's addresses, so DEL can release them by handle.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Handle",type=string,JSONPath=`.spec.handleID`
type IPAMHandle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAMHandleSpec `json:"spec"`
}

// IPAMHandleList is a list of IPAMHandle.
// +kubebuilder:object:root=true
type IPAMHandleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAMHandle `json:"items"`
}
