package plugin_test

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/cni-plugin/cnitest"
)

// dualStackNode gives the harness's node an IPv6 pool of its own (selected by a label only
// this node has, so other tests' pods stay IPv4-only, and changed by mutate) and IPv6
// forwarding in its namespace. It returns the pool's range and name.
func dualStackNode(t *testing.T, h *harness, mutate ...func(*v1.IPPool)) (netip.Prefix, string) {
	t.Helper()
	suffix := randSuffix()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"tabby-test-dualstack": suffix}}})
	if _, err := env.Kube.CoreV1().Nodes().Patch(h.ctx, h.nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cidr := netip.MustParsePrefix("fd00:10:244:" + suffix[:4] + "::/64")
	name := "v6-" + suffix
	pool := &v1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.IPPoolSpec{CIDR: cidr.String(), NodeSelector: "tabby-test-dualstack == '" + suffix + "'"},
	}
	for _, m := range mutate {
		m(pool)
	}
	if _, err := env.Client.IPPools().Create(h.ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Client.IPPools().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if err := h.node.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	return cidr, name
}

func podIPs(t *testing.T, p *pod) (v4, v6 netip.Addr) {
	t.Helper()
	for _, c := range p.res.IPs {
		ip, _ := netip.AddrFromSlice(c.Address.IP)
		ip = ip.Unmap()
		ones, bits := c.Address.Mask.Size()
		if ones != bits || ones != ip.BitLen() {
			t.Fatalf("address %s is not a host prefix", &c.Address)
		}
		want := net.ParseIP("169.254.1.1")
		if ip.Is6() {
			want = net.ParseIP("fe80::ecee:eeff:feee:eeee")
		}
		if !c.Gateway.Equal(want) {
			t.Errorf("address %s: gateway %s, want %s", ip, c.Gateway, want)
		}
		if ip.Is4() {
			v4 = ip
		} else {
			v6 = ip
		}
	}
	return v4, v6
}

// One ADD gives the pod an address of each family; both work across the host at once (no DAD
// wait), CHECK watches both, DEL leaves nothing of either.
func TestDualStack(t *testing.T) {
	h := newHarness(t)
	pool6, _ := dualStackNode(t, h)
	list := h.list("1.1.0")
	a, b := h.newPod("a"), h.newPod("b")
	for _, p := range []*pod{a, b} {
		if err := h.add(list, p); err != nil {
			t.Fatalf("ADD: %v", err)
		}
		if len(p.res.IPs) != 2 || len(p.res.Routes) != 2 {
			t.Fatalf("result %+v: want two addresses and two default routes", p.res)
		}
	}
	a4, a6 := podIPs(t, a)
	b4, b6 := podIPs(t, b)
	if !a4.IsValid() || !pool6.Contains(a6) || !pool6.Contains(b6) {
		t.Fatalf("addresses %s %s %s %s: want IPv4 and IPv6 from %s", a4, a6, b4, b6, pool6)
	}
	for _, c := range []struct {
		from *pod
		to   netip.Addr
	}{{a, b4}, {a, b6}, {b, a6}} {
		if err := cnitest.Ping(c.from.ns.Path(), c.to.AsSlice()); err != nil {
			t.Errorf("ping %s: %v", c.to, err)
		}
	}
	if err := h.node.Check(h.ctx, list, a.rt); err != nil {
		t.Fatalf("CHECK of a complete attachment: %v", err)
	}
	// Someone removes the pod's /128 host route: CHECK says so.
	if err := h.node.Handle.RouteDel(&netlink.Route{Dst: &net.IPNet{IP: a6.AsSlice(), Mask: net.CIDRMask(128, 128)}, LinkIndex: 0, Protocol: 201}); err != nil {
		t.Fatalf("remove host route: %v", err)
	}
	if err := h.node.Check(h.ctx, list, a.rt); err == nil || !strings.Contains(err.Error(), a6.String()+"/128") {
		t.Fatalf("CHECK without the /128 host route: %v", err)
	}
	for _, p := range []*pod{a, b} {
		if err := h.node.Del(h.ctx, list, p.rt); err != nil {
			t.Fatal(err)
		}
	}
	h.assertClean("after dual-stack DEL")

	t.Run("IPv6 only", func(t *testing.T) {
		list := h.list("1.1.0", h.tabbyConf(map[string]any{"ipam": map[string]any{"type": "tabby-ipam", "assign_ipv4": "false"}}))
		p := h.newPod("six")
		if err := h.add(list, p); err != nil {
			t.Fatal(err)
		}
		if v4, v6 := podIPs(t, p); v4.IsValid() || !pool6.Contains(v6) || len(p.res.IPs) != 1 {
			t.Fatalf("result %+v: want one IPv6 address", p.res)
		}
		if err := h.node.Del(h.ctx, list, p.rt); err != nil {
			t.Fatal(err)
		}
		h.assertClean("after IPv6-only DEL")
	})

	t.Run("every cniVersion", func(t *testing.T) {
		// The result is converted down by the plugin for older runtimes: both addresses, each
		// with its gateway, must survive the conversion.
		for _, v := range []string{"0.3.1", "0.4.0", "1.0.0"} {
			list := h.list(v)
			p := h.newPod("v" + strings.ReplaceAll(v, ".", ""))
			if err := h.add(list, p); err != nil {
				t.Fatalf("cniVersion %s: ADD: %v", v, err)
			}
			if v4, v6 := podIPs(t, p); !v4.IsValid() || !pool6.Contains(v6) || len(p.res.IPs) != 2 {
				t.Errorf("cniVersion %s: result %+v: want an address of each family", v, p.res)
			}
			if err := h.node.Del(h.ctx, list, p.rt); err != nil {
				t.Fatalf("cniVersion %s: DEL: %v", v, err)
			}
		}
		h.assertClean("after the cniVersion round")
	})

	t.Run("a sandbox created with IPv6 disabled", func(t *testing.T) {
		p := h.newPod("noipv6")
		if err := p.ns.Do(func(ns.NetNS) error {
			for _, dev := range []string{"all", "default"} {
				if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6", []byte("1"), 0o644); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := h.add(list, p); err != nil {
			t.Fatalf("ADD: %v", err)
		}
		_, v6 := podIPs(t, p)
		if !pool6.Contains(v6) {
			t.Fatalf("result %+v: no IPv6 address", p.res)
		}
		if err := cnitest.Ping(h.node.NS.Path(), v6.AsSlice()); err != nil {
			t.Errorf("node to the pod's %s: %v", v6, err)
		}
		if err := h.node.Del(h.ctx, list, p.rt); err != nil {
			t.Fatal(err)
		}
		h.assertClean("after the IPv6-disabled sandbox's DEL")
	})

	t.Run("a forced family that cannot be served leaves nothing", func(t *testing.T) {
		// IPv6 forced, but only the IPv4 pool allowed: the IPv4 address must not stay behind.
		list := h.list("1.1.0", h.tabbyConf(map[string]any{"ipam": map[string]any{"type": "tabby-ipam", "assign_ipv6": "true", "pools": []string{"default-pool"}}}))
		p := h.newPod("forced")
		e := cniCode(t, h.add(list, p))
		if !strings.Contains(e.Msg+e.Details, "IPv6") {
			t.Errorf("error %v does not name the family", e)
		}
		h.assertClean("after a failed dual-stack ADD")
	})
}
