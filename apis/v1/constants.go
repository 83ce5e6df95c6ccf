package v1

// Per-node BGP settings live as annotations on the Kubernetes Node, as Calico keeps them on its
// Node resource.
const (
	// AnnotationBGPIPv4Address is the node's BGP address with its prefix length (198.51.100.11/24);
	// the prefix length tells felix whether another node is on the same subnet.
	AnnotationBGPIPv4Address = "tabby.dev/bgp-ipv4-address"
	// AnnotationBGPIPv6Address is the node's IPv6 BGP address with its prefix length
	// (2001:db8:100::11/64): the next hop of its IPv6 blocks. Unset: the node has no IPv6.
	AnnotationBGPIPv6Address = "tabby.dev/bgp-ipv6-address"
	// AnnotationBGPASN overrides BGPConfiguration.asNumber for one node.
	AnnotationBGPASN = "tabby.dev/bgp-asn"
	// AnnotationRRClusterID makes the node a route reflector for the given cluster ID (an IPv4
	// address form, e.g. 244.0.0.1).
	AnnotationRRClusterID = "tabby.dev/route-reflector-cluster-id"
	// AnnotationIPIPTunnelAddress is the address of the node's tunl0 device.
	AnnotationIPIPTunnelAddress = "tabby.dev/ipip-tunnel-address"
	// AnnotationVXLANIPv4TunnelAddress is the address of the node's IPv4 VXLAN device
	// (vxlan.tabby), its VTEP: IPAM gives it from a VXLAN pool of the node, as the tunl0 address.
	AnnotationVXLANIPv4TunnelAddress = "tabby.dev/vxlan-ipv4-tunnel-address"
	// AnnotationVXLANIPv6TunnelAddress is the same for the IPv6 VXLAN device (vxlan-v6.tabby).
	AnnotationVXLANIPv6TunnelAddress = "tabby.dev/vxlan-ipv6-tunnel-address"
	// AnnotationVXLANIPv4MAC is the MAC address of the node's IPv4 VXLAN device: the other nodes'
	// neighbour and FDB entries for its VTEP name it.
	AnnotationVXLANIPv4MAC = "tabby.dev/vxlan-ipv4-mac"
	// AnnotationVXLANIPv6MAC is the same for the IPv6 VXLAN device.
	AnnotationVXLANIPv6MAC = "tabby.dev/vxlan-ipv6-mac"
	// AnnotationNoBGP ("true") is set by a tabby-node that runs without BGP (--bgp=none): no
	// other node opens a session to it. Its BGP address annotations stay: they are its underlay
	// addresses, which VXLAN runs over.
	AnnotationNoBGP = "tabby.dev/no-bgp"
	// AnnotationIPv4Pools on a pod or its namespace names the pools (a JSON list of pool names or
	// CIDRs) its address must come from; the pod's annotation wins.
	AnnotationIPv4Pools = "tabby.dev/ipv4pools"
	// AnnotationIPv6Pools is the same for a pod's IPv6 address.
	AnnotationIPv6Pools = "tabby.dev/ipv6pools"
	// AnnotationBGPRestarting announces a planned restart of the node that its tabby-node cannot
	// announce itself (a power cycle, a link maintenance): until this time (RFC 3339), its peers
	// treat a lost session with it as a graceful restart and keep its routes.
	AnnotationBGPRestarting = "tabby.dev/bgp-restarting"
	// AnnotationVersion is the version of the tabby-node that runs on the node, which it records
	// when it starts: `tabbyctl version` reads what the agents run from it, chart or no chart.
	AnnotationVersion = "tabby.dev/version"
	// AnnotationObserveAddress is where the node's tabby-node serves its flow log and BGP
	// status over HTTPS (host:port), set while --observe-addr is: `tabbyctl flows` and the web
	// view find every node's from it.
	AnnotationObserveAddress = "tabby.dev/observe-address"
)

// Services of type LoadBalancer: what tabby's LoadBalancer IPAM and its service advertisement
// read on a Service. The pools a Service's addresses come from are named as a pod's are, by
// AnnotationIPv4Pools and AnnotationIPv6Pools on the Service.
const (
	// LoadBalancerClass is the spec.loadBalancerClass of the Services tabby assigns addresses
	// to; a Service without a class is tabby's too.
	LoadBalancerClass = "tabby.dev/load-balancer"
	// AnnotationLoadBalancerIPs lists the addresses a Service asks for: a JSON list
	// (["198.51.100.200","2001:db8::200"], Calico's form) or comma-separated (MetalLB's form),
	// one per family at most. It wins over spec.loadBalancerIP.
	AnnotationLoadBalancerIPs = "tabby.dev/loadBalancerIPs"
	// AnnotationAllowSharedIP is a sharing key: Services with the same key may share an
	// address while their ports and protocols do not clash (MetalLB's allow-shared-ip).
	AnnotationAllowSharedIP = "tabby.dev/allow-shared-ip"
	// AnnotationAdvertise "false" keeps every address of the Service out of BGP.
	AnnotationAdvertise = "tabby.dev/advertise"
	// MetalLB's names for the same requests, honoured so that Services move over unchanged.
	AnnotationMetalLBLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"
	AnnotationMetalLBAllowSharedIP   = "metallb.universe.tf/allow-shared-ip"
	// LabelServiceProxyName marks a Service that another proxy than kube-proxy serves: the
	// nodes' kube-proxy does not forward its traffic, so tabby does not announce it.
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
)

// Defaults shared by the schema, the agents and the CLI. The block sizes depend on the pool's
// family, which only its cidr tells: the schema cannot default blockSize (a default cannot look
// at another field), so an unset blockSize means the family's default wherever a pool is read
// (apis/validation.ParseIPPool). The CEL rules on IPPoolSpec repeat these numbers.
const (
	DefaultBlockSizeIPv4 = 26
	MinBlockSizeIPv4     = 20
	MaxBlockSizeIPv4     = 32
	// IPv6 as Calico: a /122 block holds 64 addresses, as many as an IPv4 /26.
	DefaultBlockSizeIPv6 = 122
	MinBlockSizeIPv6     = 116
	MaxBlockSizeIPv6     = 128
	DefaultASNumber      = 64512
	DefaultListenPort    = 179
	// DefaultBGPConfigurationName is the name of the singleton BGPConfiguration.
	DefaultBGPConfigurationName = "default"
)

// RouteProtocol is the rtnetlink protocol number on every route tabby programs (the CNI plugin's
// workload routes and felix's routes alike). Felix owns exactly the routes carrying it, and never
// touches a route of another protocol. 201 is unassigned in iproute2's rt_protos; add
// "201 tabby" to /etc/iproute2/rt_protos.d/tabby.conf to see the name in `ip route`.
const RouteProtocol = 201

// AffinityPrefixHost prefixes a node name in IPAMBlock.spec.affinity.
const AffinityPrefixHost = "host:"
