package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FelixConfigurationSpec is the cluster's dataplane settings (Calico's FelixConfiguration
// names). Unset fields take the defaults below.
type FelixConfigurationSpec struct {
	// VXLANVNI is the VXLAN network identifier of tabby's VXLAN devices (default 4096).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777215
	// +optional
	VXLANVNI *int `json:"vxlanVNI,omitempty"`
	// VXLANPort is the UDP port of VXLAN (default 4789, the IANA port).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	VXLANPort *int `json:"vxlanPort,omitempty"`
	// VXLANMTU is the MTU of the IPv4 VXLAN device; unset or 0: the uplink's minus 50 (the
	// outer IPv4, UDP and VXLAN headers and the inner Ethernet header).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	VXLANMTU *int `json:"vxlanMTU,omitempty"`
	// VXLANMTUV6 is the MTU of the IPv6 VXLAN device; unset or 0: the uplink's minus 70 (an
	// outer IPv6 header is 20 bytes longer).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	VXLANMTUV6 *int `json:"vxlanMTUV6,omitempty"`
}

// Defaults of FelixConfigurationSpec.
const (
	DefaultVXLANVNI  = 4096
	DefaultVXLANPort = 4789
	// VXLANOverhead is what VXLAN adds to a packet over an IPv4 underlay; VXLANOverheadIPv6 over
	// an IPv6 one.
	VXLANOverhead     = 50
	VXLANOverheadIPv6 = 70
	// DefaultFelixConfigurationName is the one FelixConfiguration tabby reads.
	DefaultFelixConfigurationName = "default"
)

// FelixConfiguration is the cluster's dataplane configuration: a singleton named default.
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=felixconfig
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",messageExpression="'metadata.name: ' + self.metadata.name + ' is not allowed: FelixConfiguration is a singleton named default'"
// +kubebuilder:printcolumn:name="VNI",type=integer,JSONPath=`.spec.vxlanVNI`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.spec.vxlanPort`
type FelixConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FelixConfigurationSpec `json:"spec"`
}

// FelixConfigurationList is a list of FelixConfiguration.
// +kubebuilder:object:root=true
type FelixConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FelixConfiguration `json:"items"`
}
