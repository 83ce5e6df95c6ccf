package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
)

const (
	rrClusterID = "244.0.0.1"
	torPassword = "tabby-lab-md5"
)

// meshOff turns the node-to-node mesh off and writes the route-reflector peerings: clients peer
// with the reflectors, the reflectors with each other.
func meshOff(t *testing.T, ctx context.Context, l *lab.Lab) {
	t.Helper()
	off := false
	cfg, err := l.Client.BGPConfigurations().Get(ctx, v1.DefaultBGPConfigurationName)
	switch {
	case apierrors.IsNotFound(err):
		cfg = &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultBGPConfigurationName}, Spec: v1.BGPConfigurationSpec{NodeToNodeMeshEnabled: &off}}
		_, err = l.Client.BGPConfigurations().Create(ctx, cfg)
	case err == nil:
		cfg.Spec.NodeToNodeMeshEnabled = &off
		_, err = l.Client.BGPConfigurations().Update(ctx, cfg)
	}
	if err != nil {
		t.Fatalf("BGPConfiguration: %v", err)
	}
	rr := "has(" + lab.RouteReflectorLabel + ")"
	for _, p := range []*v1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "rr-clients"}, Spec: v1.BGPPeerSpec{NodeSelector: "!" + rr, PeerSelector: rr}},
		{ObjectMeta: metav1.ObjectMeta{Name: "rr-mesh"}, Spec: v1.BGPPeerSpec{NodeSelector: rr, PeerSelector: rr}},
	} {
		if _, err := l.Client.BGPPeers().Create(ctx, p); err != nil {
			t.Fatalf("BGPPeer %s: %v", p.Name, err)
		}
	}
}

// TestRouteReflectors: 2 route reflectors + 4 clients with the mesh off, and a ToR (FRR) peering
// eBGP with TCP MD5 with both reflectors. Every pod reaches every pod and is reachable from the
// ToR; clients hold sessions to the reflectors only.
func TestRouteReflectors(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 5*time.Minute)
	meshOff(t, ctx, l)
	if _, err := l.Kube.CoreV1().Secrets(lab.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tor-bgp"},
		StringData: map[string]string{"password": torPassword},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tor := &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{
		NodeSelector: "has(" + lab.RouteReflectorLabel + ")", PeerIP: lab.RouterA.String(), ASNumber: lab.DefaultToRASN,
		Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "tor-bgp", Key: "password"}},
	}}
	if _, err := l.Client.BGPPeers().Create(ctx, tor); err != nil {
		t.Fatal(err)
	}

	specs := []lab.NodeSpec{
		{Name: "rr-1", RouteReflectorClusterID: rrClusterID},
		{Name: "rr-2", RouteReflectorClusterID: rrClusterID},
	}
	specs = append(specs, nodeSpecs(4)...)
	nodes := addNodes(t, ctx, l, specs...)
	rrs, clients := nodes[:2], nodes[2:]
	var nbs []lab.BGPNeighbor
	for _, r := range rrs {
		nbs = append(nbs, lab.BGPNeighbor{Addr: r.IP(), ASN: v1.DefaultASNumber, Password: torPassword})
	}
	if err := l.Router().StartFRR(ctx, lab.FRROptions{Neighbors: nbs, Zebra: true}); err != nil {
		t.Fatal(err)
	}
	pods := addPodsPerNode(t, ctx, l, nodes, 1)

	requireReach(t, ctx, "pod to pod", podEndpoints(pods), podEndpoints(pods), 45*time.Second)
	requireReach(t, ctx, "ToR to pod", []lab.Endpoint{l.Router().Endpoint()}, podEndpoints(pods), 30*time.Second)
	for _, c := range clients {
		if err := c.WaitPeers(ctx, 10*time.Second, ips(rrs...)...); err != nil {
			t.Error(err)
		}
	}
	for i, r := range rrs {
		want := append(ips(clients...), rrs[1-i].IP(), lab.RouterA)
		if err := r.WaitPeers(ctx, 10*time.Second, want...); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}
	// The ToR learned every node's blocks (that is how it reaches the pods): say so.
	rs, err := l.Router().Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rs {
		if p, err := netip.ParsePrefix(r.Dst); err == nil && lab.PodCIDR.Overlaps(p) {
			n++
		}
	}
	t.Logf("ToR holds %d pod routes learned by BGP", n)
}
