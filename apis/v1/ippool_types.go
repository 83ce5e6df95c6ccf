package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// IPIPMode says when traffic to a pool's addresses on another node is encapsulated in IPIP.
// +kubebuilder:validation:Enum=Never;Always;CrossSubnet
type IPIPMode string

const (
	IPIPModeNever       IPIPMode = "Never"
	IPIPModeAlways      IPIPMode = "Always"
	IPIPModeCrossSubnet IPIPMode = "CrossSubnet"
)

// IPPoolSpec describes a range of pod addresses, cut into blocks that nodes claim.
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.cidr) || cidr(self.cidr).prefixLength() <= self.blockSize",fieldPath=".blockSize",message="blockSize is larger than the pool: the prefix of cidr must be at most blockSize"
type IPPoolSpec struct {
	// CIDR is the pool's IPv4 range in canonical form, e.g. 10.244.0.0/16.
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4",messageExpression="'cidr: ' + self + ' is not an IPv4 CIDR'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).masked() == cidr(self)",messageExpression="'cidr: ' + self + ' has host bits set'"
	// +kubebuilder:validation:MaxLength=18
	CIDR string `json:"cidr"`

	// BlockSize is the prefix length of the blocks nodes claim from the pool.
	// +kubebuilder:default=26
	// +kubebuilder:validation:Minimum=20
	// +kubebuilder:validation:Maximum=32
	// +optional
	BlockSize int `json:"blockSize,omitempty"`

	// IPIPMode: Never (routed natively), Always, or CrossSubnet (only to nodes on another subnet).
	// +kubebuilder:default=Never
	// +optional
	IPIPMode IPIPMode `json:"ipipMode,omitempty"`

	// NATOutgoing masquerades traffic from the pool to destinations outside every pool.
	// +optional
	NATOutgoing bool `json:"natOutgoing,omitempty"`

	// Disabled pools hand out no new address; existing allocations stay.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// NodeSelector (Calico selector syntax, e.g. `zone == 'a'`) picks the nodes that allocate from
	// this pool; empty or all() means every node.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	NodeSelector string `json:"nodeSelector,omitempty"`
}

// IPPool is a range of pod addresses.
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ippool;pools
// +kubebuilder:printcolumn:name="CIDR",type=string,JSONPath=`.spec.cidr`
// +kubebuilder:printcolumn:name="BlockSize",type=integer,JSONPath=`.spec.blockSize`
// +kubebuilder:printcolumn:name="IPIPMode",type=string,JSONPath=`.spec.ipipMode`
// +kubebuilder:printcolumn:name="NATOutgoing",type=boolean,JSONPath=`.spec.natOutgoing`
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="Selector",type=string,JSONPath=`.spec.nodeSelector`,priority=1
type IPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPPoolSpec `json:"spec"`
}

// IPPoolList is a list of IPPool.
// +kubebuilder:object:root=true
type IPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPPool `json:"items"`
}
