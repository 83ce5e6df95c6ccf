package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
)

const (
	rrClusterID = "244.0.0.1"
	torPassword = "tabby-lab-md5"
)

// TestRouteReflectors: 2 route reflectors + 4 clients with the mesh off, and a ToR (FRR) peering
// eBGP with TCP MD5 with both reflectors. Every pod reaches every pod and is reachable from the
// ToR; clients hold sessions to the reflectors only.
func TestRouteReflectors(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 5*time.Minute)
	if err := l.UseRouteReflectors(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Kube.CoreV1().Secrets(lab.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tor-bgp"},
		StringData: map[string]string{"password": torPassword},
	}, metav1.CreateOptions{}); err != nil {
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
	// The reflectors peer with the ToR once it runs (a configured peer that is not there yet
	// holds a node's readiness for the 30 s in-sync grace, waiting for its End-of-RIB).
	tor := &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{
		NodeSelector: "has(" + lab.RouteReflectorLabel + ")", PeerIP: lab.RouterA.String(), ASNumber: lab.DefaultToRASN,
		Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "tor-bgp", Key: "password"}},
	}}
	if _, err := l.Client.BGPPeers().Create(ctx, tor); err != nil {
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

	// Service advertisement: the cluster IP range reaches the ToR's kernel from the reflectors
	// (the nodes that peer with it), and no node routes it.
	svc := netip.MustParsePrefix("203.0.113.192/27")
	cfg, err := l.Client.BGPConfigurations().Get(ctx, v1.DefaultBGPConfigurationName)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Spec.ServiceClusterIPs = []v1.ServiceCIDR{{CIDR: svc.String()}}
	if _, err := l.Client.BGPConfigurations().Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var svcRoute lab.Route
	if err := lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		rs, err := l.Router().Routes(ctx)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Dst == svc.String() {
				svcRoute = r
				return nil
			}
		}
		return fmt.Errorf("the ToR has no route for service range %s", svc)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("ToR routes the service range: %s", svcRoute)
	for _, n := range nodes {
		rs, err := n.TabbyRoutes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(rs, func(r lab.Route) bool { return r.Dst == svc.String() }); i >= 0 {
			t.Errorf("%s routes the service range: %s", n.Name, rs[i])
		}
	}

	// Blocks released by a client (IPAMBlock and BlockAffinity deleted, as IPAM releases an
	// empty block) vanish from every node and the ToR, although both reflectors hold each
	// other's reflected copy of them.
	var extra []netip.Prefix
	owners := map[netip.Prefix]*lab.Node{}
	for i, c := range clients[:2] {
		for j := range 4 {
			b := netip.MustParsePrefix(fmt.Sprintf("10.244.%d.%d/26", 240+i, 64*j))
			claimBlock(t, ctx, l, c.Name, b)
			extra = append(extra, b)
			owners[b] = c
		}
	}
	routers := append(slices.Clone(nodes), nil) // nil: the ToR
	routesOf := func(ctx context.Context, n *lab.Node) ([]lab.Route, string, error) {
		if n == nil {
			rs, err := l.Router().Routes(ctx)
			return rs, "the ToR", err
		}
		rs, err := n.TabbyRoutes(ctx)
		return rs, n.Name, err
	}
	for _, n := range routers {
		err := lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			rs, name, err := routesOf(ctx, n)
			if err != nil {
				return err
			}
			for _, b := range extra {
				if n == owners[b] {
					continue
				}
				if !slices.ContainsFunc(rs, func(r lab.Route) bool { return r.Dst == b.String() }) {
					return fmt.Errorf("%s has no route for %s of %s", name, b, owners[b].Name)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for _, b := range extra {
		releaseBlock(t, ctx, l, owners[b].Name, b)
	}
	for _, n := range routers {
		err := lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			rs, name, err := routesOf(ctx, n)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if p, err := netip.ParsePrefix(orHost(r.Dst)); err == nil && slices.Contains(extra, p) {
					return fmt.Errorf("%s still routes released block: %s", name, r)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d released blocks gone from every node and the ToR in %s", len(extra), time.Since(start).Round(time.Millisecond))
	requireReach(t, ctx, "pod to pod after the release", podEndpoints(pods), podEndpoints(pods), 30*time.Second)
}

// orHost gives ip's host-route destinations ("10.244.0.5") their prefix length.
func orHost(dst string) string {
	if strings.Contains(dst, "/") {
		return dst
	}
	return dst + "/32"
}

// claimBlock gives node an IPAM block the way tabby's IPAM claims one (pending affinity, block,
// confirmed affinity).
func claimBlock(t *testing.T, ctx context.Context, l *lab.Lab, node string, b netip.Prefix) {
	t.Helper()
	aff := &v1.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: names.AffinityName(node, b)},
		Spec: v1.BlockAffinitySpec{Node: node, CIDR: b.String(), State: v1.AffinityPending}}
	aff, err := l.Client.BlockAffinities().Create(ctx, aff)
	if err != nil {
		t.Fatalf("create BlockAffinity for %s: %v", b, err)
	}
	blk := &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(b)},
		Spec: v1.IPAMBlockSpec{CIDR: b.String(), Affinity: v1.AffinityPrefixHost + node}}
	if _, err := l.Client.IPAMBlocks().Create(ctx, blk); err != nil {
		t.Fatalf("create IPAMBlock %s: %v", b, err)
	}
	aff.Spec.State = v1.AffinityConfirmed
	if _, err := l.Client.BlockAffinities().Update(ctx, aff); err != nil {
		t.Fatalf("confirm BlockAffinity %s: %v", aff.Name, err)
	}
}

// releaseBlock deletes an empty block and its affinity, as IPAM releases one.
func releaseBlock(t *testing.T, ctx context.Context, l *lab.Lab, node string, b netip.Prefix) {
	t.Helper()
	if err := l.Client.IPAMBlocks().Delete(ctx, names.BlockName(b), metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete IPAMBlock %s: %v", b, err)
	}
	if err := l.Client.BlockAffinities().Delete(ctx, names.AffinityName(node, b), metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete BlockAffinity for %s: %v", b, err)
	}
}
