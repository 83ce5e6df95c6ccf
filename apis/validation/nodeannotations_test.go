package validation

import (
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func TestNodeAnnotationsNameTheAnnotation(t *testing.T) {
	for _, c := range []struct {
		key, value string
		ok         bool
	}{
		{v1.AnnotationBGPIPv4Address, "198.51.100.11/24", true},
		{v1.AnnotationBGPIPv4Address, "2001:db8:100::11/64", false},
		{v1.AnnotationBGPIPv6Address, "2001:db8:100::11/64", true},
		{v1.AnnotationBGPIPv6Address, "198.51.100.11/24", false},
		{v1.AnnotationBGPIPv6Address, "::ffff:198.51.100.11/120", false},
		{v1.AnnotationBGPIPv6Address, "fe80::1/64", false},
		{v1.AnnotationBGPIPv6Address, "2001:db8:100::11", false},
		{v1.AnnotationVXLANIPv4TunnelAddress, "10.244.0.2", true},
		{v1.AnnotationVXLANIPv4TunnelAddress, "fd00:10:244::2", false},
		{v1.AnnotationVXLANIPv6TunnelAddress, "fd00:10:244::2", true},
		{v1.AnnotationVXLANIPv6TunnelAddress, "::ffff:10.244.0.2", false},
		{v1.AnnotationVXLANIPv4MAC, "66:0a:0b:0c:0d:0e", true},
		{v1.AnnotationVXLANIPv6MAC, "66:0a:0b:0c:0d", false},
		{v1.AnnotationVXLANIPv6MAC, "00:00:00:00:00:00", false},
		{v1.AnnotationNoBGP, "true", true},
		{v1.AnnotationNoBGP, "yes", false},
	} {
		errs := NodeAnnotations(map[string]string{c.key: c.value})
		if c.ok != (len(errs) == 0) {
			t.Errorf("%s=%s: errors %v, want ok=%v", c.key, c.value, errs, c.ok)
			continue
		}
		if !c.ok && (!strings.Contains(errs[0].Error(), c.key) || !strings.Contains(errs[0].Error(), c.value)) {
			t.Errorf("%s=%s: error %q does not name the annotation and the value", c.key, c.value, errs[0])
		}
	}
}

func TestParseNode(t *testing.T) {
	node := func(ann map[string]string, addrs ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "r1"}, Annotations: ann}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.1"})
		return n
	}
	all := map[string]string{
		v1.AnnotationBGPIPv4Address: "198.51.100.11/24", v1.AnnotationBGPIPv6Address: "2001:db8:100::11/64",
		v1.AnnotationBGPASN: "65010", v1.AnnotationRRClusterID: "244.0.0.1", v1.AnnotationIPIPTunnelAddress: "10.244.0.1",
		v1.AnnotationBGPRestarting:          "2026-11-21T12:00:00Z",
		v1.AnnotationVXLANIPv4TunnelAddress: "10.244.0.2", v1.AnnotationVXLANIPv6TunnelAddress: "fd00:10:244::2",
		v1.AnnotationVXLANIPv4MAC: "66:0a:0b:0c:0d:0e", v1.AnnotationVXLANIPv6MAC: "66:0a:0b:0c:0d:0f",
		v1.AnnotationNoBGP: "true",
	}
	n, errs := ParseNode(node(all, "::ffff:198.51.100.8", "198.51.100.9", "2001:db8:100::9", "198.51.100.10", "2001:db8:100::10"))
	want := model.Node{Name: "n1", Labels: map[string]string{"rack": "r1"},
		BGPAddress: ipfamily.PairOf(netip.MustParsePrefix("198.51.100.11/24"), netip.MustParsePrefix("2001:db8:100::11/64")),
		InternalIP: ipfamily.PairOf(netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr("2001:db8:100::9")),
		ASN:        65010, RRClusterID: "244.0.0.1", IPIPTunnelAddr: netip.MustParseAddr("10.244.0.1"),
		RestartingUntil: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
		VXLANTunnelAddr: ipfamily.PairOf(netip.MustParseAddr("10.244.0.2"), netip.MustParseAddr("fd00:10:244::2")),
		VXLANMAC:        ipfamily.PairOf(model.MAC{0x66, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e}, model.MAC{0x66, 0x0a, 0x0b, 0x0c, 0x0d, 0x0f}),
		NoBGP:           true}
	if len(errs) > 0 || !n.Equal(want) {
		t.Fatalf("ParseNode = %+v, %v; want %+v (the first InternalIP of each family, never a mapped one)", n, errs, want)
	}

	// One bad annotation: none of them count, the rest of the node does.
	bad := maps.Clone(all)
	bad[v1.AnnotationBGPASN] = "sixty-five thousand"
	n, errs = ParseNode(node(bad, "198.51.100.9"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), v1.AnnotationBGPASN) || RestartMarkOnly(errs) {
		t.Fatalf("bad ASN: errors %v, want one naming %s", errs, v1.AnnotationBGPASN)
	}
	if n.BGPAddress.Get(ipfamily.IPv4).IsValid() || n.IPIPTunnelAddr.IsValid() || n.RRClusterID != "" ||
		n.Name != "n1" || n.Labels["rack"] != "r1" || n.InternalIP.Get(ipfamily.IPv4) != netip.MustParseAddr("198.51.100.9") || n.RestartingUntil.IsZero() {
		t.Fatalf("bad ASN: %+v, want no annotation's value but the name, labels, InternalIP and restart mark", n)
	}

	// A bad restart mark is ignored on its own.
	bad = maps.Clone(all)
	bad[v1.AnnotationBGPRestarting] = "tomorrow"
	n, errs = ParseNode(node(bad))
	if len(errs) != 1 || !RestartMarkOnly(errs) || !n.RestartingUntil.IsZero() || n.BGPAddress != want.BGPAddress || n.ASN != 65010 {
		t.Fatalf("bad restart mark: %+v, %v; want the mark ignored and the rest kept", n, errs)
	}

	for _, c := range []struct {
		conds    []corev1.NodeCondition
		notReady bool
	}{
		{nil, false},
		{[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, false},
		{[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}, true},
		{[]corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}, true},
	} {
		k := node(nil)
		k.Status.Conditions = c.conds
		if n, _ := ParseNode(k); n.NotReady != c.notReady {
			t.Errorf("conditions %+v: NotReady %v, want %v", c.conds, n.NotReady, c.notReady)
		}
	}
}
