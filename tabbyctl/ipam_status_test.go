package tabbyctl_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/internal/grpcjson"
)

// must returns v, failing the test on err: must(t)(f()).
func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func createPod(t *testing.T, ns, name, node, ip string) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	p = must[*corev1.Pod](t)(env.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	must[*corev1.Pod](t)(env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}))
}

func createBlock(t *testing.T, cidr, affinity string, allocs map[string]v1.Allocation) {
	t.Helper()
	b := &v1.IPAMBlock{Spec: v1.IPAMBlockSpec{CIDR: cidr, Affinity: affinity, Allocations: allocs}}
	b.Name = names.BlockName(netipPrefix(t, cidr))
	must[*v1.IPAMBlock](t)(env.Client.IPAMBlocks().Create(context.Background(), b))
	t.Cleanup(func() { _ = env.Client.IPAMBlocks().Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
}

func createHandle(t *testing.T, id string, blocks map[string]int) {
	t.Helper()
	h := &v1.IPAMHandle{Spec: v1.IPAMHandleSpec{HandleID: id, Block: blocks}}
	h.Name = names.HandleName(id)
	must[*v1.IPAMHandle](t)(env.Client.IPAMHandles().Create(context.Background(), h))
	t.Cleanup(func() { _ = env.Client.IPAMHandles().Delete(context.Background(), h.Name, metav1.DeleteOptions{}) })
}

func netipPrefix(t *testing.T, s string) netip.Prefix {
	t.Helper()
	return must[netip.Prefix](t)(netip.ParsePrefix(s))
}

func TestIPAM(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := "ipam-test"
	must[*corev1.Namespace](t)(env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	mustRun(t, "", "create", "-f", writeFile(t, "pool.yaml", "apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: ipam-pool}\nspec: {cidr: 10.244.200.0/24, blockSize: 28}\n"))
	t.Cleanup(func() { run(t, "", "delete", "ippool", "ipam-pool") })
	createNode(t, "ipam-n1", nil, nil)

	// Block 1 (node ipam-n1): .0 tunnel, .1 pod p1, .2 a pod that is gone.
	createBlock(t, "10.244.200.0/28", "host:ipam-n1", map[string]v1.Allocation{
		"0": {Handle: names.TunnelHandle("ipam-n1"), Node: "ipam-n1"},
		"1": {Handle: "k8s-pod-network.c1", Namespace: ns, Pod: "p1", Node: "ipam-n1"},
		"2": {Handle: "k8s-pod-network.c2", Namespace: ns, Pod: "gone", Node: "ipam-n1"},
	})
	// Block 2 belongs to a node that no longer exists; its pod p2 still runs.
	createBlock(t, "10.244.200.16/28", "host:ipam-deleted", map[string]v1.Allocation{
		"0": {Handle: "k8s-pod-network.c3", Namespace: ns, Pod: "p2", Node: "ipam-deleted"},
	})
	createHandle(t, names.TunnelHandle("ipam-n1"), map[string]int{"10.244.200.0/28": 1})
	createHandle(t, "k8s-pod-network.c1", map[string]int{"10.244.200.0/28": 1})
	createHandle(t, "k8s-pod-network.c2", map[string]int{"10.244.200.0/28": 1})
	createHandle(t, "k8s-pod-network.c3", map[string]int{"10.244.200.16/28": 1})
	createPod(t, ns, "p1", "ipam-n1", "10.244.200.1")
	createPod(t, ns, "p2", "ipam-n1", "10.244.200.16")
	createPod(t, ns, "p3", "ipam-n1", "10.244.200.5")   // no allocation
	createPod(t, ns, "p4", "ipam-n1", "10.244.200.1")   // duplicate of p1
	createPod(t, ns, "host", "ipam-n1", "198.51.100.9") // outside every pool: ignored

	out := mustRun(t, "", "ipam", "show")
	if !containsRow(out, []string{"ipam-pool", "10.244.200.0/24", "256", "4", "2%", "252"}) {
		t.Errorf("ipam show:\n%s", out)
	}
	out = mustRun(t, "", "ipam", "show", "--show-blocks")
	for _, row := range [][]string{
		{"pool", "ipam-pool", "10.244.200.0/24", "-", "256", "4", "2%", "252"},
		{"block", "ipam-pool", "10.244.200.0/28", "ipam-n1", "16", "3", "19%", "13"},
		{"block", "ipam-pool", "10.244.200.16/28", "ipam-deleted", "16", "1", "6%", "15"},
	} {
		if !containsRow(out, row) {
			t.Errorf("ipam show --show-blocks lacks %v:\n%s", row, out)
		}
	}
	out = mustRun(t, "", "ipam", "show", "--ip", "10.244.200.1")
	if !strings.Contains(out, "10.244.200.1 is allocated to pod ipam-test/p1 (handle k8s-pod-network.c1) in block 10.244.200.0/28 (affinity host:ipam-n1), by node ipam-n1") {
		t.Errorf("show --ip: %s", out)
	}
	out = mustRun(t, "", "ipam", "show", "--ip", "10.244.200.0")
	if !strings.Contains(out, "the IPIP tunnel of node ipam-n1") {
		t.Errorf("show --ip tunnel: %s", out)
	}
	r := run(t, "", "ipam", "show", "--ip", "10.244.200.9")
	if r.code != 1 || !strings.Contains(r.stdout, "10.244.200.9 is in block 10.244.200.0/28 (affinity host:ipam-n1) but not allocated") {
		t.Errorf("show --ip free: %+v", r)
	}

	r = run(t, "", "ipam", "check")
	if r.code != 1 {
		t.Errorf("ipam check exit %d, want 1:\n%s", r.code, r.stdout)
	}
	for _, want := range []string{
		"allocation without a live pod: 10.244.200.2 (block 10.244.200.0/28, handle k8s-pod-network.c2) is allocated to pod ipam-test/gone, which does not exist",
		"block of a deleted node: block 10.244.200.16/28 has affinity host:ipam-deleted but Node ipam-deleted does not exist (1 addresses allocated)",
		"pod without an allocation: pod ipam-test/p3 has address 10.244.200.5, which is not allocated",
		"duplicate IP: 10.244.200.1 is the address of 2 live pods: ipam-test/p1, ipam-test/p4",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ipam check lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "198.51.100.9") || strings.Contains(r.stdout, "10.244.200.0 ") {
		t.Errorf("ipam check reports a healthy address:\n%s", r.stdout)
	}

	// release refuses an address a live pod uses...
	r = run(t, "", "ipam", "release", "--ip", "10.244.200.1")
	if r.code == 0 || !strings.Contains(r.stderr, "10.244.200.1 is in use by live pod [ipam-test/p1 ipam-test/p4]") {
		t.Errorf("release in use: %+v", r)
	}
	// ...frees a leaked one, block and handle alike...
	out = mustRun(t, "", "ipam", "release", "--ip", "10.244.200.2")
	if !strings.Contains(out, "Released 10.244.200.2 (handle k8s-pod-network.c2, block 10.244.200.0/28)") {
		t.Errorf("release: %s", out)
	}
	b := must[*v1.IPAMBlock](t)(env.Client.IPAMBlocks().Get(ctx, "10-244-200-0-28"))
	if _, ok := b.Spec.Allocations["2"]; ok || len(b.Spec.Allocations) != 2 {
		t.Errorf("block after release: %v", b.Spec.Allocations)
	}
	if _, err := env.Client.IPAMHandles().Get(ctx, names.HandleName("k8s-pod-network.c2")); err == nil {
		t.Errorf("handle of the released address still exists")
	}
	// ...says so for a free one, and --force overrides the live-pod check.
	r = run(t, "", "ipam", "release", "--ip", "10.244.200.9")
	if r.code == 0 || !strings.Contains(r.stderr, "not allocated") {
		t.Errorf("release free: %+v", r)
	}
	mustRun(t, "", "ipam", "release", "--ip", "10.244.200.16", "--force")
	r = run(t, "", "ipam", "check")
	if strings.Contains(r.stdout, "10.244.200.2 ") || !strings.Contains(r.stdout, "pod ipam-test/p2 has address 10.244.200.16, which is not allocated") {
		t.Errorf("check after release:\n%s", r.stdout)
	}
}

func containsRow(out string, row []string) bool {
	for _, l := range fields(out) {
		if strings.Join(l, " ") == strings.Join(row, " ") {
			return true
		}
	}
	return false
}

// fakeBGP stands in for the BGP speaker behind the real status service (bird/status).
type fakeBGP struct{ reply status.PeersReply }

func (f fakeBGP) Status(context.Context) (*status.PeersReply, error) { return &f.reply, nil }

func serveStatus(t *testing.T, socket string, peers []status.PeerStatus, problems ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	l := must[net.Listener](t)(grpcjson.Listen(socket))
	go func() {
		done <- status.ServeListener(ctx, l, fakeBGP{status.PeersReply{Node: "node-a", Peers: peers, Problems: problems}})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("status server: %v", err)
		}
	})
}

func TestNodeStatus(t *testing.T) {
	needCluster(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "bird.sock")
	since := time.Now().Add(-time.Minute).Truncate(time.Second)
	serveStatus(t, socket, []status.PeerStatus{
		{Address: "198.51.100.12", ASN: 64512, Type: "mesh", State: "established", Since: since,
			Families: []status.FamilyRoutes{{Family: "ipv4", State: status.FamilyUp, Received: 1, Accepted: 1, Sent: 1}, {Family: "ipv6", State: status.FamilyUp, Received: 2, Accepted: 2, Sent: 1}}},
		{Address: "198.51.100.1", ASN: 65001, Type: "global", State: "active", Since: since.AddDate(0, 0, -3), Info: "Socket: Connection refused"},
		{Address: "[2001:db8:100::1]:1179", ASN: 65001, Type: "global", State: "established", Since: since,
			Families: []status.FamilyRoutes{{Family: "ipv6", State: status.FamilyUp, Received: 3, Accepted: 2, Sent: 1}}},
	}, "bgppeer/tor6b: no session to 2001:db8:100::2: node node-a has no IPv6 BGP address")
	out := mustRun(t, "", "node", "status", "--socket", socket)
	want := "tabby-node is running.\n\nIPv4 BGP status\n"
	if !strings.HasPrefix(out, want) {
		t.Fatalf("node status:\n%s", out)
	}
	v4, v6, ok := strings.Cut(out, "IPv6 BGP status\n")
	if !ok {
		t.Fatalf("node status has no IPv6 table:\n%s", out)
	}
	for _, c := range []struct{ table, row string }{
		{v4, "| PEER ADDRESS  |     PEER TYPE     | STATE |   SINCE    |               INFO                | ROUTES RECV/ACC/SENT  |"},
		{v4, "| 198.51.100.12 | node-to-node mesh | up    | " + since.Format("15:04:05") + "   | Established                       | ipv4 1/1/1 ipv6 2/2/1 |"},
		{v4, "| 198.51.100.1  | global            | start | " + since.AddDate(0, 0, -3).Format("2006-01-02") + " | Active Socket: Connection refused | -                     |"},
		{v6, "| [2001:db8:100::1]:1179 | global    | up    | " + since.Format("15:04:05") + " | Established | ipv6 3/2/1           |"},
		{v6, "Configuration problems (no session for these):\n  bgppeer/tor6b: no session to 2001:db8:100::2: node node-a has no IPv6 BGP address"},
	} {
		if !strings.Contains(c.table, c.row) {
			t.Errorf("node status lacks\n%s\nin\n%s", c.row, c.table)
		}
	}

	// --node reads the per-node layout.
	nodeDir := filepath.Join(dir, "nodes", "node-b")
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	serveStatus(t, filepath.Join(nodeDir, "bird.sock"), nil)
	out = mustRun(t, "", "node", "status", "--node", "node-b", "--socket-dir", filepath.Join(dir, "nodes"))
	if !strings.Contains(out, "tabby-node is running.") || !strings.Contains(out, "No IPv4 peers found.") {
		t.Errorf("node status --node:\n%s", out)
	}

	// The lab's layout: the node's run directory inside its node directory.
	labRun := filepath.Join(dir, "lab", "nodes", "node-c", "run")
	if err := os.MkdirAll(labRun, 0o755); err != nil {
		t.Fatal(err)
	}
	serveStatus(t, filepath.Join(labRun, "bird.sock"), nil)
	if out := mustRun(t, "", "node", "status", "--node", "node-c", "--socket-dir", filepath.Join(dir, "lab", "nodes")); !strings.Contains(out, "tabby-node is running.") {
		t.Errorf("node status --node in the lab's layout:\n%s", out)
	}

	// Not running: no socket, or a stale socket nobody listens on.
	r := run(t, "", "node", "status", "--socket", filepath.Join(dir, "missing.sock"))
	if r.code == 0 || r.stdout != "" || strings.Count(r.stderr, "not running") != 1 || !strings.Contains(r.stderr, "missing.sock") {
		t.Errorf("missing socket: want one message naming the socket, on stderr: %+v", r)
	}
	stale := filepath.Join(dir, "stale.sock")
	l := must[net.Listener](t)(net.Listen("unix", stale))
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	r = run(t, "", "node", "status", "--socket", stale, "--timeout", "2s")
	if r.code == 0 || r.stdout != "" || strings.Count(r.stderr, "not running") != 1 || !strings.Contains(r.stderr, "did not answer") {
		t.Errorf("stale socket: %+v", r)
	}
}

// TestIPv6Pool: an IPv6 pool shows its family's defaults, its size without overflowing, and an
// IPv4-only field on it is refused before anything is written, naming the field.
func TestIPv6Pool(t *testing.T) {
	needCluster(t)
	mustRun(t, "", "create", "-f", writeFile(t, "pool6.yaml", "apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: v6-pool}\nspec: {cidr: 'fd00:10:244::/48'}\n"))
	t.Cleanup(func() { run(t, "", "delete", "ippool", "v6-pool") })
	wantRows(t, mustRun(t, "", "get", "ippool", "v6-pool", "-o", "wide"), [][]string{
		{"NAME", "CIDR", "SELECTOR", "NAT", "IPIPMODE", "VXLANMODE", "DISABLED", "BLOCKSIZE"},
		{"v6-pool", "fd00:10:244::/48", "all()", "false", "Never", "Never", "false", "122"},
	})
	if out := mustRun(t, "", "ipam", "show"); !containsRow(out, []string{"v6-pool", "fd00:10:244::/48", "2^80", "0", "0%", "2^80"}) {
		t.Errorf("ipam show:\n%s", out)
	}
	r := run(t, "", "patch", "ippool", "v6-pool", "-p", `{"spec":{"ipipMode":"Always"}}`)
	if r.code == 0 || !strings.Contains(r.stderr, `spec.ipipMode: Invalid value: "Always": is IPv4-only`) {
		t.Fatalf("IPIP on an IPv6 pool: exit %d stderr %q", r.code, r.stderr)
	}
}
