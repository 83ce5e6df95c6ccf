package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// VXLANMode says when traffic to a pool's addresses on another node is encapsulated in VXLAN.
// +kubebuilder:validation:Enum=Never;Always;CrossSubnet
type VXLANMode string

const (
	VXLANModeNever       VXLANMode = "Never"
	VXLANModeAlways      VXLANMode = "Always"
	VXLANModeCrossSubnet VXLANMode = "CrossSubnet"
)

// IPIPMode says when traffic to a pool's addresses on another node is encapsulated in IPIP.
// +kubebuilder:validation:Enum=Never;Always;CrossSubnet
type IPIPMode string

const (
	IPIPModeNever       IPIPMode = "Never"
	IPIPModeAlways      IPIPMode = "Always"
	IPIPModeCrossSubnet IPIPMode = "CrossSubnet"
)

// IPPoolUse is what a pool's addresses are for.
// +kubebuilder:validation:Enum=Workload;Tunnel;LoadBalancer
type IPPoolUse string

const (
	// IPPoolUseWorkload: pods' addresses, in blocks the nodes claim.
	IPPoolUseWorkload IPPoolUse = "Workload"
	// IPPoolUseTunnel: the nodes' tunnel addresses (tunl0, the VXLAN VTEPs).
	IPPoolUseTunnel IPPoolUse = "Tunnel"
	// IPPoolUseLoadBalancer: addresses of Services of type LoadBalancer, assigned by tabby's
	// LoadBalancer IPAM and announced by BGP from the nodes that can serve them.
	IPPoolUseLoadBalancer IPPoolUse = "LoadBalancer"
)

// IPPoolSpec describes a range of pod addresses, cut into blocks that nodes claim.
//
// The family is the cidr's; the rules that depend on it (block sizes, IPIP) are on the spec, so
// they see both fields. apis/validation.ParseIPPool applies the same rules, and its test table
// runs through this schema too. An unset or zero blockSize is the family's default (26, 122); a
// blockSize below the family's range is reported once, by the range rule.
// +kubebuilder:validation:XValidation:rule="!has(self.blockSize) || self.blockSize == 0 || !isCIDR(self.cidr) || cidr(self.cidr).ip().family() != 4 || self.blockSize >= 20 && self.blockSize <= 32",fieldPath=".blockSize",message="blockSize must be between 20 and 32 for an IPv4 pool"
// +kubebuilder:validation:XValidation:rule="!has(self.blockSize) || self.blockSize == 0 || !isCIDR(self.cidr) || cidr(self.cidr).ip().family() != 6 || self.blockSize >= 116 && self.blockSize <= 128",fieldPath=".blockSize",message="blockSize must be between 116 and 128 for an IPv6 pool"
// +kubebuilder:validation:XValidation:rule="has(self.allowedUses) && self.allowedUses.exists(u, u == 'LoadBalancer') || !isCIDR(self.cidr) || cidr(self.cidr).prefixLength() <= (has(self.blockSize) && self.blockSize != 0 ? self.blockSize : (cidr(self.cidr).ip().family() == 4 ? 26 : 122)) || has(self.blockSize) && self.blockSize != 0 && self.blockSize < (cidr(self.cidr).ip().family() == 4 ? 20 : 116)",fieldPath=".blockSize",message="blockSize is larger than the pool: the prefix of cidr must be at most blockSize"
// +kubebuilder:validation:XValidation:rule="!has(self.ipipMode) || self.ipipMode == 'Never' || !isCIDR(self.cidr) || cidr(self.cidr).ip().family() == 4",fieldPath=".ipipMode",message="ipipMode is IPv4-only: an IPv6 pool's ipipMode must be Never or unset"
// +kubebuilder:validation:XValidation:rule="!has(self.vxlanMode) || self.vxlanMode == 'Never' || !has(self.ipipMode) || self.ipipMode == 'Never'",fieldPath=".vxlanMode",message="vxlanMode cannot be used with ipipMode: a pool encapsulates one way at most"
// +kubebuilder:validation:XValidation:rule="!has(self.allowedUses) || !self.allowedUses.exists(u, u == 'LoadBalancer') || self.allowedUses.all(u, u == 'LoadBalancer')",fieldPath=".allowedUses",message="allowedUses: LoadBalancer cannot be combined with Workload or Tunnel: a pool's addresses are either the pods' or the Services'"
// +kubebuilder:validation:XValidation:rule="!has(self.allowedUses) || !self.allowedUses.exists(u, u == 'LoadBalancer') || ((!has(self.ipipMode) || self.ipipMode == 'Never') && (!has(self.vxlanMode) || self.vxlanMode == 'Never') && (!has(self.nodeSelector) || size(self.nodeSelector) == 0 || self.nodeSelector == 'all()'))",fieldPath=".allowedUses",message="allowedUses: a LoadBalancer pool has ipipMode and vxlanMode Never and no nodeSelector: its addresses belong to no node"
type IPPoolSpec struct {
	// CIDR is the pool's range in canonical form, IPv4 (10.244.0.0/16) or IPv6
	// (fd00:10:244::/48); it decides the pool's family.
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",messageExpression="'cidr: ' + self + ' is not a CIDR'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).masked() == cidr(self)",messageExpression="'cidr: ' + self + ' has host bits set'"
	// +kubebuilder:validation:MaxLength=43
	CIDR string `json:"cidr"`

	// BlockSize is the prefix length of the blocks nodes claim from the pool: 20 to 32 for an
	// IPv4 pool (default 26), 116 to 128 for an IPv6 pool (default 122). A LoadBalancer pool
	// has no blocks: its cidr may be smaller than a block.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +optional
	BlockSize int `json:"blockSize,omitempty"`

	// IPIPMode: Never (routed natively), Always, or CrossSubnet (only to nodes on another
	// subnet). IPIP carries IPv4 only: an IPv6 pool's is Never.
	// +kubebuilder:default=Never
	// +optional
	IPIPMode IPIPMode `json:"ipipMode,omitempty"`

	// VXLANMode: Never, Always, or CrossSubnet (only to nodes on another subnet; the same
	// subnet is routed natively). Both families: an IPv6 pool's VXLAN runs over the nodes' IPv6
	// addresses. A pool encapsulates one way at most: with vxlanMode other than Never,
	// ipipMode must be Never.
	// +kubebuilder:default=Never
	// +optional
	VXLANMode VXLANMode `json:"vxlanMode,omitempty"`

	// NATOutgoing masquerades traffic from the pool to destinations outside every pool.
	// +optional
	NATOutgoing bool `json:"natOutgoing,omitempty"`

	// Disabled pools hand out no new address; existing allocations stay.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// AllowedUses says what the pool's addresses are for: Workload (pods) and Tunnel (tunnel
	// devices), the default, or LoadBalancer alone (Services of type LoadBalancer, as Calico's
	// and Cilium's LoadBalancer IPAM). A LoadBalancer pool is not cut into blocks and belongs to
	// no node.
	// +kubebuilder:validation:MaxItems=3
	// +listType=set
	// +optional
	AllowedUses []IPPoolUse `json:"allowedUses,omitempty"`

	// AssignmentMode of a LoadBalancer pool: Automatic (the default) hands its addresses to any
	// Service of type LoadBalancer; Manual only to a Service that asks for the pool or an
	// address in it (tabby.dev/loadBalancerIPs, spec.loadBalancerIP, tabby.dev/ipv4pools).
	// +kubebuilder:validation:Enum=Automatic;Manual
	// +optional
	AssignmentMode AssignmentMode `json:"assignmentMode,omitempty"`

	// NodeSelector (Calico selector syntax, e.g. `zone == 'a'`) picks the nodes that allocate from
	// this pool; empty or all() means every node.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	NodeSelector string `json:"nodeSelector,omitempty"`
}

// AssignmentMode says whether a LoadBalancer pool's addresses go to any Service or only to
// those that ask for them.
type AssignmentMode string

const (
	AssignmentModeAutomatic AssignmentMode = "Automatic"
	AssignmentModeManual    AssignmentMode = "Manual"
)

// IPPool is a range of pod addresses.
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ippool;pools
// +kubebuilder:printcolumn:name="CIDR",type=string,JSONPath=`.spec.cidr`
// +kubebuilder:printcolumn:name="BlockSize",type=integer,JSONPath=`.spec.blockSize`
// +kubebuilder:printcolumn:name="IPIPMode",type=string,JSONPath=`.spec.ipipMode`
// +kubebuilder:printcolumn:name="VXLANMode",type=string,JSONPath=`.spec.vxlanMode`
// +kubebuilder:printcolumn:name="NATOutgoing",type=boolean,JSONPath=`.spec.natOutgoing`
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="Uses",type=string,JSONPath=`.spec.allowedUses`,priority=1
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
