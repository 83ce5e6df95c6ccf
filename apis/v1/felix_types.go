package v1

import (
	"time"

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
	// FlowLogs makes felix record each node's flows with the policy verdict that decided them.
	// +optional
	FlowLogs *FlowLogsSpec `json:"flowLogs,omitempty"`
}

// FlowLogsSpec configures felix's flow logs: NFLOG rules before the policy verdicts and a
// conntrack subscription while enabled, neither while disabled.
type FlowLogsSpec struct {
	// Enabled turns flow logs on (default false).
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// FlushInterval is the interval flows are aggregated over (default 5s, 1s to 10m).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="must be between 1s and 10m"
	// +optional
	FlushInterval *metav1.Duration `json:"flushInterval,omitempty"`
	// MaxRecords caps the records each node keeps: per interval, and closed ones for readers
	// (default 10000, 100 to 1000000).
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxRecords *int `json:"maxRecords,omitempty"`
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

	DefaultFlowLogFlushInterval = 5 * time.Second
	MinFlowLogFlushInterval     = time.Second
	MaxFlowLogFlushInterval     = 10 * time.Minute
	DefaultFlowLogMaxRecords    = 10000
	MinFlowLogMaxRecords        = 100
	MaxFlowLogMaxRecords        = 1000000
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
