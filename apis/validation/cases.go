package validation

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

// Case is an object and the field its refusal must name ("" = valid). Unit tests run the table
// through this package; integration tests through the real API server: the two must agree.
type Case struct {
	Name  string
	Obj   runtime.Object
	Field string
}

func pool(name, cidr string, blockSize int, mode v1.IPIPMode) *v1.IPPool {
	return &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.IPPoolSpec{CIDR: cidr, BlockSize: blockSize, IPIPMode: mode}}
}

func vxlanPool(name, cidr string, ipip v1.IPIPMode, vxlan v1.VXLANMode) *v1.IPPool {
	p := pool(name, cidr, 0, ipip)
	p.Spec.VXLANMode = vxlan
	return p
}

// lbPool is a LoadBalancer pool (smaller than a block: it has none); change edits its spec.
func lbPool(name, cidr string, change func(*v1.IPPoolSpec)) *v1.IPPool {
	p := pool(name, cidr, 0, "")
	p.Spec.AllowedUses = []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}
	if change != nil {
		change(&p.Spec)
	}
	return p
}

func peer(name string, spec v1.BGPPeerSpec) *v1.BGPPeer {
	return &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func u32(v uint32) *uint32 { return &v }
func i32(v int32) *int32   { return &v }

func intp(v int) *int { return &v }

func bfd(minRx, minTx string, mult int32) *v1.BFD {
	b := &v1.BFD{Enabled: true, Multiplier: &mult}
	if d, err := time.ParseDuration(minRx); err == nil {
		b.MinRx = &metav1.Duration{Duration: d}
	}
	if d, err := time.ParseDuration(minTx); err == nil {
		b.MinTx = &metav1.Duration{Duration: d}
	}
	return b
}

func bgpconfigBFD(b *v1.BFD) *v1.BGPConfiguration {
	return &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{BFD: b}}
}

func felixConfig(name string, spec v1.FelixConfigurationSpec) *v1.FelixConfiguration {
	return &v1.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// Cases is the shared table of valid and invalid objects.
var Cases = []Case{
	{"pool ok", pool("ok", "10.244.0.0/16", 26, v1.IPIPModeCrossSubnet), ""},
	{"pool defaults", pool("defaults", "10.245.0.0/16", 0, ""), ""},
	{"pool bad cidr", pool("badcidr", "10.244.0.0/33", 26, ""), "cidr"},
	{"pool not a cidr", pool("notcidr", "banana", 26, ""), "cidr"},
	{"pool host bits", pool("hostbits", "10.244.0.1/16", 26, ""), "cidr"},
	{"pool blockSize 19", pool("bs19", "10.244.0.0/16", 19, ""), "blockSize"},
	{"pool blockSize 33", pool("bs33", "10.244.0.0/16", 33, ""), "blockSize"},
	{"pool ipipMode Sometimes", pool("sometimes", "10.244.0.0/16", 26, "Sometimes"), "ipipMode"},
	{"pool smaller than block", pool("small", "10.244.0.0/28", 26, ""), "blockSize"},
	{"pool smaller than the default block", pool("smalldef", "10.244.0.0/28", 0, ""), "blockSize"},
	{"pool IPv4 with an IPv6 block size", pool("bs122", "10.244.0.0/16", 122, ""), "blockSize"},
	{"pool IPv4-mapped", pool("mapped", "::ffff:10.244.0.0/112", 122, ""), "cidr"},
	{"pool6 ok", pool("v6", "fd00:10:244::/48", 122, v1.IPIPModeNever), ""},
	{"pool6 defaults", pool("v6defaults", "fd00:10:245::/64", 0, ""), ""},
	{"pool6 blockSize 116", pool("v6bs116", "fd00:10:246::/64", 116, ""), ""},
	{"pool6 blockSize 128", pool("v6bs128", "fd00:10:247::/120", 128, ""), ""},
	{"pool6 blockSize 115", pool("v6bs115", "fd00:10:244::/48", 115, ""), "blockSize"},
	{"pool6 blockSize 129", pool("v6bs129", "fd00:10:244::/48", 129, ""), "blockSize"},
	{"pool6 IPv4 block size", pool("v6bs26", "fd00:10:244::/48", 26, ""), "blockSize"},
	{"pool6 host bits", pool("v6hostbits", "fd00:10:244::1/48", 122, ""), "cidr"},
	{"pool6 smaller than the default block", pool("v6small", "fd00:10:244::/124", 0, ""), "blockSize"},
	{"pool vxlanMode Always", vxlanPool("vx", "10.244.0.0/16", "", v1.VXLANModeAlways), ""},
	{"pool vxlanMode CrossSubnet", vxlanPool("vxcross", "10.244.0.0/16", v1.IPIPModeNever, v1.VXLANModeCrossSubnet), ""},
	{"pool6 vxlanMode Always", vxlanPool("v6vx", "fd00:10:244::/48", "", v1.VXLANModeAlways), ""},
	{"pool vxlanMode with ipipMode", vxlanPool("vxipip", "10.244.0.0/16", v1.IPIPModeAlways, v1.VXLANModeCrossSubnet), "vxlanMode"},
	{"pool vxlanMode Sometimes", vxlanPool("vxsometimes", "10.244.0.0/16", "", "Sometimes"), "vxlanMode"},
	{"pool6 ipipMode Always", pool("v6ipip", "fd00:10:244::/48", 122, v1.IPIPModeAlways), "ipipMode"},
	{"pool6 ipipMode CrossSubnet", pool("v6cross", "fd00:10:244::/48", 0, v1.IPIPModeCrossSubnet), "ipipMode"},
	{"pool LoadBalancer", lbPool("lb", "198.51.100.192/27", nil), ""},
	{"pool6 LoadBalancer Manual", lbPool("lb6", "2001:db8:ff::/120", func(s *v1.IPPoolSpec) { s.AssignmentMode = v1.AssignmentModeManual }), ""},
	{"pool Workload smaller than a block", lbPool("wsmall", "10.244.0.0/27", func(s *v1.IPPoolSpec) { s.AllowedUses = []v1.IPPoolUse{v1.IPPoolUseWorkload} }), "blockSize"},
	{"pool Workload and Tunnel", lbPool("wt", "10.244.0.0/16", func(s *v1.IPPoolSpec) { s.AllowedUses = []v1.IPPoolUse{v1.IPPoolUseWorkload, v1.IPPoolUseTunnel} }), ""},
	{"pool LoadBalancer with Workload", lbPool("lbw", "198.51.100.192/27", func(s *v1.IPPoolSpec) { s.AllowedUses = append(s.AllowedUses, v1.IPPoolUseWorkload) }), "allowedUses"},
	{"pool LoadBalancer with IPIP", lbPool("lbipip", "198.51.100.192/27", func(s *v1.IPPoolSpec) { s.IPIPMode = v1.IPIPModeAlways }), "allowedUses"},
	{"pool LoadBalancer with nodeSelector", lbPool("lbsel", "198.51.100.192/27", func(s *v1.IPPoolSpec) { s.NodeSelector = "rack == 'a'" }), "allowedUses"},
	{"pool use Anything", lbPool("anything", "10.244.0.0/16", func(s *v1.IPPoolSpec) { s.AllowedUses = []v1.IPPoolUse{"Anything"} }), "allowedUses"},
	{"pool Workload twice", lbPool("ww", "10.244.0.0/16", func(s *v1.IPPoolSpec) { s.AllowedUses = []v1.IPPoolUse{v1.IPPoolUseWorkload, v1.IPPoolUseWorkload} }), "allowedUses"},
	{"pool nodeSelector too long", lbPool("longsel", "10.244.0.0/16", func(s *v1.IPPoolSpec) {
		s.AllowedUses, s.NodeSelector = nil, "rack in {'"+strings.Repeat("r", 1024)+"'}"
	}), "nodeSelector"},
	{"pool assignmentMode Sometimes", lbPool("lbsometimes", "198.51.100.192/27", func(s *v1.IPPoolSpec) { s.AssignmentMode = "Sometimes" }), "assignmentMode"},
	{"peer ok", peer("tor", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001}), ""},
	{"peer with port", peer("tor-port", v1.BGPPeerSpec{PeerIP: "198.51.100.1:1179", ASNumber: 65001, Node: "node-a"}), ""},
	{"peer IPv6", peer("tor6", v1.BGPPeerSpec{PeerIP: "2001:db8:100::1", ASNumber: 65001}), ""},
	{"peer IPv6 with port", peer("tor6-port", v1.BGPPeerSpec{PeerIP: "[2001:db8:100::1]:1179", ASNumber: 65001}), ""},
	{"peer IPv6 link-local", peer("tor6-ll", v1.BGPPeerSpec{PeerIP: "fe80::1", ASNumber: 65001}), "peerIP"},
	{"peer IPv6 brackets without port", peer("tor6-br", v1.BGPPeerSpec{PeerIP: "[2001:db8:100::1]", ASNumber: 65001}), "peerIP"},
	{"peer IPv6 bad port", peer("tor6-badport", v1.BGPPeerSpec{PeerIP: "[2001:db8:100::1]:70000", ASNumber: 65001}), "peerIP"},
	{"peer IPv4 in brackets", peer("tor4-br", v1.BGPPeerSpec{PeerIP: "[198.51.100.1]:179", ASNumber: 65001}), "peerIP"},
	{"peer IPv4-mapped IPv6", peer("tor-mapped", v1.BGPPeerSpec{PeerIP: "::ffff:198.51.100.1", ASNumber: 65001}), "peerIP"},
	{"peer selector", peer("rr", v1.BGPPeerSpec{NodeSelector: "!has(tabby.dev/route-reflector)", PeerSelector: "has(tabby.dev/route-reflector)"}), ""},
	{"peer asNumber 0", peer("as0", v1.BGPPeerSpec{PeerIP: "198.51.100.1"}), "asNumber"},
	{"peer ip not an ip", peer("notip", v1.BGPPeerSpec{PeerIP: "tor-1.example", ASNumber: 65001}), "peerIP"},
	{"peer bad port", peer("badport", v1.BGPPeerSpec{PeerIP: "198.51.100.1:70000", ASNumber: 65001}), "peerIP"},
	{"peer node and nodeSelector", peer("both", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, Node: "a", NodeSelector: "all()"}), "nodeSelector"},
	{"peer neither ip nor selector", peer("neither", v1.BGPPeerSpec{ASNumber: 65001}), "peerIP"},
	{"peer maxRestartTime 500ms", peer("gr-short", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, MaxRestartTime: &metav1.Duration{Duration: 500 * time.Millisecond}}), "maxRestartTime"},
	{"peer node too long", peer("longnode", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, Node: strings.Repeat("n", 254)}), "node"},
	{"peer 17 filters", peer("filters17", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, Filters: strings.Split("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", ",")}), "filters"},
	{"peer bfd ok", peer("bfd", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, BFD: bfd("300ms", "300ms", 3)}), ""},
	{"peer bfd edges", peer("bfd-edges", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, BFD: bfd("10ms", "60s", 255)}), ""},
	{"peer bfd defaults", peer("bfd-defaults", v1.BGPPeerSpec{PeerIP: "2001:db8:100::1", ASNumber: 65001, BFD: &v1.BFD{Enabled: true}}), ""},
	{"peer bfd minRx 5ms", peer("bfd-rx", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, BFD: bfd("5ms", "300ms", 3)}), "bfd.minRx"},
	{"peer bfd minTx 61s", peer("bfd-tx", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, BFD: bfd("300ms", "61s", 3)}), "bfd.minTx"},
	{"peer bfd multiplier 1", peer("bfd-m1", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, BFD: bfd("300ms", "300ms", 1)}), "bfd.multiplier"},
	{"peer bfd multiplier 256", peer("bfd-m256", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, BFD: bfd("300ms", "300ms", 256)}), "bfd.multiplier"},
	{"peer bfd multihop", peer("bfd-mh", v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001, EBGPMultihop: 2, BFD: bfd("300ms", "300ms", 3)}), "bfd.enabled"},
	// The one valid BGPConfiguration (a singleton): service CIDRs of both families.
	{"bgpconfig ok", &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{ASNumber: u32(65000), MaxPaths: i32(2),
		ServiceClusterIPs:      []v1.ServiceCIDR{{CIDR: "203.0.113.0/26"}, {CIDR: "2001:db8:96::/112"}},
		ServiceExternalIPs:     []v1.ServiceCIDR{{CIDR: "2001:db8:ffff:ffff:ffff:ffff:ffff:ff00/120"}},
		ServiceLoadBalancerIPs: []v1.ServiceCIDR{{CIDR: "198.51.100.224/27"}},
		BFD:                    bfd("300ms", "300ms", 3)}}, ""},
	{"bgpconfig service CIDR host bits", &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.BGPConfigurationSpec{ServiceClusterIPs: []v1.ServiceCIDR{{CIDR: "2001:db8:96::1/112"}}}}, "serviceClusterIPs"},
	{"bgpconfig service CIDR not a CIDR", &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.BGPConfigurationSpec{ServiceExternalIPs: []v1.ServiceCIDR{{CIDR: "203.0.113.0"}}}}, "serviceExternalIPs"},
	{"bgpconfig LoadBalancer CIDR host bits", &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.BGPConfigurationSpec{ServiceLoadBalancerIPs: []v1.ServiceCIDR{{CIDR: "198.51.100.225/27"}}}}, "serviceLoadBalancerIPs"},
	{"bgpconfig maxPaths 0", &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{MaxPaths: i32(0)}}, "maxPaths"},
	{"bgpconfig maxPaths 65", &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{MaxPaths: i32(65)}}, "maxPaths"},
	{"bgpconfig bfd minRx 0s", bgpconfigBFD(bfd("0s", "", 3)), "bfd.minRx"},
	{"bgpconfig bfd multiplier 0", bgpconfigBFD(bfd("", "", 0)), "bfd.multiplier"},
	{"bgpconfig asNumber 0", &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.BGPConfigurationSpec{ASNumber: u32(0)}}, "asNumber"},
	{"bgpconfig not default", &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, "metadata.name"},
	// The one valid FelixConfiguration (a singleton): every field at an edge of its range.
	{"felixconfig ok", felixConfig("default", v1.FelixConfigurationSpec{VXLANVNI: intp(1<<24 - 1), VXLANPort: intp(1), VXLANMTU: intp(0), VXLANMTUV6: intp(65535),
		FlowLogs: &v1.FlowLogsSpec{Enabled: true, FlushInterval: &metav1.Duration{Duration: 10 * time.Minute}, MaxRecords: intp(100)}}), ""},
	{"felixconfig not default", felixConfig("other", v1.FelixConfigurationSpec{}), "metadata.name"},
	{"felixconfig VNI 0", felixConfig("default", v1.FelixConfigurationSpec{VXLANVNI: intp(0)}), "vxlanVNI"},
	{"felixconfig VNI 2^24", felixConfig("default", v1.FelixConfigurationSpec{VXLANVNI: intp(1 << 24)}), "vxlanVNI"},
	{"felixconfig port 0", felixConfig("default", v1.FelixConfigurationSpec{VXLANPort: intp(0)}), "vxlanPort"},
	{"felixconfig port 65536", felixConfig("default", v1.FelixConfigurationSpec{VXLANPort: intp(65536)}), "vxlanPort"},
	{"felixconfig MTU negative", felixConfig("default", v1.FelixConfigurationSpec{VXLANMTU: intp(-1)}), "vxlanMTU"},
	{"felixconfig MTUV6 65536", felixConfig("default", v1.FelixConfigurationSpec{VXLANMTUV6: intp(65536)}), "vxlanMTUV6"},
	{"felixconfig flush interval 500ms", felixConfig("default", v1.FelixConfigurationSpec{FlowLogs: &v1.FlowLogsSpec{FlushInterval: &metav1.Duration{Duration: 500 * time.Millisecond}}}), "flushInterval"},
	{"felixconfig flush interval 11m", felixConfig("default", v1.FelixConfigurationSpec{FlowLogs: &v1.FlowLogsSpec{FlushInterval: &metav1.Duration{Duration: 11 * time.Minute}}}), "flushInterval"},
	{"felixconfig max records 99", felixConfig("default", v1.FelixConfigurationSpec{FlowLogs: &v1.FlowLogsSpec{MaxRecords: intp(99)}}), "maxRecords"},
}

// Object dispatches to the validator of obj's kind.
func Object(obj runtime.Object) error {
	var errs field.ErrorList
	switch o := obj.(type) {
	case *v1.IPPool:
		errs = IPPool(o)
	case *v1.BGPPeer:
		errs = BGPPeer(o)
	case *v1.BGPConfiguration:
		errs = BGPConfiguration(o)
	case *v1.FelixConfiguration:
		errs = FelixConfiguration(o)
	case *v1.BGPFilter:
		errs = BGPFilter(o)
	default:
		return nil
	}
	if len(errs) == 0 {
		return nil
	}
	return errs.ToAggregate()
}
