package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceCIDR is a range of service addresses to advertise, IPv4 or IPv6.
type ServiceCIDR struct {
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).masked() == cidr(self)",messageExpression="'cidr: ' + self + ' is not a canonical CIDR'"
	// +kubebuilder:validation:MaxLength=43
	CIDR string `json:"cidr"`
}

// LogSeverity is the BGP speaker's log level.
// +kubebuilder:validation:Enum=Debug;Info;Warning;Error
type LogSeverity string

// BGPConfigurationSpec holds cluster-wide BGP settings.
// +kubebuilder:validation:XValidation:rule="!has(self.prefixAdvertisements) || self.prefixAdvertisements.all(a, !has(a.communities) || a.communities.all(c, c.contains(':') || (has(self.communities) && self.communities.exists(n, n.name == c))))",message="prefixAdvertisements: a community without a colon must be a name in spec.communities",fieldPath=".prefixAdvertisements"
type BGPConfigurationSpec struct {
	// ASNumber is the AS of every node that has no tabby.dev/bgp-asn annotation.
	// +kubebuilder:default=64512
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	// +optional
	ASNumber *uint32 `json:"asNumber,omitempty"`

	// NodeToNodeMeshEnabled peers every node with every other node (route reflectors excepted).
	// +kubebuilder:default=true
	// +optional
	NodeToNodeMeshEnabled *bool `json:"nodeToNodeMeshEnabled,omitempty"`

	// ListenPort is the TCP port every node's BGP speaker listens on.
	// +kubebuilder:default=179
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	ListenPort *int32 `json:"listenPort,omitempty"`

	// KeepaliveTime between nodes (default 3s); a dead node's routes go after HoldTime.
	// +optional
	KeepaliveTime *metav1.Duration `json:"keepaliveTime,omitempty"`
	// HoldTime between nodes (default 9s, at least 3s).
	// +optional
	HoldTime *metav1.Duration `json:"holdTime,omitempty"`

	// +kubebuilder:default=Info
	// +optional
	LogSeverity LogSeverity `json:"logSeverity,omitempty"`

	// ServiceClusterIPs (the cluster's service CIDR) are announced by every node to its
	// external BGP peers (ToRs), never inside the cluster (service advertisement).
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ServiceClusterIPs []ServiceCIDR `json:"serviceClusterIPs,omitempty"`
	// ServiceExternalIPs (ranges of Services' externalIPs) are announced like ServiceClusterIPs.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ServiceExternalIPs []ServiceCIDR `json:"serviceExternalIPs,omitempty"`

	// ServiceLoadBalancerIPs (ranges of Services' LoadBalancer addresses assigned by something
	// other than tabby) are announced like ServiceClusterIPs. Addresses of tabby's LoadBalancer
	// pools need no entry: each is announced as a /32 (/128) while a Service holds it.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ServiceLoadBalancerIPs []ServiceCIDR `json:"serviceLoadBalancerIPs,omitempty"`

	// Communities names BGP community values for prefixAdvertisements.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Communities []Community `json:"communities,omitempty"`
	// PrefixAdvertisements put communities on the cluster's own routes (blocks, service CIDRs)
	// equal to or inside a cidr, on what tabby sends to every peer.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	PrefixAdvertisements []PrefixAdvertisement `json:"prefixAdvertisements,omitempty"`

	// MaxPaths is how many equal-cost paths to one prefix a node installs as one multipath
	// route (ECMP): paths that tie in the BGP decision down to the router-ID and peer-address
	// tie-breakers, such as a default route from both ToRs of a rack. 1 installs the best path
	// alone. The default is BIRD's `merge paths` limit, which Calico turns on.
	// +kubebuilder:default=16
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	MaxPaths *int32 `json:"maxPaths,omitempty"`
	// BFD is the default BFD of the sessions between tabby nodes (the mesh and the sessions a
	// BGPPeer's peerSelector opens); a BGPPeer's own bfd overrides it.
	// +optional
	BFD *BFD `json:"bfd,omitempty"`
}

// BFD (RFC 5880, single hop, RFC 5881) on a BGP session: a peer that stops answering is
// declared down after minRx x multiplier, and the session and its routes go with it, long
// before the hold timer would notice.
type BFD struct {
	// Enabled runs BFD on the session. The peer must run it too (FRR: neighbor X bfd; BIRD:
	// bfd on); until the peer answers, the session keeps to its hold timer.
	Enabled bool `json:"enabled"`
	// MinRx is the shortest interval between the peer's BFD packets this node asks for
	// (RFC 5880 Required Min RX Interval; FRR, BIRD: receive-interval; MetalLB:
	// receiveInterval). Unset: FRR's and BIRD's default; the bounds are the rule below.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('60s')",messageExpression="'minRx: ' + self + ' must be between 10ms and 60s'"
	// +optional
	MinRx *metav1.Duration `json:"minRx,omitempty"`
	// MinTx is the interval this node would like to send at (RFC 5880 Desired Min TX
	// Interval; transmit-interval); the peer may ask for a longer one. Unset: FRR's and BIRD's
	// default; the bounds are the rule below.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('60s')",messageExpression="'minTx: ' + self + ' must be between 10ms and 60s'"
	// +optional
	MinTx *metav1.Duration `json:"minTx,omitempty"`
	// Multiplier is how many of the peer's packets may be missed before it is declared down
	// (Detect Mult; detect-multiplier, MetalLB: detectMultiplier). Unset: FRR's and BIRD's default.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=255
	// +optional
	Multiplier *int32 `json:"multiplier,omitempty"`
}

// DefaultMaxPaths is BGPConfiguration maxPaths when unset; MaxMaxPaths is its largest value.
const (
	DefaultMaxPaths = 16
	MaxMaxPaths     = 64
)

// BGPConfiguration is the cluster's BGP configuration: one object, named "default".
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bgpconfig
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",messageExpression="'metadata.name: ' + self.metadata.name + ' is not allowed: BGPConfiguration is a singleton named default'"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.holdTime) || !has(self.spec.keepaliveTime) || duration(self.spec.holdTime).getMilliseconds() >= 3 * duration(self.spec.keepaliveTime).getMilliseconds()",fieldPath=".spec.holdTime",message="spec.holdTime must be at least 3 x spec.keepaliveTime"
// +kubebuilder:printcolumn:name="ASN",type=integer,JSONPath=`.spec.asNumber`
// +kubebuilder:printcolumn:name="Mesh",type=boolean,JSONPath=`.spec.nodeToNodeMeshEnabled`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.spec.listenPort`
type BGPConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPConfigurationSpec `json:"spec"`
}

// BGPConfigurationList is a list of BGPConfiguration.
// +kubebuilder:object:root=true
type BGPConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPConfiguration `json:"items"`
}

// SecretKeyRef names a key of a Secret in tabby-node's own namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// BGPPassword is the TCP MD5 password of a session.
type BGPPassword struct {
	SecretKeyRef *SecretKeyRef `json:"secretKeyRef,omitempty"`
}

// BGPPeerSpec says which tabby nodes open a session and to whom.
// +kubebuilder:validation:XValidation:rule="!(has(self.node) && has(self.nodeSelector))",message="node and nodeSelector are mutually exclusive: set at most one"
// +kubebuilder:validation:XValidation:rule="has(self.peerIP) != has(self.peerSelector)",message="exactly one of peerIP and peerSelector must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.peerIP) || has(self.asNumber)",fieldPath=".asNumber",message="asNumber is required with peerIP"
// +kubebuilder:validation:XValidation:rule="!has(self.bfd) || !self.bfd.enabled || !has(self.ebgpMultihop) || self.ebgpMultihop <= 1",fieldPath=".bfd.enabled",message="bfd.enabled: tabby's BFD is single hop (RFC 5881): not with ebgpMultihop above 1"
type BGPPeerSpec struct {
	// Node: only this tabby node opens the session.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Node string `json:"node,omitempty"`
	// NodeSelector (Calico selector syntax): the tabby nodes that open the session; neither node
	// nor nodeSelector means every node.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	NodeSelector string `json:"nodeSelector,omitempty"`

	// PeerIP is the peer's IPv4 or IPv6 address, optionally with a port: 198.51.100.1,
	// 198.51.100.1:1179, 2001:db8::1 or [2001:db8::1]:1179. A session to an IPv6 address starts
	// from the node's IPv6 BGP address and carries IPv6 unicast only; a link-local IPv6 address
	// is refused.
	// +kubebuilder:validation:MaxLength=47
	// +kubebuilder:validation:XValidation:rule="isIP(self) ? (ip(self).family() == 4 || !ip(self).isLinkLocalUnicast()) : self.startsWith('[') ? (self.indexOf(']:') > 1 && isIP(self.substring(1, self.indexOf(']:'))) && ip(self.substring(1, self.indexOf(']:'))).family() == 6 && !ip(self.substring(1, self.indexOf(']:'))).isLinkLocalUnicast() && self.substring(self.indexOf(']:') + 2).matches('^[0-9]{1,5}$') && int(self.substring(self.indexOf(']:') + 2)) >= 1 && int(self.substring(self.indexOf(']:') + 2)) <= 65535) : (self.split(':').size() == 2 && isIP(self.split(':')[0]) && ip(self.split(':')[0]).family() == 4 && self.split(':')[1].matches('^[0-9]{1,5}$') && int(self.split(':')[1]) >= 1 && int(self.split(':')[1]) <= 65535)",messageExpression="'peerIP: ' + self + ' is not an IP address with an optional port (198.51.100.1:1179, [2001:db8::1]:1179; not IPv6 link-local)'"
	// +optional
	PeerIP string `json:"peerIP,omitempty"`
	// PeerSelector (Calico selector syntax): peer with the tabby nodes it selects instead of a
	// fixed address; this is how route-reflector topologies are written.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	PeerSelector string `json:"peerSelector,omitempty"`

	// ASNumber of the peer; required with peerIP (selected nodes bring their own).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	// +optional
	ASNumber uint32 `json:"asNumber,omitempty"`

	// Password is the session's TCP MD5 password.
	// +optional
	Password *BGPPassword `json:"password,omitempty"`

	// KeepOriginalNextHop leaves the next hop of routes sent to an eBGP peer untouched.
	// +optional
	KeepOriginalNextHop bool `json:"keepOriginalNextHop,omitempty"`

	// RouteServer says the peer is a route server (RFC 7947) that passes routes on without
	// putting its own AS first in the AS path. Without it, a route from an eBGP peer whose AS
	// path does not begin with the peer's AS is rejected (RFC 4271 section 6.3).
	// +optional
	RouteServer bool `json:"routeServer,omitempty"`

	// MaxRestartTime is the graceful restart time asked of this peer (default 120s), at least 1s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",messageExpression="'maxRestartTime: ' + self + ' must be a duration of at least 1s'"
	// +optional
	MaxRestartTime *metav1.Duration `json:"maxRestartTime,omitempty"`

	// EBGPMultihop is the TTL for an eBGP peer that is not directly connected (2..255).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=255
	// +optional
	EBGPMultihop int32 `json:"ebgpMultihop,omitempty"`

	// Filters are the names of the BGPFilters applied to this peer's routes, in order, after
	// tabby's own safety rules. A name with no BGPFilter keeps the session from opening.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:MinLength=1
	// +listType=set
	// +optional
	Filters []string `json:"filters,omitempty"`
	// BFD on this session (single hop: not with ebgpMultihop above 1). Unset: the
	// BGPConfiguration's bfd for a session to tabby nodes, none for an external router.
	// +optional
	BFD *BFD `json:"bfd,omitempty"`
}

// BGPPeer is a BGP session that tabby nodes open: to a ToR router, or to other tabby nodes.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bgpp;bp
// +kubebuilder:printcolumn:name="PeerIP",type=string,JSONPath=`.spec.peerIP`
// +kubebuilder:printcolumn:name="PeerSelector",type=string,JSONPath=`.spec.peerSelector`
// +kubebuilder:printcolumn:name="ASN",type=integer,JSONPath=`.spec.asNumber`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="NodeSelector",type=string,JSONPath=`.spec.nodeSelector`
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPPeerSpec `json:"spec"`
}

// BGPPeerList is a list of BGPPeer.
// +kubebuilder:object:root=true
type BGPPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPPeer `json:"items"`
}

// BGPFilter (issue #35): per-peer route filters in Calico's shape, and the communities tabby
// puts on the cluster's own routes.

// BGPFilterAction is what a matching rule does with a route.
// +kubebuilder:validation:Enum=Accept;Reject
type BGPFilterAction string

const (
	BGPFilterAccept BGPFilterAction = "Accept"
	BGPFilterReject BGPFilterAction = "Reject"
)

// BGPFilterMatchOperator says how a route's prefix is compared with a rule's cidr: Equal (the
// same prefix), In (the cidr itself or a prefix inside it, within prefixLength), and their
// negations NotEqual and NotIn.
// +kubebuilder:validation:Enum=Equal;NotEqual;In;NotIn
type BGPFilterMatchOperator string

const (
	BGPFilterEqual    BGPFilterMatchOperator = "Equal"
	BGPFilterNotEqual BGPFilterMatchOperator = "NotEqual"
	BGPFilterIn       BGPFilterMatchOperator = "In"
	BGPFilterNotIn    BGPFilterMatchOperator = "NotIn"
)

// BGPFilterMatchSource narrows an export rule to routes learned from peers (not this node's
// own).
// +kubebuilder:validation:Enum=RemotePeers
type BGPFilterMatchSource string

// BGPFilterSourceRemotePeers: routes this node learned from a BGP peer and passes on.
const BGPFilterSourceRemotePeers BGPFilterMatchSource = "RemotePeers"

// BGPFilterPrefixLengthV4 bounds the prefix length of the routes an In or NotIn rule matches.
type BGPFilterPrefixLengthV4 struct {
	// Min defaults to the cidr's own length.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	// +optional
	Min *int32 `json:"min,omitempty"`
	// Max defaults to 32.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	// +optional
	Max *int32 `json:"max,omitempty"`
}

// BGPFilterRuleV4 is one rule of a BGPFilter's IPv4 list: a rule without cidr matches every
// IPv4 route.
// +kubebuilder:validation:XValidation:rule="has(self.cidr) == has(self.matchOperator)",messageExpression="has(self.cidr) ? 'matchOperator: required with cidr ' + self.cidr : 'cidr: required with matchOperator ' + self.matchOperator"
// +kubebuilder:validation:XValidation:rule="!has(self.prefixLength) || (has(self.matchOperator) && (self.matchOperator == 'In' || self.matchOperator == 'NotIn'))",fieldPath=".prefixLength",message="prefixLength: applies to matchOperator In or NotIn only"
// +kubebuilder:validation:XValidation:rule="!has(self.prefixLength) || !has(self.cidr) || !isCIDR(self.cidr) || ((!has(self.prefixLength.min) || self.prefixLength.min >= cidr(self.cidr).prefixLength()) && (!has(self.prefixLength.max) || self.prefixLength.max >= cidr(self.cidr).prefixLength()) && (!has(self.prefixLength.min) || !has(self.prefixLength.max) || self.prefixLength.min <= self.prefixLength.max))",fieldPath=".prefixLength",messageExpression="'prefixLength: min and max must be at least the length of cidr ' + self.cidr + ', and min at most max'"
type BGPFilterRuleV4 struct {
	// CIDR the route's prefix is compared with (canonical IPv4).
	// +kubebuilder:validation:MaxLength=18
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4 && cidr(self).masked() == cidr(self)",messageExpression="'cidr: ' + self + ' is not a canonical IPv4 CIDR'"
	// +optional
	CIDR string `json:"cidr,omitempty"`
	// +optional
	MatchOperator BGPFilterMatchOperator `json:"matchOperator,omitempty"`
	// PrefixLength bounds the length of the routes an In or NotIn rule matches.
	// +optional
	PrefixLength *BGPFilterPrefixLengthV4 `json:"prefixLength,omitempty"`
	// Source RemotePeers: the rule matches only routes learned from peers (export lists only).
	// +optional
	Source BGPFilterMatchSource `json:"source,omitempty"`
	Action BGPFilterAction      `json:"action"`
}

// BGPFilterPrefixLengthV6 bounds the prefix length of the routes an In or NotIn rule matches.
type BGPFilterPrefixLengthV6 struct {
	// Min defaults to the cidr's own length.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +optional
	Min *int32 `json:"min,omitempty"`
	// Max defaults to 128.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +optional
	Max *int32 `json:"max,omitempty"`
}

// BGPFilterRuleV6 is one rule of a BGPFilter's IPv6 list: a rule without cidr matches every
// IPv6 route.
// +kubebuilder:validation:XValidation:rule="has(self.cidr) == has(self.matchOperator)",messageExpression="has(self.cidr) ? 'matchOperator: required with cidr ' + self.cidr : 'cidr: required with matchOperator ' + self.matchOperator"
// +kubebuilder:validation:XValidation:rule="!has(self.prefixLength) || (has(self.matchOperator) && (self.matchOperator == 'In' || self.matchOperator == 'NotIn'))",fieldPath=".prefixLength",message="prefixLength: applies to matchOperator In or NotIn only"
// +kubebuilder:validation:XValidation:rule="!has(self.prefixLength) || !has(self.cidr) || !isCIDR(self.cidr) || ((!has(self.prefixLength.min) || self.prefixLength.min >= cidr(self.cidr).prefixLength()) && (!has(self.prefixLength.max) || self.prefixLength.max >= cidr(self.cidr).prefixLength()) && (!has(self.prefixLength.min) || !has(self.prefixLength.max) || self.prefixLength.min <= self.prefixLength.max))",fieldPath=".prefixLength",messageExpression="'prefixLength: min and max must be at least the length of cidr ' + self.cidr + ', and min at most max'"
type BGPFilterRuleV6 struct {
	// CIDR the route's prefix is compared with (canonical IPv6).
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 6 && cidr(self).masked() == cidr(self)",messageExpression="'cidr: ' + self + ' is not a canonical IPv6 CIDR'"
	// +optional
	CIDR string `json:"cidr,omitempty"`
	// +optional
	MatchOperator BGPFilterMatchOperator `json:"matchOperator,omitempty"`
	// PrefixLength bounds the length of the routes an In or NotIn rule matches.
	// +optional
	PrefixLength *BGPFilterPrefixLengthV6 `json:"prefixLength,omitempty"`
	// Source RemotePeers: the rule matches only routes learned from peers (export lists only).
	// +optional
	Source BGPFilterMatchSource `json:"source,omitempty"`
	Action BGPFilterAction      `json:"action"`
}

// BGPFilterSpec: each list is evaluated in order, the first matching rule decides; a route no
// rule matches goes on to the peer's next filter, and past the last to tabby's own policy.
// tabby's safety rules (hijack protection, no transit, next hops) come first and no rule
// overrides them.
type BGPFilterSpec struct {
	// ExportV4: IPv4 routes sent to the peer.
	// +kubebuilder:validation:MaxItems=256
	// +optional
	ExportV4 []BGPFilterRuleV4 `json:"exportV4,omitempty"`
	// ImportV4: IPv4 routes received from the peer.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(r, !has(r.source))",message="importV4: source applies to export rules only"
	// +optional
	ImportV4 []BGPFilterRuleV4 `json:"importV4,omitempty"`
	// ExportV6: IPv6 routes sent to the peer.
	// +kubebuilder:validation:MaxItems=256
	// +optional
	ExportV6 []BGPFilterRuleV6 `json:"exportV6,omitempty"`
	// ImportV6: IPv6 routes received from the peer.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(r, !has(r.source))",message="importV6: source applies to export rules only"
	// +optional
	ImportV6 []BGPFilterRuleV6 `json:"importV6,omitempty"`
}

// BGPFilter is a named set of import and export rules that BGPPeers refer to (spec.filters).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bgpf
type BGPFilter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPFilterSpec `json:"spec"`
}

// BGPFilterList is a list of BGPFilter.
// +kubebuilder:object:root=true
type BGPFilterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPFilter `json:"items"`
}

// Community names a BGP community value: standard (aa:nn) or large (aa:nn:mm).
type Community struct {
	// Name, without a colon (a value has one).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[^:]+$`
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,10}:[0-9]{1,10}(:[0-9]{1,10})?$') && (self.split(':').size() == 2 ? (int(self.split(':')[0]) >= 1 && int(self.split(':')[0]) <= 65535 && int(self.split(':')[1]) <= 65535) : self.split(':').all(x, int(x) <= 4294967295))",messageExpression="'value: ' + self + ' is not a community: aa:nn (aa 1..65535, nn 0..65535; tabby keeps 0:nn for itself) or aa:nn:mm (each 0..4294967295)'"
	Value string `json:"value"`
}

// PrefixAdvertisement puts communities on the cluster's own routes equal to or inside CIDR (its
// blocks, its service ranges, its Services' /32s) that tabby sends to any peer, and a LOCAL_PREF
// on those it sends to external routers.
// +kubebuilder:validation:XValidation:rule="has(self.communities) && size(self.communities) > 0 || has(self.localPref)",message="prefixAdvertisements: an entry needs communities or a localPref",fieldPath=".communities"
type PrefixAdvertisement struct {
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).masked() == cidr(self)",messageExpression="'cidr: ' + self + ' is not a canonical CIDR'"
	CIDR string `json:"cidr"`
	// Communities: names from spec.communities or literal values (aa:nn, aa:nn:mm).
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Communities []CommunityRef `json:"communities,omitempty"`
	// LocalPref is the LOCAL_PREF of these routes at external routers in the cluster's AS (an
	// iBGP ToR, a route server of the same AS): a network team's way to prefer one cluster's
	// copy of a Service over another's. eBGP carries no LOCAL_PREF. Between tabby nodes the
	// routes keep tabby's own.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	// +optional
	LocalPref *uint32 `json:"localPref,omitempty"`
}

// CommunityRef is a community's name in spec.communities, or a value (it has a colon).
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="!self.contains(':') || (self.matches('^[0-9]{1,10}:[0-9]{1,10}(:[0-9]{1,10})?$') && (self.split(':').size() == 2 ? (int(self.split(':')[0]) >= 1 && int(self.split(':')[0]) <= 65535 && int(self.split(':')[1]) <= 65535) : self.split(':').all(x, int(x) <= 4294967295)))",messageExpression="'communities: ' + self + ' is not a community: aa:nn (aa 1..65535, nn 0..65535; tabby keeps 0:nn for itself) or aa:nn:mm (each 0..4294967295)'"
type CommunityRef string
