package node

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/version"
)

// tabby-node publishes the addresses it detected (and its version) and nothing else: a node that lost its IPv6
// address loses the annotation (else its peers would keep sending IPv6 to it), and an unchanged
// node costs no write.
func TestRecordAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server")
	}
	env := testenv.Start(t)
	ctx := context.Background()
	nodes := env.Kube.CoreV1().Nodes()
	n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "addr-a", Annotations: map[string]string{
		v1.AnnotationBGPIPv4Address: "198.51.100.11/24", v1.AnnotationBGPIPv6Address: "2001:db8:100::99/64",
	}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: Config{NodeName: "addr-a"}, client: env.Client}
	v4, v6 := netip.MustParsePrefix("198.51.100.11/24"), netip.MustParsePrefix("2001:db8:100::11/64")
	record := func(addr6 netip.Prefix) *corev1.Node {
		t.Helper()
		if err := a.recordAddresses(ctx, n, ipfamily.PairOf(v4, addr6)); err != nil {
			t.Fatal(err)
		}
		got, err := nodes.Get(ctx, "addr-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	n = record(netip.Prefix{})
	if v, ok := n.Annotations[v1.AnnotationBGPIPv6Address]; ok {
		t.Fatalf("IPv6 off, annotation still %q", v)
	}
	n = record(v6)
	if got := n.Annotations[v1.AnnotationBGPIPv6Address]; got != v6.String() || n.Annotations[v1.AnnotationBGPIPv4Address] != v4.String() {
		t.Fatalf("annotations %v", n.Annotations)
	}
	// The agent's version, which `tabbyctl version` reads without the chart's ConfigMap.
	if got := n.Annotations[v1.AnnotationVersion]; got != version.Version {
		t.Fatalf("version annotation %q, want %q", got, version.Version)
	}
	rv := n.ResourceVersion
	if again := record(v6); again.ResourceVersion != rv {
		t.Fatalf("unchanged addresses wrote the Node (resourceVersion %s -> %s)", rv, again.ResourceVersion)
	}
	if _, ok := n.Annotations[v1.AnnotationNoBGP]; ok {
		t.Fatalf("a node with BGP says it has none: %v", n.Annotations)
	}

	// Without BGP the node says so, and keeps its addresses (the underlay VXLAN runs over);
	// with BGP again, the mark goes.
	a.cfg.BGP = BGPNone
	if n = record(v6); n.Annotations[v1.AnnotationNoBGP] != "true" || n.Annotations[v1.AnnotationBGPIPv4Address] != v4.String() {
		t.Fatalf("--bgp=none: annotations %v", n.Annotations)
	}
	a.cfg.BGP = BGPBird
	if n = record(v6); n.Annotations[v1.AnnotationNoBGP] != "" {
		t.Fatalf("BGP back on: annotations %v", n.Annotations)
	}
}
