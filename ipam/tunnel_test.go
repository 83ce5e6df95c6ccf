package ipam_test

import (
	"context"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
)

func TestTunnelAddress(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("plain", "10.244.0.0/24", 26)
	a := ipam.New(s, ipam.Config{CacheTTL: -1})
	if _, needed, err := a.EnsureTunnelAddress(ctx, ipam.IPIPTunnel, "n1"); err != nil || needed {
		t.Fatalf("no IPIP pool: needed=%v err=%v", needed, err)
	}
	s.AddPool("tun", "10.244.1.0/24", 26, func(p *v1.IPPool) { p.Spec.IPIPMode = v1.IPIPModeAlways })
	addr, needed, err := a.EnsureTunnelAddress(ctx, ipam.IPIPTunnel, "n1")
	if err != nil || !needed || !netip.MustParsePrefix("10.244.1.0/24").Contains(addr) {
		t.Fatalf("tunnel: %v %v %v", addr, needed, err)
	}
	n, _ := s.GetNode(ctx, "n1")
	if n.IPIPTunnelAddr != addr {
		t.Fatalf("annotated tunnel address %v, want %v", n.IPIPTunnelAddr, addr)
	}
	if !ipam.IPIPTunnel.InSync(*n, poolsOf(t, s)) {
		t.Fatal("the node carries its address, yet the agent would ask again")
	}
	again, _, _ := a.EnsureTunnelAddress(ctx, ipam.IPIPTunnel, "n1")
	if again != addr {
		t.Fatalf("not stable: %v then %v", addr, again)
	}
	s.AddPool("tun", "10.244.1.0/24", 26, func(p *v1.IPPool) { p.Spec.IPIPMode = v1.IPIPModeNever })
	if _, needed, err := a.EnsureTunnelAddress(ctx, ipam.IPIPTunnel, "n1"); err != nil || needed {
		t.Fatalf("after IPIP off: %v %v", needed, err)
	}
	n, _ = s.GetNode(ctx, "n1")
	if n.IPIPTunnelAddr.IsValid() {
		t.Fatal("annotation not removed")
	}
	if got, _ := a.Lookup(ctx, names.TunnelHandle("n1")); len(got) != 0 {
		t.Fatal("tunnel address not released")
	}
}

// poolsOf is the store's pools as the agent's stream has them.
func poolsOf(t *testing.T, s ipam.Store) []model.Pool {
	t.Helper()
	items, err := s.ListPools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Pool
	for i := range items {
		out = append(out, mustParsePool(t, &items[i]))
	}
	return out
}

func mustParsePool(t *testing.T, p *v1.IPPool) model.Pool {
	t.Helper()
	out, errs := validation.ParseIPPool(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return out
}

func vxlanPool(mode v1.VXLANMode) func(*v1.IPPool) {
	return func(p *v1.IPPool) { p.Spec.VXLANMode = mode }
}

// A VTEP per family: an IPv4 VXLAN pool gives the IPv4 device its address, an IPv6 one the IPv6
// device, each under its own handle and annotation, each with the node's MAC of that family; a
// pool of the other family, of another encapsulation or selecting other nodes gives none; a
// disabled pool keeps its VTEP but gives no new one; a pool that stops encapsulating gives its
// VTEP back for one that does, and when none is left the address is released and both
// annotations go.
func TestVXLANTunnelAddresses(t *testing.T) {
	ctx := context.Background()
	s := newFake(t)
	s.AddPool("ipip", "10.244.0.0/24", 26, func(p *v1.IPPool) { p.Spec.IPIPMode = v1.IPIPModeAlways })
	s.AddPool("vx4", "10.244.1.0/24", 26, vxlanPool(v1.VXLANModeAlways))
	s.AddPool("vx6", "fd00:10:244::/64", 122, vxlanPool(v1.VXLANModeCrossSubnet))
	s.AddPool("vx4-zone-b", "10.244.2.0/24", 26, vxlanPool(v1.VXLANModeAlways), func(p *v1.IPPool) { p.Spec.NodeSelector = "zone == 'b'" })
	a := ipam.New(s, ipam.Config{CacheTTL: -1})
	v4, v6 := ipam.VXLANTunnel.Get(ipfamily.IPv4), ipam.VXLANTunnel.Get(ipfamily.IPv6)

	want := map[ipfamily.Family]string{ipfamily.IPv4: "10.244.1.0/24", ipfamily.IPv6: "fd00:10:244::/64"}
	for _, tun := range []ipam.Tunnel{v4, v6} {
		addr, needed, err := a.EnsureTunnelAddress(ctx, tun, "n1")
		if err != nil || !needed || !netip.MustParsePrefix(want[tun.Family]).Contains(addr) {
			t.Fatalf("%s: %v %v %v, want an address of %s", tun.Name, addr, needed, err, want[tun.Family])
		}
		held, err := a.Lookup(ctx, names.VXLANTunnelHandle("n1", tun.Family))
		if err != nil || len(held) != 1 || held[0].IP != addr {
			t.Fatalf("%s: handle %s holds %v %v, want %v", tun.Name, tun.Handle("n1"), held, err, addr)
		}
	}
	n, _ := s.GetNode(ctx, "n1")
	for _, fam := range ipfamily.All {
		if got := n.VXLANMAC.Get(fam); got != model.MAC(names.VXLANMAC("n1", fam)) {
			t.Errorf("%s MAC annotation %v, want %v", fam, got, model.MAC(names.VXLANMAC("n1", fam)))
		}
		if !netip.MustParsePrefix(want[fam]).Contains(n.VXLANTunnelAddr.Get(fam)) {
			t.Errorf("%s VTEP annotation %v", fam, n.VXLANTunnelAddr.Get(fam))
		}
	}
	if n.IPIPTunnelAddr.IsValid() {
		t.Error("the VXLAN tunnels gave an IPIP address")
	}
	pools := poolsOf(t, s)
	if !v4.InSync(*n, pools) || !v6.InSync(*n, pools) || ipam.IPIPTunnel.InSync(*n, pools) {
		t.Errorf("in sync: VXLAN %v %v (want both), IPIP %v (want not: no address yet)", v4.InSync(*n, pools), v6.InSync(*n, pools), ipam.IPIPTunnel.InSync(*n, pools))
	}

	// Disabled: the VTEP stays; a node without one gets none (and no error).
	s.AddPool("vx4", "10.244.1.0/24", 26, vxlanPool(v1.VXLANModeAlways), func(p *v1.IPPool) { p.Spec.Disabled = true })
	if addr, needed, err := a.EnsureTunnelAddress(ctx, v4, "n1"); err != nil || !needed || addr != n.VXLANTunnelAddr.Get(ipfamily.IPv4) {
		t.Fatalf("pool disabled: %v %v %v, want the VTEP kept", addr, needed, err)
	}
	s.AddNode("n3", map[string]string{"zone": "a"})
	if addr, needed, err := a.EnsureTunnelAddress(ctx, v4, "n3"); err != nil || needed || addr.IsValid() {
		t.Fatalf("a new node, the VXLAN pool disabled: %v %v %v, want none", addr, needed, err)
	}

	// The pool stops encapsulating while another VXLAN pool selects the node: a new VTEP there.
	s.AddPool("vx4", "10.244.1.0/24", 26)
	s.AddPool("vx4-zone-b", "10.244.2.0/24", 26, vxlanPool(v1.VXLANModeAlways))
	addr, needed, err := a.EnsureTunnelAddress(ctx, v4, "n1")
	if err != nil || !needed || !netip.MustParsePrefix("10.244.2.0/24").Contains(addr) {
		t.Fatalf("the VTEP's pool stopped encapsulating: %v %v %v, want an address of vx4-zone-b", addr, needed, err)
	}
	if got, _ := a.Lookup(ctx, v4.Handle("n1")); len(got) != 1 || got[0].IP != addr {
		t.Fatalf("the handle holds %v, want the new VTEP alone", got)
	}

	// No VXLAN pool of a family selects the node: released, annotations removed.
	s.DeletePool("vx6")
	if _, needed, err := a.EnsureTunnelAddress(ctx, v6, "n1"); err != nil || needed {
		t.Fatalf("no IPv6 VXLAN pool: %v %v", needed, err)
	}
	n, _ = s.GetNode(ctx, "n1")
	if n.VXLANTunnelAddr.Get(ipfamily.IPv6).IsValid() || !n.VXLANMAC.Get(ipfamily.IPv6).IsZero() {
		t.Fatalf("IPv6 annotations left: %+v", n)
	}
	if n.VXLANTunnelAddr.Get(ipfamily.IPv4) != addr || n.VXLANMAC.Get(ipfamily.IPv4).IsZero() {
		t.Fatalf("the IPv4 VTEP went with the IPv6 one: %+v", n)
	}
	if got, _ := a.Lookup(ctx, names.VXLANTunnelHandle("n1", ipfamily.IPv6)); len(got) != 0 {
		t.Fatalf("IPv6 VTEP not released: %v", got)
	}
	if !v6.InSync(*n, poolsOf(t, s)) {
		t.Fatal("no VTEP and no pool: the agent would ask again")
	}
}

// The handles of every tunnel name their node and kind; a pod's handle is none.
func TestTunnelOf(t *testing.T) {
	for _, tun := range ipam.Tunnels {
		got, node, ok := ipam.TunnelOf(tun.Handle("node-a"))
		if !ok || node != "node-a" || got.Name != tun.Name {
			t.Errorf("%s: TunnelOf(%s) = %s %s %v", tun.Name, tun.Handle("node-a"), got.Name, node, ok)
		}
	}
	if _, _, ok := ipam.TunnelOf("k8s-pod-network.0123"); ok {
		t.Error("a pod's handle taken for a tunnel's")
	}
}

// Against the real API server: the VTEP and MAC of each family land in the Node's annotations,
// and go when the pools stop using VXLAN.
func TestRealVXLANTunnelAddresses(t *testing.T) {
	e := sharedEnv(t)
	ctx := context.Background()
	scenario(t, e, "vxtun", "10.244.29.0/26", 28, "vxtun-a")
	scenario(t, e, "vxtun6", "fd00:10:244:29::/120", 124, "vxtun-a")
	setMode := func(name string, mode v1.VXLANMode) {
		t.Helper()
		p, err := e.Client.IPPools().Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		p.Spec.VXLANMode = mode
		if _, err := e.Client.IPPools().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// The node carries the label of the first scenario: the IPv6 pool selects it by that one.
	p6, _ := e.Client.IPPools().Get(ctx, "vxtun6")
	p6.Spec.NodeSelector = "tabby-test == 'vxtun'"
	if _, err := e.Client.IPPools().Update(ctx, p6); err != nil {
		t.Fatal(err)
	}
	setMode("vxtun", v1.VXLANModeAlways)
	setMode("vxtun6", v1.VXLANModeAlways)
	a := ipam.New(kubeStore(t, e), ipam.Config{})
	for _, tun := range []ipam.Tunnel{ipam.VXLANTunnel.Get(ipfamily.IPv4), ipam.VXLANTunnel.Get(ipfamily.IPv6)} {
		addr, needed, err := a.EnsureTunnelAddress(ctx, tun, "vxtun-a")
		if err != nil || !needed {
			t.Fatalf("%s: %v %v", tun.Name, needed, err)
		}
		n, _ := e.Kube.CoreV1().Nodes().Get(ctx, "vxtun-a", metav1.GetOptions{})
		if n.Annotations[tun.AddrAnnotation] != addr.String() {
			t.Fatalf("%s: annotation %q, want %s", tun.Name, n.Annotations[tun.AddrAnnotation], addr)
		}
		if mac := model.MAC(names.VXLANMAC("vxtun-a", tun.Family)); n.Annotations[tun.MACAnnotation] != mac.String() {
			t.Fatalf("%s: MAC annotation %q, want %s", tun.Name, n.Annotations[tun.MACAnnotation], mac)
		}
	}
	setMode("vxtun", v1.VXLANModeNever)
	setMode("vxtun6", v1.VXLANModeNever)
	for _, tun := range []ipam.Tunnel{ipam.VXLANTunnel.Get(ipfamily.IPv4), ipam.VXLANTunnel.Get(ipfamily.IPv6)} {
		if _, needed, err := a.EnsureTunnelAddress(ctx, tun, "vxtun-a"); err != nil || needed {
			t.Fatalf("%s after VXLAN off: %v %v", tun.Name, needed, err)
		}
	}
	n, _ := e.Kube.CoreV1().Nodes().Get(ctx, "vxtun-a", metav1.GetOptions{})
	for _, key := range []string{v1.AnnotationVXLANIPv4TunnelAddress, v1.AnnotationVXLANIPv6TunnelAddress, v1.AnnotationVXLANIPv4MAC, v1.AnnotationVXLANIPv6MAC} {
		if v, ok := n.Annotations[key]; ok {
			t.Errorf("annotation %s=%s left", key, v)
		}
	}
}

func TestRealTunnelAddress(t *testing.T) {
	e := sharedEnv(t)
	ctx := context.Background()
	scenario(t, e, "tun", "10.244.28.0/26", 28, "tun-a")
	p, _ := e.Client.IPPools().Get(ctx, "tun")
	p.Spec.IPIPMode = v1.IPIPModeAlways
	if _, err := e.Client.IPPools().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	a := ipam.New(kubeStore(t, e), ipam.Config{})
	addr, needed, err := a.EnsureTunnelAddress(ctx, ipam.IPIPTunnel, "tun-a")
	if err != nil || !needed {
		t.Fatalf("%v %v", needed, err)
	}
	n, _ := e.Kube.CoreV1().Nodes().Get(ctx, "tun-a", metav1.GetOptions{})
	if n.Annotations[v1.AnnotationIPIPTunnelAddress] != addr.String() {
		t.Fatalf("annotation %q want %s", n.Annotations[v1.AnnotationIPIPTunnelAddress], addr)
	}
	p, _ = e.Client.IPPools().Get(ctx, "tun")
	p.Spec.IPIPMode = v1.IPIPModeNever
	if _, err := e.Client.IPPools().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, needed, err := a.EnsureTunnelAddress(ctx, ipam.IPIPTunnel, "tun-a"); err != nil || needed {
		t.Fatalf("%v %v", needed, err)
	}
	n, _ = e.Kube.CoreV1().Nodes().Get(ctx, "tun-a", metav1.GetOptions{})
	if _, ok := n.Annotations[v1.AnnotationIPIPTunnelAddress]; ok {
		t.Fatal("annotation left")
	}
	if err := a.Ready(ctx, "tun-a"); err != nil {
		t.Fatal(err)
	}
}
