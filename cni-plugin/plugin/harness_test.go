package plugin_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/cni-plugin/cnitest"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/rpc"
)

// One control plane and one set of binaries for the package (each start costs seconds).
var (
	env     *testenv.Env
	binDirs []string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || os.Geteuid() != 0 {
		// The tests skip themselves (skipUnlessIntegration) and say why.
		os.Exit(m.Run())
	}
	code, err := runIntegration(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cni-plugin integration setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runIntegration(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := os.MkdirTemp("", "tabby-cni-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(bin)
	tabbyDir, err := cnitest.TabbyBinaries(bin)
	if err != nil {
		return 0, err
	}
	refDir, err := cnitest.ReferencePlugins("portmap", "bandwidth")
	if err != nil {
		return 0, err
	}
	binDirs = []string{tabbyDir, refDir}
	if env, err = testenv.StartProcess(ctx, testenv.Options{}); err != nil {
		return 0, err
	}
	defer env.Stop()
	// The pool every test allocates from unless it names another.
	if _, err := env.Client.IPPools().Create(ctx, &v1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "default-pool"},
		Spec:       v1.IPPoolSpec{CIDR: "10.244.0.0/18", BlockSize: 26, IPIPMode: v1.IPIPModeNever},
	}); err != nil {
		return 0, fmt.Errorf("create default pool: %w", err)
	}
	return m.Run(), nil
}

func skipUnlessIntegration(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (real netns and API server): skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
}

func randSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// harness is one test's node: a node netns running libcni, a Node object, a network name of its
// own (so handles never collide between tests), and a kubeconfig that reaches the API server
// from inside the node netns.
type harness struct {
	t          *testing.T
	node       *cnitest.HostNS
	nodeName   string
	network    string
	kubeconfig string
	socket     string // "none" unless a test serves tabby-node's IPAM
	ctx        context.Context
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	skipUnlessIntegration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, nodeName: "node-" + randSuffix(), network: "tabbynet-" + randSuffix(), socket: "none"}
	node, err := cnitest.NewHostNS(binDirs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	h.node = node
	target, err := cnitest.HostPort(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := node.Proxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	h.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := cnitest.RewriteKubeconfig(env.Kubeconfig, h.kubeconfig, "https://"+proxy.Addr); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever a failed test left in IPAM goes, so later tests see a clean datastore.
		a := ipam.New(ipam.NewKubeStore(env.Client), ipam.Config{})
		if err := a.LoadNode(context.Background(), h.nodeName); err != nil {
			t.Logf("cleanup: %v", err)
		}
		for _, id := range h.handles() {
			a.ReleaseHandle(context.Background(), id)
		}
		env.Kube.CoreV1().Nodes().Delete(context.Background(), h.nodeName, metav1.DeleteOptions{})
	})
	return h
}

// tabbyConf is the tabby plugin entry; extra keys override.
func (h *harness) tabbyConf(extra map[string]any) map[string]any {
	c := map[string]any{
		"type": "tabby", "nodename": h.nodeName, "kubeconfig": h.kubeconfig, "ipamSocket": h.socket,
		"logLevel": "warn", "ipam": map[string]any{"type": "tabby-ipam"},
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func (h *harness) list(version string, plugins ...map[string]any) *libcni.NetworkConfigList {
	h.t.Helper()
	if len(plugins) == 0 {
		plugins = []map[string]any{h.tabbyConf(nil)}
	}
	b, err := json.Marshal(map[string]any{"cniVersion": version, "name": h.network, "plugins": plugins})
	if err != nil {
		h.t.Fatal(err)
	}
	l, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		h.t.Fatalf("conflist %s: %v", b, err)
	}
	return l
}

type pod struct {
	ns  ns.NetNS
	rt  *libcni.RuntimeConf
	res *current.Result
}

func (h *harness) newPod(name string) *pod {
	h.t.Helper()
	n, err := cnitest.NewPod()
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cnitest.RemovePod(n) })
	return &pod{ns: n, rt: &libcni.RuntimeConf{
		ContainerID: "ctr-" + randSuffix(), NetNS: n.Path(), IfName: "eth0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", name}},
	}}
}

func (h *harness) add(list *libcni.NetworkConfigList, p *pod) error {
	h.t.Helper()
	r, err := h.node.Add(h.ctx, list, p.rt)
	if err != nil {
		return err
	}
	res, err := current.NewResultFromResult(r.(types.Result))
	if err != nil {
		h.t.Fatalf("convert result: %v", err)
	}
	p.res = res
	return nil
}

func (h *harness) mustAdd(list *libcni.NetworkConfigList, p *pod) netip.Addr {
	h.t.Helper()
	if err := h.add(list, p); err != nil {
		h.t.Fatalf("ADD %s: %v", p.rt.ContainerID, err)
	}
	return podIP(h.t, p)
}

func podIP(t *testing.T, p *pod) netip.Addr {
	t.Helper()
	if len(p.res.IPs) != 1 {
		t.Fatalf("result has %d IPs, want 1: %+v", len(p.res.IPs), p.res)
	}
	ip, _ := netip.AddrFromSlice(p.res.IPs[0].Address.IP)
	return ip.Unmap()
}

// handles lists the attachments IPAM holds for this harness's network, sorted: the handles of
// its block allocations and of its IPAMHandle objects (which exist for borrowed addresses only).
func (h *harness) handles() []string {
	l, err := env.Client.IPAMHandles().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Errorf("list handles: %v", err)
		return nil
	}
	seen := map[string]bool{}
	for _, x := range l.Items {
		seen[x.Spec.HandleID] = true
	}
	for _, id := range h.allocations() {
		seen[id] = true
	}
	var out []string
	for id := range seen {
		if strings.HasPrefix(id, h.network+".") {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// allocations lists the block allocations of this harness's network.
func (h *harness) allocations() map[string]string {
	l, err := env.Client.IPAMBlocks().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Errorf("list blocks: %v", err)
		return nil
	}
	out := map[string]string{}
	for _, b := range l.Items {
		for ord, al := range b.Spec.Allocations {
			if strings.HasPrefix(al.Handle, h.network+".") {
				out[b.Spec.CIDR+"#"+ord] = al.Handle
			}
		}
	}
	return out
}

// assertClean: no host veth, no tabby route in the node, nothing of this network in IPAM.
func (h *harness) assertClean(what string) {
	h.t.Helper()
	var veths []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if veths, err = h.node.HostVeths(); err != nil {
			h.t.Fatal(err)
		}
		// A removed netns takes its veths down asynchronously (the kernel's cleanup work).
		if len(veths) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(veths) > 0 {
		h.t.Errorf("%s: host veths left in the node: %v", what, veths)
	}
	routes, err := h.node.TabbyRoutes()
	if err != nil {
		h.t.Fatal(err)
	}
	if len(routes) > 0 {
		h.t.Errorf("%s: proto 201 routes left in the node: %v", what, routes)
	}
	if hs := h.handles(); len(hs) > 0 {
		h.t.Errorf("%s: IPAM handles left: %v", what, hs)
	}
	if al := h.allocations(); len(al) > 0 {
		h.t.Errorf("%s: block allocations left: %v", what, al)
	}
}

// cniCode extracts the CNI error of a failed libcni call.
func cniCode(t *testing.T, err error) *types.Error {
	t.Helper()
	if err == nil {
		t.Fatal("expected a CNI error, got success")
	}
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error is not a CNI error JSON: %T %v", err, err)
	}
	return e
}

// serveIPAM runs tabby-node's IPAM service (the code tabby-node runs) on a socket of the test.
func (h *harness) serveIPAM() (socket string, stop func()) {
	h.t.Helper()
	return h.serveIPAMWith(ipam.NewKubeStore(env.Client))
}

// serveIPAMWith serves tabby-node's IPAM over store.
func (h *harness) serveIPAMWith(store ipam.Store) (socket string, stop func()) {
	h.t.Helper()
	socket = filepath.Join(h.t.TempDir(), "ipam.sock")
	l, err := rpc.Listen(socket)
	if err != nil {
		h.t.Fatal(err)
	}
	srv := rpc.NewServer(ipam.New(store, ipam.Config{}))
	go srv.Serve(l)
	h.t.Cleanup(srv.Stop)
	return socket, srv.Stop
}

// deadKubeconfig points at a port nothing listens on.
func (h *harness) deadKubeconfig() string {
	h.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := filepath.Join(h.t.TempDir(), "dead-kubeconfig")
	if err := testenv.WriteKubeconfig(p, "https://"+addr, "nobody"); err != nil {
		h.t.Fatal(err)
	}
	return p
}
