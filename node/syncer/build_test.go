package syncer

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func TestBuild(t *testing.T) {
	node := func(name string, ann map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.9"}}}}
	}
	in := Inputs{
		NodeName: "a",
		Nodes: []*corev1.Node{
			node("b", map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.12/24", v1.AnnotationRRClusterID: "244.0.0.1"}),
			node("a", map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.11/24", v1.AnnotationBGPIPv6Address: "2001:db8:100::11/64", v1.AnnotationBGPASN: "65010", v1.AnnotationIPIPTunnelAddress: "10.244.0.1"}),
			node("bad", map[string]string{v1.AnnotationBGPIPv4Address: "nonsense"}),
		},
		Pools: []*v1.IPPool{
			{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.IPPoolSpec{CIDR: "10.244.0.0/16", BlockSize: 26}},
			{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: v1.IPPoolSpec{CIDR: "10.0.0.1/8"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "v6"}, Spec: v1.IPPoolSpec{CIDR: "fd00:10:244::/48", IPIPMode: v1.IPIPModeNever}},
			{ObjectMeta: metav1.ObjectMeta{Name: "v6-ipip"}, Spec: v1.IPPoolSpec{CIDR: "fd00:10:245::/48", IPIPMode: v1.IPIPModeAlways}},
		},
		Blocks: []*v1.IPAMBlock{
			{Spec: v1.IPAMBlockSpec{CIDR: "10.244.0.0/26", Affinity: "host:a", Allocations: map[string]v1.Allocation{
				"1": {Handle: "ipip-tunnel-addr-a", Node: "a"},
				"2": {Handle: "net.c1", Namespace: "default", Pod: "web", Node: "a"},
				"3": {Handle: "net.c2", Namespace: "default", Pod: "db", Node: "b"}, // borrowed by b
			}}},
			{Spec: v1.IPAMBlockSpec{CIDR: "10.244.0.64/26", Affinity: "host:b", Allocations: map[string]v1.Allocation{
				"5": {Handle: "net.c3", Namespace: "kube-system", Pod: "dns", Node: "a"}, // borrowed by a
			}}},
		},
		BGPPeers: []*v1.BGPPeer{
			{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: "198.51.100.1", ASNumber: 65001}},
			{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: v1.BGPPeerSpec{PeerIP: "x", ASNumber: 65001}},
		},
	}
	s := Build(in, slog.Default())
	if len(s.Nodes) != 3 || s.Nodes[0].Name != "a" || s.Nodes[1].Name != "b" || s.Nodes[1].RRClusterID != "244.0.0.1" {
		t.Fatalf("nodes = %+v", s.Nodes)
	}
	if a := s.Nodes[0]; a.ASN != 65010 || a.BGPAddress != ipfamily.PairOf(netip.MustParsePrefix("198.51.100.11/24"), netip.MustParsePrefix("2001:db8:100::11/64")) || a.IPIPTunnelAddr != netip.MustParseAddr("10.244.0.1") {
		t.Fatalf("node a = %+v", a)
	}
	if s.Nodes[2].BGPAddress.Get(ipfamily.IPv4).IsValid() || s.Nodes[2].InternalIP.Get(ipfamily.IPv4) != netip.MustParseAddr("198.51.100.9") {
		t.Fatalf("a node with a bad annotation keeps its InternalIP and no BGP address: %+v", s.Nodes[2])
	}
	if len(s.Pools) != 2 || s.Pools[0].Name != "p" || s.Pools[1].Name != "v6" {
		t.Fatalf("pools = %+v (the invalid pools must be skipped)", s.Pools)
	}
	if p := s.Pools[1]; p.Family() != ipfamily.IPv6 || p.BlockSize != 122 || p.CIDR != netip.MustParsePrefix("fd00:10:244::/48") {
		t.Fatalf("IPv6 pool = %+v: want its family's default block size", p)
	}
	if len(s.BGPPeers) != 1 || s.BGPPeers[0].Name != "tor" {
		t.Fatalf("peers = %+v (the invalid peer must be skipped)", s.BGPPeers)
	}
	if len(s.LocalBlocks) != 1 || s.LocalBlocks[0] != netip.MustParsePrefix("10.244.0.0/26") {
		t.Fatalf("local blocks = %v", s.LocalBlocks)
	}
	if len(s.Borrowed) != 1 || s.Borrowed[0] != netip.MustParseAddr("10.244.0.69") {
		t.Fatalf("borrowed = %v", s.Borrowed)
	}
	want := []Workload{
		{IP: netip.MustParseAddr("10.244.0.2"), Interface: names.HostVethName("default", "web", "c1"), Pod: PodKey{Namespace: "default", Name: "web"}},
		{IP: netip.MustParseAddr("10.244.0.69"), Interface: names.HostVethName("kube-system", "dns", "c3"), Pod: PodKey{Namespace: "kube-system", Name: "dns"}},
	}
	if len(s.Workloads) != 2 || s.Workloads[0] != want[0] || s.Workloads[1] != want[1] {
		t.Fatalf("workloads = %+v, want %+v (tunnel address and other nodes' pods excluded)", s.Workloads, want)
	}
	// NetworkPolicy peers: every pod's address, cluster-wide (b's pod too), never the tunnel's.
	if got := fmt.Sprint(s.PodIPs); got != "map[default/db:[10.244.0.3] default/web:[10.244.0.2] kube-system/dns:[10.244.0.69]]" {
		t.Fatalf("pod IPs = %s", got)
	}
	// What IPAM explains, cluster-wide: both blocks and both borrowed addresses (b's in a's
	// block too), never the block's own addresses.
	routable := fmt.Sprint(s.Routable)
	if routable != "[10.244.0.0/26 10.244.0.3/32 10.244.0.64/26 10.244.0.69/32]" {
		t.Fatalf("routable = %s", routable)
	}
}

// tabby.dev/bgp-restarting reaches the node's info; a typo in it is ignored on its own and never
// takes the node's BGP address away.
func TestRestartMark(t *testing.T) {
	node := func(name, mark string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			v1.AnnotationBGPIPv4Address: "198.51.100.11/24", v1.AnnotationBGPRestarting: mark}}}
	}
	s := Build(Inputs{NodeName: "a", Nodes: []*corev1.Node{node("a", "2026-11-21T12:00:00Z"), node("b", "tomorrow")}}, slog.Default())
	want := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if len(s.Nodes) != 2 || !s.Nodes[0].RestartingUntil.Equal(want) {
		t.Fatalf("marked node: %+v, want RestartingUntil %v", s.Nodes, want)
	}
	if !s.Nodes[1].RestartingUntil.IsZero() || !s.Nodes[1].BGPAddress.Get(ipfamily.IPv4).IsValid() {
		t.Fatalf("node with a bad mark: %+v, want no mark and its BGP address", s.Nodes[1])
	}
	if errs := validation.NodeAnnotations(map[string]string{v1.AnnotationBGPRestarting: "tomorrow"}); len(errs) != 1 || !strings.Contains(errs[0].Error(), v1.AnnotationBGPRestarting) {
		t.Fatalf("validation of a bad mark: %v", errs)
	}
}
