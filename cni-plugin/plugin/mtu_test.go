package plugin_test

import (
	"context"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/cni-plugin/cnitest"
)

// encapPool creates an IPv4 pool of its own for one test, with spec set up by mutate.
func encapPool(t *testing.T, h *harness, prefix, cidr string, mutate func(*v1.IPPoolSpec)) string {
	t.Helper()
	name := prefix + "-" + randSuffix()
	spec := v1.IPPoolSpec{CIDR: cidr, BlockSize: 28}
	mutate(&spec)
	if _, err := env.Client.IPPools().Create(h.ctx, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Client.IPPools().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// poolsConf is the tabby plugin entry that allocates from the named pools, with extra keys.
func (h *harness) poolsConf(extra map[string]any, pools ...string) map[string]any {
	c := map[string]any{"ipam": map[string]any{"type": "tabby-ipam", "pools": pools}}
	for k, v := range extra {
		c[k] = v
	}
	return h.tabbyConf(c)
}

// With no "mtu", a pod gets the uplink's MTU minus the outer headers of its pool's
// encapsulation: 20 for IPIP, 50 for VXLAN over IPv4; a pod in a native pool gets the uplink's.
func TestEncapMTU(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		name, cidr string
		mutate     func(*v1.IPPoolSpec)
		mtu        int
	}{
		{"ipip", "10.244.96.0/24", func(s *v1.IPPoolSpec) { s.IPIPMode = v1.IPIPModeAlways }, cnitest.UplinkMTU - 20},
		{"vxlan", "10.244.97.0/24", func(s *v1.IPPoolSpec) { s.VXLANMode = v1.VXLANModeCrossSubnet }, cnitest.UplinkMTU - 50},
		{"native", "10.244.98.0/24", func(*v1.IPPoolSpec) {}, cnitest.UplinkMTU},
	} {
		pool := encapPool(t, h, c.name, c.cidr, c.mutate)
		list := h.list("1.1.0", h.poolsConf(nil, pool))
		p := h.newPod(c.name)
		ip := h.mustAdd(list, p)
		if !netip.MustParsePrefix(c.cidr).Contains(ip) {
			t.Fatalf("%s: IP %s not from pool %s", c.name, ip, pool)
		}
		h.assertWired(p, ip, c.mtu)
		if err := h.node.Del(h.ctx, list, p.rt); err != nil {
			t.Fatal(err)
		}
	}
	h.assertClean("after DEL")
}

// A dual-stack pod's one interface carries both families: its MTU leaves room for the larger
// overhead of its two pools (IPv6 VXLAN's 70 over IPIP's 20), unless the configuration sets
// "mtu", which wins.
func TestDualStackEncapMTU(t *testing.T) {
	h := newHarness(t)
	_, pool6 := dualStackNode(t, h, func(p *v1.IPPool) { p.Spec.VXLANMode = v1.VXLANModeAlways })
	pool4 := encapPool(t, h, "ipip", "10.244.99.0/24", func(s *v1.IPPoolSpec) { s.IPIPMode = v1.IPIPModeAlways })
	for _, c := range []struct {
		name  string
		extra map[string]any
		mtu   int
	}{
		{"derived", nil, cnitest.UplinkMTU - 70},
		{"configured", map[string]any{"mtu": 1300}, 1300},
	} {
		list := h.list("1.1.0", h.poolsConf(c.extra, pool4, pool6))
		p := h.newPod(c.name)
		if err := h.add(list, p); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		v4, v6 := podIPs(t, p)
		if !v4.IsValid() || !v6.IsValid() {
			t.Fatalf("%s: addresses %v %v, want one of each family", c.name, v4, v6)
		}
		h.assertWired(p, v4, c.mtu)
		if err := h.node.Del(h.ctx, list, p.rt); err != nil {
			t.Fatal(err)
		}
	}
	h.assertClean("after DEL")
}
