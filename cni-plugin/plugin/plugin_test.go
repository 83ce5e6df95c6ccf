package plugin_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/cni-plugin/cnierr"
	"github.com/tabbynet/tabby/cni-plugin/cnitest"
	"github.com/tabbynet/tabby/ipam"
)

var pool = netip.MustParsePrefix("10.244.0.0/18")

// podHandle is a netlink socket inside a pod's netns.
func podHandle(t *testing.T, p *pod) *netlink.Handle {
	t.Helper()
	nsh, err := netns.GetFromPath(p.ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// assertWired checks the layout an ADD must produce, from the outside.
func (h *harness) assertWired(p *pod, ip netip.Addr, mtu int) {
	t := h.t
	t.Helper()
	ph := podHandle(t, p)
	eth0, err := ph.LinkByName("eth0")
	if err != nil {
		t.Fatalf("eth0 in pod: %v", err)
	}
	if mtu != 0 && eth0.Attrs().MTU != mtu {
		t.Errorf("pod eth0 MTU %d, want %d", eth0.Attrs().MTU, mtu)
	}
	addrs, _ := ph.AddrList(eth0, netlink.FAMILY_V4)
	if len(addrs) != 1 || addrs[0].IPNet.String() != ip.String()+"/32" {
		t.Errorf("pod eth0 addresses %v, want %s/32", addrs, ip)
	}
	routes, _ := ph.RouteList(eth0, netlink.FAMILY_V4)
	var gwRoute, defRoute bool
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() == "169.254.1.1/32" && r.Scope == netlink.SCOPE_LINK {
			gwRoute = true
		}
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw.String() == "169.254.1.1" {
			defRoute = true
		}
	}
	if !gwRoute || !defRoute {
		t.Errorf("pod routes %v: want 169.254.1.1 scope link and default via 169.254.1.1", routes)
	}
	veth := names.HostVethName("default", p.rt.Args[1][1], p.rt.ContainerID)
	hl, err := h.node.Handle.LinkByName(veth)
	if err != nil {
		t.Fatalf("host veth %s: %v", veth, err)
	}
	if !bytes.Equal(hl.Attrs().HardwareAddr, net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}) {
		t.Errorf("host veth MAC %s", hl.Attrs().HardwareAddr)
	}
	if hl.Attrs().OperState != netlink.OperUp && hl.Attrs().RawFlags&unix.IFF_UP == 0 {
		t.Errorf("host veth %s is not up", veth)
	}
	h.node.Do(func() error {
		for _, s := range []string{"conf/" + veth + "/proxy_arp", "neigh/" + veth + "/proxy_delay", "conf/" + veth + "/forwarding"} {
			b, err := os.ReadFile("/proc/sys/net/ipv4/" + s)
			want := "1"
			if strings.HasPrefix(s, "neigh") {
				want = "0"
			}
			if err != nil || strings.TrimSpace(string(b)) != want {
				t.Errorf("host sysctl %s = %q (%v), want %s", s, b, err, want)
			}
		}
		return nil
	})
	hr, _ := h.node.Handle.RouteList(hl, netlink.FAMILY_V4)
	found := false
	for _, r := range hr {
		if r.Dst != nil && r.Dst.String() == ip.String()+"/32" && r.Scope == netlink.SCOPE_LINK && int(r.Protocol) == v1.RouteProtocol {
			found = true
		}
	}
	if !found {
		t.Errorf("host routes of %s %v: want %s/32 scope link proto 201", veth, hr, ip)
	}
}

func TestEveryCNIVersion(t *testing.T) {
	h := newHarness(t)
	for _, ver := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(ver, func(t *testing.T) {
			h.t = t
			list := h.list(ver)
			p := h.newPod("pod-" + strings.ReplaceAll(ver, ".", ""))
			r, err := h.node.Add(h.ctx, list, p.rt)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if got := r.(types.Result).Version(); got != ver {
				t.Errorf("result version %s, want %s", got, ver)
			}
			h.add(list, p) // repeated ADD: same answer, converted for the assertions
			ip := podIP(t, p)
			if !pool.Contains(ip) {
				t.Errorf("IP %s not in pool %s", ip, pool)
			}
			h.assertWired(p, ip, cnitest.UplinkMTU)
			if ver != "0.3.1" {
				if err := h.node.Check(h.ctx, list, p.rt); err != nil {
					t.Errorf("CHECK: %v", err)
				}
			}
			if ver == "1.1.0" {
				if err := h.node.Do(func() error { return h.node.CNI.GetStatusNetworkList(h.ctx, list) }); err != nil {
					t.Errorf("STATUS: %v", err)
				}
				if err := h.node.Do(func() error {
					return h.node.CNI.GCNetworkList(h.ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: p.rt.ContainerID, IfName: "eth0"}}})
				}); err != nil {
					t.Errorf("GC: %v", err)
				}
				if len(h.handles()) != 1 {
					t.Errorf("GC released a valid attachment: handles %v", h.handles())
				}
			}
			if err := h.node.Del(h.ctx, list, p.rt); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			h.assertClean("after DEL " + ver)
		})
	}
	t.Run("unsupported", func(t *testing.T) {
		h.t = t
		p := h.newPod("pod-old")
		err := h.add(h.list("0.2.0"), p)
		e := cniCode(t, err)
		if e.Code != types.ErrIncompatibleCNIVersion || !strings.Contains(e.Details+e.Msg, "0.2.0") {
			t.Errorf("got %v, want code 1 naming 0.2.0", e)
		}
		h.assertClean("unsupported version")
	})
}

func TestConnectivity(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0", h.tabbyConf(map[string]any{"mtu": 1300}))
	a, b := h.newPod("a"), h.newPod("b")
	ipA, ipB := h.mustAdd(list, a), h.mustAdd(list, b)
	h.assertWired(a, ipA, 1300)
	if err := cnitest.Ping(a.ns.Path(), cnitest.NodeAddr); err != nil {
		t.Errorf("pod → host: %v", err)
	}
	if err := cnitest.Ping(a.ns.Path(), ipB.AsSlice()); err != nil {
		t.Errorf("pod → pod: %v", err)
	}
	if err := cnitest.Ping(b.ns.Path(), ipA.AsSlice()); err != nil {
		t.Errorf("pod → pod (reverse): %v", err)
	}
	for _, p := range []*pod{a, b} {
		if err := h.node.Del(h.ctx, list, p.rt); err != nil {
			t.Fatal(err)
		}
	}
	h.assertClean("after DEL")
}

func TestIdempotent(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.0.0")
	p := h.newPod("idem")
	ip := h.mustAdd(list, p)
	veth := names.HostVethName("default", "idem", p.rt.ContainerID)
	before, err := h.node.Handle.LinkByName(veth)
	if err != nil {
		t.Fatal(err)
	}
	if again := h.mustAdd(list, p); again != ip {
		t.Fatalf("repeated ADD gave %s, first gave %s", again, ip)
	}
	after, err := h.node.Handle.LinkByName(veth)
	if err != nil || after.Attrs().Index != before.Attrs().Index {
		t.Fatalf("repeated ADD recreated the host veth (ifindex %d → %v, %v)", before.Attrs().Index, after, err)
	}
	if hs := h.handles(); len(hs) != 1 {
		t.Fatalf("handles after two ADDs: %v", hs)
	}
	for i := 0; i < 2; i++ {
		if err := h.node.Del(h.ctx, list, p.rt); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	unknown := &libcni.RuntimeConf{ContainerID: "never-added", NetNS: p.rt.NetNS, IfName: "eth0"}
	if err := h.node.Del(h.ctx, list, unknown); err != nil {
		t.Fatalf("DEL of an unknown container: %v", err)
	}
	h.assertClean("after repeated DEL")

	// DEL after the netns is gone.
	q := h.newPod("gone")
	h.mustAdd(list, q)
	cnitest.RemovePod(q.ns)
	if err := h.node.Del(h.ctx, list, q.rt); err != nil {
		t.Fatalf("DEL with the netns gone: %v", err)
	}
	h.assertClean("after DEL of a vanished netns")
}

func TestFailuresLeaveNothing(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	expect := func(t *testing.T, err error, code uint, words string) {
		t.Helper()
		e := cniCode(t, err)
		if e.Code != code || !strings.Contains(strings.ToLower(e.Msg+" "+e.Details), words) {
			t.Errorf("got code %d msg %q details %q; want code %d mentioning %q", e.Code, e.Msg, e.Details, code, words)
		}
	}

	t.Run("netns missing", func(t *testing.T) {
		h.t = t
		p := h.newPod("nons")
		p.rt.NetNS = "/var/run/netns/tabby-missing-" + randSuffix()
		expect(t, h.add(h.list("1.1.0"), p), types.ErrInvalidNetNS, "network namespace not found")
		h.assertClean("netns missing")
	})

	t.Run("interface name taken", func(t *testing.T) {
		h.t = t
		p := h.newPod("taken")
		ph := podHandle(t, p)
		if err := ph.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "squatter"}); err != nil {
			t.Fatal(err)
		}
		expect(t, h.add(h.list("1.1.0"), p), cnierr.InterfaceExists, "eth0")
		h.assertClean("interface name taken")
	})

	t.Run("API server unreachable", func(t *testing.T) {
		h.t = t
		p := h.newPod("noapi")
		list := h.list("1.1.0", h.tabbyConf(map[string]any{"kubeconfig": h.deadKubeconfig()}))
		expect(t, h.add(list, p), types.ErrTryAgainLater, "unreachable")
		h.assertClean("API server unreachable")
	})

	// A full pool is the same CNI error whichever transport carried the allocator's answer:
	// tabby-ipam's exec (no tabby-node), or tabby-node's socket.
	for _, path := range []string{"direct", "socket"} {
		t.Run("pool exhausted/"+path, func(t *testing.T) {
			h.t = t
			name := "tiny-" + randSuffix()
			if _, err := env.Client.IPPools().Create(ctx, &v1.IPPool{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       v1.IPPoolSpec{CIDR: "10.244.200.0/31", BlockSize: 31, IPIPMode: v1.IPIPModeNever},
			}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { env.Client.IPPools().Delete(context.Background(), name, metav1.DeleteOptions{}) })
			// Fill it with another network's handles (cleaned up below).
			a := ipam.New(ipam.NewKubeStore(env.Client), ipam.Config{})
			for i := range 2 {
				hd := "filler-" + randSuffix() + "." + string(rune('a'+i))
				if _, err := a.Assign(ctx, ipam.Request{Handle: hd, Node: h.nodeName, Pools: []string{name}}); err != nil {
					t.Fatalf("fill pool: %v", err)
				}
				t.Cleanup(func() { a.ReleaseHandle(context.Background(), hd) })
			}
			conf := map[string]any{"ipam": map[string]any{"type": "tabby-ipam", "pools": []string{name}}}
			if path == "socket" {
				// A dead kubeconfig: only tabby-node can have answered.
				socket, stop := h.serveIPAM()
				defer stop()
				conf["ipamSocket"], conf["kubeconfig"] = socket, h.deadKubeconfig()
			}
			p := h.newPod("full-" + path)
			expect(t, h.add(h.list("1.1.0", h.tabbyConf(conf)), p), cnierr.PoolExhausted, "exhausted")
			h.assertClean("pool exhausted via " + path)
		})
	}

	t.Run("bad config", func(t *testing.T) {
		h.t = t
		p := h.newPod("badconf")
		expect(t, h.add(h.list("1.1.0", h.tabbyConf(map[string]any{"mtu": 70000})), p), types.ErrInvalidNetworkConfig, "mtu 70000")
		expect(t, h.add(h.list("1.1.0", h.tabbyConf(map[string]any{"ipam": map[string]any{"type": "host-local"}})), p), types.ErrInvalidNetworkConfig, "ipam.type \"host-local\"")
		h.assertClean("bad config")
	})
}

func TestCheckNamesWhatIsWrong(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0")
	p := h.newPod("checked")
	ip := h.mustAdd(list, p)
	if err := h.node.Check(h.ctx, list, p.rt); err != nil {
		t.Fatalf("CHECK of a good attachment: %v", err)
	}
	veth := names.HostVethName("default", "checked", p.rt.ContainerID)
	hl, _ := h.node.Handle.LinkByName(veth)
	if err := h.node.Handle.RouteDel(&netlink.Route{LinkIndex: hl.Attrs().Index, Dst: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}); err != nil {
		t.Fatal(err)
	}
	ph := podHandle(t, p)
	eth0, _ := ph.LinkByName("eth0")
	if err := ph.RouteDel(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: net.IPv4(169, 254, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	e := cniCode(t, h.node.Check(h.ctx, list, p.rt))
	defer func() {
		// IPAM losing the address is named too.
		q := h.newPod("released")
		h.mustAdd(list, q)
		a := ipam.New(ipam.NewKubeStore(env.Client), ipam.Config{})
		if err := a.LoadNode(h.ctx, h.nodeName); err != nil {
			t.Fatal(err)
		}
		if err := a.ReleaseHandle(h.ctx, h.network+"."+q.rt.ContainerID); err != nil {
			t.Fatal(err)
		}
		e := cniCode(t, h.node.Check(h.ctx, list, q.rt))
		if e.Code != cnierr.CheckFailed || !strings.Contains(e.Msg+e.Details, "does not hold") {
			t.Errorf("CHECK after the address was released elsewhere: %v", e)
		}
		if err := h.node.Del(h.ctx, list, q.rt); err != nil {
			t.Fatal(err)
		}
		h.assertClean("after DEL")
	}()
	for _, want := range []string{"host route " + ip.String() + "/32 dev " + veth + " missing", "default via 169.254.1.1 missing"} {
		if e.Code != cnierr.CheckFailed || !strings.Contains(e.Details, want) {
			t.Errorf("CHECK error %v: want code %d naming %q", e, cnierr.CheckFailed, want)
		}
	}
	if err := h.node.Del(h.ctx, list, p.rt); err != nil {
		t.Fatal(err)
	}
}

func TestStatus(t *testing.T) {
	h := newHarness(t)
	status := func(list *libcni.NetworkConfigList) error {
		return h.node.Do(func() error { return h.node.CNI.GetStatusNetworkList(h.ctx, list) })
	}
	if err := status(h.list("1.1.0")); err != nil {
		t.Fatalf("STATUS with a reachable API server and a pool: %v", err)
	}
	e := cniCode(t, status(h.list("1.1.0", h.tabbyConf(map[string]any{"kubeconfig": h.deadKubeconfig()}))))
	if e.Code != cnierr.NotAvailable {
		t.Errorf("STATUS with the API server unreachable: %v, want code 50", e)
	}
	// A node no pool selects.
	name := "picky-" + randSuffix()
	e = cniCode(t, status(h.list("1.1.0", h.tabbyConf(map[string]any{"nodename": "no-such-node-" + randSuffix()}))))
	if e.Code != cnierr.NotAvailable {
		t.Errorf("STATUS for an unknown node (%s): %v, want code 50", name, e)
	}
}

func TestGCReleasesOrphans(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0")
	p := h.newPod("kept")
	h.mustAdd(list, p)
	// An allocation whose container the runtime no longer knows (its DEL never came).
	a := ipam.New(ipam.NewKubeStore(env.Client), ipam.Config{})
	orphan := h.network + ".orphan-" + randSuffix()
	if _, err := a.Assign(h.ctx, ipam.Request{Handle: orphan, Node: h.nodeName, Namespace: "default", Pod: "gone"}); err != nil {
		t.Fatal(err)
	}
	// Another node's allocation of the same network is not this node's to collect.
	other := h.network + ".elsewhere-" + randSuffix()
	otherNode := "other-" + h.nodeName
	if _, err := env.Kube.CoreV1().Nodes().Create(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: otherNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Kube.CoreV1().Nodes().Delete(context.Background(), otherNode, metav1.DeleteOptions{}) })
	if _, err := a.Assign(h.ctx, ipam.Request{Handle: other, Node: otherNode}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.ReleaseHandle(context.Background(), other) })
	err := h.node.Do(func() error {
		return h.node.CNI.GCNetworkList(h.ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: p.rt.ContainerID, IfName: "eth0"}}})
	})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	got := map[string]bool{}
	for _, hd := range h.handles() {
		got[hd] = true
	}
	if got[orphan] || !got[h.network+"."+p.rt.ContainerID] || !got[other] {
		t.Fatalf("after GC handles are %v: want the orphan gone, the valid attachment and the other node's kept", got)
	}
	if err := h.node.Del(h.ctx, list, p.rt); err != nil {
		t.Fatal(err)
	}
	a.ReleaseHandle(h.ctx, other)
	h.assertClean("after GC and DEL")
}

// TestSocketPath: with tabby-node's service up, ADD works even with a dead kubeconfig (the
// socket served it); with the service gone (stale socket file), ADD falls back to the API server.
func TestSocketPath(t *testing.T) {
	h := newHarness(t)
	socket, stop := h.serveIPAM()
	h.socket = socket
	viaSocket := h.list("1.1.0", h.tabbyConf(map[string]any{"kubeconfig": h.deadKubeconfig()}))
	p := h.newPod("socket")
	ip := h.mustAdd(viaSocket, p)
	h.assertWired(p, ip, 0)
	if err := h.node.Check(h.ctx, viaSocket, p.rt); err != nil {
		t.Errorf("CHECK via socket: %v", err)
	}
	if err := h.node.Do(func() error { return h.node.CNI.GetStatusNetworkList(h.ctx, viaSocket) }); err != nil {
		t.Errorf("STATUS via socket: %v", err)
	}
	if err := h.node.Del(h.ctx, viaSocket, p.rt); err != nil {
		t.Fatalf("DEL via socket: %v", err)
	}
	h.assertClean("after DEL via socket")

	stop()
	if _, err := os.Stat(socket); err != nil {
		// Closing the listener removes the socket file: the plugin falls back without a dial.
		t.Logf("socket file gone after stop: %v", err)
	}
	fallback := h.list("1.1.0")
	q := h.newPod("fallback")
	h.mustAdd(fallback, q)
	if err := h.node.Del(h.ctx, fallback, q.rt); err != nil {
		t.Fatal(err)
	}
	h.assertClean("after fallback")
}

// A DEL through tabby-node's service costs the API server one request, the block update: the
// runtime passes its record of the ADD (prevResult), whose address is in the node's own block,
// so IPAM knows no IPAMHandle exists and does not read one. Both plugins.
func TestDelReadsNoHandle(t *testing.T) {
	h := newHarness(t)
	store := &countingStore{Store: ipam.NewKubeStore(env.Client)}
	h.socket, _ = h.serveIPAMWith(store)
	ipamOnly := map[string]any{"type": "tabby-ipam", "nodename": h.nodeName, "kubeconfig": h.kubeconfig, "ipamSocket": h.socket}
	for name, list := range map[string]*libcni.NetworkConfigList{"tabby": h.list("1.1.0"), "tabby-ipam": h.list("1.1.0", ipamOnly)} {
		p := h.newPod(name)
		h.mustAdd(list, p)
		store.handleReads.Store(0)
		store.blockWrites.Store(0)
		if err := h.node.Del(h.ctx, list, p.rt); err != nil {
			t.Fatalf("%s: DEL: %v", name, err)
		}
		if r, w := store.handleReads.Load(), store.blockWrites.Load(); r != 0 || w != 1 {
			t.Errorf("%s: DEL read %d IPAMHandles and wrote %d IPAMBlocks, want 0 and 1", name, r, w)
		}
		h.assertClean(name + ": after DEL")
	}
}

// countingStore counts the requests TestDelReadsNoHandle is about.
type countingStore struct {
	ipam.Store
	handleReads, blockWrites atomic.Int64
}

func (s *countingStore) GetHandle(ctx context.Context, name string) (*v1.IPAMHandle, error) {
	s.handleReads.Add(1)
	return s.Store.GetHandle(ctx, name)
}

func (s *countingStore) UpdateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error) {
	s.blockWrites.Add(1)
	return s.Store.UpdateBlock(ctx, b)
}

// TestConcurrentAdds: ten ADDs at once through tabby-node's service, as a runtime starting a
// ReplicaSet does: every pod gets its own address and a working interface.
func TestConcurrentAdds(t *testing.T) {
	h := newHarness(t)
	h.socket, _ = h.serveIPAM()
	list := h.list("1.1.0")
	pods := make([]*pod, 10)
	for i := range pods {
		pods[i] = h.newPod(fmt.Sprintf("replica-%d", i))
	}
	errs := make(chan error, len(pods))
	for _, p := range pods {
		go func() { errs <- h.add(list, p) }()
	}
	for range pods {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent ADD: %v", err)
		}
	}
	seen := map[netip.Addr]bool{}
	for _, p := range pods {
		ip := podIP(t, p)
		if seen[ip] {
			t.Fatalf("address %s given twice", ip)
		}
		seen[ip] = true
		h.assertWired(p, ip, 0)
	}
	if err := cnitest.Ping(pods[0].ns.Path(), podIP(t, pods[9]).AsSlice()); err != nil {
		t.Errorf("pod → pod: %v", err)
	}
	for _, p := range pods {
		go func() { errs <- h.node.Del(h.ctx, list, p.rt) }()
	}
	for range pods {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent DEL: %v", err)
		}
	}
	h.assertClean("after concurrent DEL")
}

func TestChainWithPortmapAndBandwidth(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0",
		h.tabbyConf(nil),
		map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		map[string]any{"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true}},
	)
	p := h.newPod("web")
	p.rt.CapabilityArgs = map[string]any{
		"portMappings": []map[string]any{{"hostPort": 18080, "containerPort": 80, "protocol": "tcp"}},
		"bandwidth":    map[string]any{"ingressRate": 1000000, "ingressBurst": 100000, "egressRate": 1000000, "egressBurst": 100000},
	}
	ip := h.mustAdd(list, p)
	h.assertWired(p, ip, 0)
	veth := names.HostVethName("default", "web", p.rt.ContainerID)
	var nat, qdisc []byte
	h.node.Do(func() error {
		nat, _ = cnitest.Output("iptables-save", "-t", "nat")
		qdisc, _ = cnitest.Output("tc", "qdisc", "show", "dev", veth)
		return nil
	})
	if !strings.Contains(string(nat), "--dport 18080") || !strings.Contains(string(nat), ip.String()+":80") {
		t.Errorf("portmap did not program DNAT 18080 → %s:80 in the node netns:\n%s", ip, nat)
	}
	if !strings.Contains(string(qdisc), "tbf") {
		t.Errorf("bandwidth did not shape %s (the host veth from tabby's result):\n%s", veth, qdisc)
	}
	if err := h.node.Check(h.ctx, list, p.rt); err != nil {
		t.Errorf("CHECK of the chain: %v", err)
	}
	if err := cnitest.Ping(p.ns.Path(), cnitest.NodeAddr); err != nil {
		t.Errorf("pod → host through the chain: %v", err)
	}
	if err := h.node.Del(h.ctx, list, p.rt); err != nil {
		t.Fatalf("DEL of the chain: %v", err)
	}
	h.node.Do(func() error {
		nat, _ = cnitest.Output("iptables-save", "-t", "nat")
		return nil
	})
	if strings.Contains(string(nat), "18080") {
		t.Errorf("portmap rules left after DEL:\n%s", nat)
	}
	h.assertClean("after DEL of the chain")
}

// TestTabbyIPAM runs tabby-ipam the way a main plugin delegates to its IPAM (same binary, same
// stdin: the main plugin's configuration with "ipam": {"type": "tabby-ipam"}). The reference ptp
// cannot take a /32 (it derives a subnet route from the address), so libcni invokes tabby-ipam
// itself.
func TestTabbyIPAM(t *testing.T) {
	h := newHarness(t)
	list := h.list("1.1.0", map[string]any{
		"type": "tabby-ipam", "nodename": h.nodeName, "kubeconfig": h.kubeconfig, "ipamSocket": "none",
		"ipam": map[string]any{"type": "tabby-ipam"},
	})
	p := h.newPod("ipamonly")
	ip := h.mustAdd(list, p)
	if !pool.Contains(ip) || p.res.IPs[0].Address.String() != ip.String()+"/32" {
		t.Fatalf("tabby-ipam gave %v, want a /32 from %s", p.res.IPs, pool)
	}
	if again := h.mustAdd(list, p); again != ip {
		t.Fatalf("repeated ADD gave %s, first %s", again, ip)
	}
	if hs := h.handles(); len(hs) != 1 || hs[0] != h.network+"."+p.rt.ContainerID {
		t.Fatalf("handles %v", hs)
	}
	if err := h.node.Check(h.ctx, list, p.rt); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := h.node.Do(func() error { return h.node.CNI.GetStatusNetworkList(h.ctx, list) }); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	if err := h.node.Del(h.ctx, list, p.rt); err != nil {
		t.Fatal(err)
	}
	if err := h.node.Del(h.ctx, list, p.rt); err != nil {
		t.Fatalf("repeated DEL: %v", err)
	}
	h.assertClean("after DEL")
}
