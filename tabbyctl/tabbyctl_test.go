package tabbyctl_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/internal/testenv"
)

// One control plane for the package: each start costs seconds.
var (
	env      *testenv.Env
	tabbyctl string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, cleanupBin, err := binary(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build tabbyctl:", err)
		os.Exit(1)
	}
	tabbyctl = bin
	env, err = testenv.StartProcess(ctx, testenv.Options{})
	if err != nil {
		cleanupBin()
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	env.Stop()
	cleanupBin()
	os.Exit(code)
}

// binary is $TABBY_BIN/tabbyctl (make test), else a fresh build of ./cmd/tabbyctl.
func binary(ctx context.Context) (string, func(), error) {
	if d := os.Getenv("TABBY_BIN"); d != "" {
		p := filepath.Join(d, "tabbyctl")
		if _, err := os.Stat(p); err == nil {
			return p, func() {}, nil
		}
	}
	dir, err := os.MkdirTemp("", "tabbyctl-test-")
	if err != nil {
		return "", nil, err
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..")
	out := filepath.Join(dir, "tabbyctl")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "-ldflags", "-X github.com/tabbynet/tabby/internal/version.Version=v0.0.0-test", "./cmd/tabbyctl")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("%v: %s", err, b)
	}
	return out, func() { os.RemoveAll(dir) }, nil
}

// needCluster skips under -short: the tests run the real binary against the real API server.
func needCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the control plane and the tabbyctl binary")
	}
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs the real tabbyctl against the test cluster.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, tabbyctl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run tabbyctl %v: %v", args, err)
	}
	return r
}

func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := run(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("tabbyctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fields splits table output into rows of columns.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func wantRows(t *testing.T, out string, want [][]string) {
	t.Helper()
	got := fields(out)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table:\n%s\nwant rows %v", out, want)
	}
}

const poolsYAML = `# two pools and the BGP setup
apiVersion: tabby.dev/v1
kind: IPPool
metadata:
  name: crud-a
spec:
  cidr: 10.244.0.0/20
  blockSize: 26
  natOutgoing: true
---
apiVersion: tabby.dev/v1
kind: IPPool
metadata:
  name: crud-b
spec:
  cidr: 10.244.16.0/20
  ipipMode: CrossSubnet
  blockSize: 28
  disabled: true
  nodeSelector: zone == 'b'
---
apiVersion: tabby.dev/v1
kind: BGPPeer
metadata:
  name: crud-tor
spec:
  peerIP: 198.51.100.1
  asNumber: 65001
  node: node-a
---
apiVersion: tabby.dev/v1
kind: BGPPeer
metadata:
  name: crud-rr
spec:
  nodeSelector: "!has(route-reflector)"
  peerSelector: has(route-reflector)
`

func TestCRUDRoundTrip(t *testing.T) {
	needCluster(t)
	f := writeFile(t, "pools.yaml", poolsYAML)
	out := mustRun(t, "", "create", "-f", f)
	for _, want := range []string{`IPPool "crud-a" created`, `IPPool "crud-b" created`, `BGPPeer "crud-tor" created`, `BGPPeer "crud-rr" created`} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}
	t.Cleanup(func() { run(t, "", "delete", "--ignore-not-found", "-f", f) })

	r := run(t, "", "create", "-f", f)
	if r.code == 0 || !strings.Contains(r.stderr, `pools.yaml: document 1 (IPPool "crud-a")`) || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("second create: exit %d, stderr %q; want an AlreadyExists error naming the document", r.code, r.stderr)
	}

	wantRows(t, mustRun(t, "", "get", "ippool", "crud-a", "crud-b"), [][]string{
		{"NAME", "CIDR", "SELECTOR"},
		{"crud-a", "10.244.0.0/20", "all()"},
		{"crud-b", "10.244.16.0/20", "zone", "==", "'b'"},
	})
	wantRows(t, mustRun(t, "", "get", "ippools", "crud-a", "crud-b", "-o", "wide"), [][]string{
		{"NAME", "CIDR", "SELECTOR", "NAT", "IPIPMODE", "VXLANMODE", "DISABLED", "BLOCKSIZE"},
		{"crud-a", "10.244.0.0/20", "all()", "true", "Never", "Never", "false", "26"},
		{"crud-b", "10.244.16.0/20", "zone", "==", "'b'", "false", "CrossSubnet", "Never", "true", "28"},
	})
	for _, alias := range []string{"bgppeer", "bgpp", "bp"} {
		wantRows(t, mustRun(t, "", "get", alias, "crud-rr", "crud-tor"), [][]string{
			{"NAME", "PEERIP", "NODE", "ASN"},
			{"crud-rr", "(selector)", "has(route-reflector)", "(selector)", "!has(route-reflector)", "(node's)"},
			{"crud-tor", "198.51.100.1", "node-a", "65001"},
		})
	}

	// -o yaml output is a valid input: edit it and apply it back.
	y := mustRun(t, "", "get", "ippool", "crud-a", "-o", "yaml")
	if !strings.Contains(y, "apiVersion: tabby.dev/v1") || !strings.Contains(y, "kind: IPPool") {
		t.Fatalf("yaml lacks apiVersion/kind:\n%s", y)
	}
	edited := strings.Replace(y, "natOutgoing: true", "natOutgoing: false", 1)
	out = mustRun(t, edited, "apply", "-f", "-")
	if !strings.Contains(out, `IPPool "crud-a" configured`) {
		t.Fatalf("apply: %s", out)
	}
	p, err := env.Client.IPPools().Get(context.Background(), "crud-a")
	if err != nil || p.Spec.NATOutgoing {
		t.Fatalf("after apply: %+v, %v; want natOutgoing false", p.Spec, err)
	}
	// JSON output parses, and a list comes back as a List.
	j := mustRun(t, "", "get", "bgppeer", "crud-tor", "crud-rr", "-o", "json")
	if !strings.Contains(j, `"kind": "List"`) || !strings.Contains(j, `"peerIP": "198.51.100.1"`) {
		t.Fatalf("json:\n%s", j)
	}

	// replace with a changed file.
	replaced := strings.Replace(poolsYAML, "asNumber: 65001", "asNumber: 65002", 1)
	out = mustRun(t, "", "replace", "-f", writeFile(t, "pools.yaml", replaced))
	if !strings.Contains(out, `BGPPeer "crud-tor" replaced`) {
		t.Fatalf("replace: %s", out)
	}
	peer, err := env.Client.BGPPeers().Get(context.Background(), "crud-tor")
	if err != nil || peer.Spec.ASNumber != 65002 {
		t.Fatalf("after replace: %+v, %v", peer.Spec, err)
	}

	// patch, validated before it is sent.
	mustRun(t, "", "patch", "ippool", "crud-b", "-p", `{"spec":{"disabled":false,"nodeSelector":null}}`)
	p, err = env.Client.IPPools().Get(context.Background(), "crud-b")
	if err != nil || p.Spec.Disabled || p.Spec.NodeSelector != "" {
		t.Fatalf("after patch: %+v, %v", p.Spec, err)
	}
	r = run(t, "", "patch", "ippool", "crud-b", "-p", "spec: {blockSize: 19}")
	if r.code == 0 || !strings.Contains(r.stderr, `IPPool "crud-b": spec.blockSize: Invalid value: 19: must be between 20 and 32`) {
		t.Fatalf("bad patch: exit %d stderr %q", r.code, r.stderr)
	}
	r = run(t, "", "patch", "ippool", "crud-b", "-p", `{"spec":{"cidr":"10.244.8.0/21"}}`)
	if r.code == 0 || !strings.Contains(r.stderr, "overlaps IPPool crud-a") {
		t.Fatalf("overlapping patch: exit %d stderr %q", r.code, r.stderr)
	}

	// delete by file, then by name.
	out = mustRun(t, "", "delete", "-f", f)
	if !strings.Contains(out, `IPPool "crud-a" deleted`) || !strings.Contains(out, `BGPPeer "crud-rr" deleted`) {
		t.Fatalf("delete: %s", out)
	}
	if r := run(t, "", "get", "ippool", "crud-a"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("get after delete: %+v", r)
	}
}

func TestBGPConfiguration(t *testing.T) {
	needCluster(t)
	f := writeFile(t, "bgp.yaml", `apiVersion: tabby.dev/v1
kind: BGPConfiguration
metadata: {name: default}
spec:
  asNumber: 64600
  nodeToNodeMeshEnabled: false
  logSeverity: Warning
`)
	mustRun(t, "", "apply", "-f", f)
	t.Cleanup(func() { run(t, "", "delete", "bgpconfig", "default") })
	wantRows(t, mustRun(t, "", "get", "bgpconfig"), [][]string{
		{"NAME", "ASN", "MESH", "PORT", "LOGSEVERITY"},
		{"default", "64600", "false", "179", "Warning"},
	})
	r := run(t, "", "apply", "-f", writeFile(t, "bad.yaml", `apiVersion: tabby.dev/v1
kind: BGPConfiguration
metadata: {name: other}
spec: {keepaliveTime: 10s, holdTime: 20s}
`))
	for _, want := range []string{
		`bad.yaml: document 1 (BGPConfiguration "other"): metadata.name: Invalid value: "other": is not allowed`,
		`bad.yaml: document 1 (BGPConfiguration "other"): spec.holdTime: Invalid value: "20s": must be at least 3 x spec.keepaliveTime`,
	} {
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
}

func TestValidationErrorsNameFileDocumentFieldValue(t *testing.T) {
	needCluster(t)
	f := writeFile(t, "pools.yaml", `apiVersion: tabby.dev/v1
kind: IPPool
metadata: {name: good}
spec: {cidr: 10.244.64.0/20}
---
apiVersion: tabby.dev/v1
kind: IPPool
metadata: {name: bad}
spec: {cidr: 10.244.80.0/20, blockSize: 19}
---
apiVersion: tabby.dev/v1
kind: IPPool
metadata: {name: hostbits}
spec: {cidr: 10.244.96.1/20, ipipMode: Sometimes}
---
apiVersion: tabby.dev/v1
kind: IPPool
metadata: {name: overlap}
spec: {cidr: 10.244.64.0/24}
---
apiVersion: tabby.dev/v1
kind: BGPPeer
metadata: {name: nopeer}
spec: {peerIP: 198.51.100.300, asNumber: 65001}
`)
	for _, verb := range []string{"create", "apply"} {
		r := run(t, "", verb, "-f", f)
		if r.code == 0 {
			t.Fatalf("%s of bad file succeeded: %s", verb, r.stdout)
		}
		for _, want := range []string{
			`pools.yaml: document 2 (IPPool "bad"): spec.blockSize: Invalid value: 19: must be between 20 and 32`,
			`pools.yaml: document 3 (IPPool "hostbits"): spec.cidr: Invalid value: "10.244.96.1/20": has host bits set (want 10.244.96.0/20)`,
			`pools.yaml: document 3 (IPPool "hostbits"): spec.ipipMode: Unsupported value: "Sometimes"`,
			`pools.yaml: document 4 (IPPool "overlap"): spec.cidr: Invalid value: "10.244.64.0/24": overlaps IPPool good (10.244.64.0/20)`,
			`pools.yaml: document 5 (BGPPeer "nopeer"): spec.peerIP: Invalid value: "198.51.100.300"`,
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", verb, want, r.stderr)
			}
		}
		// Nothing was written, not even the good document.
		if _, err := env.Client.IPPools().Get(context.Background(), "good"); err == nil {
			t.Fatalf("%s wrote document 1 although document 2 is invalid", verb)
		}
	}

	// Decoding errors name the document too.
	for _, c := range []struct{ doc, want string }{
		{"apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: x}\nspec: {cidr: 10.244.0.0/16, blocksize: 24}\n", `typo.yaml: document 1 (IPPool): unknown field "spec.blocksize"`},
		{"apiVersion: tabby.dev/v1\nkind: Pool\nmetadata: {name: x}\n", `typo.yaml: document 1: kind: Unsupported value: "Pool"`},
		{"apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: x}\n", `typo.yaml: document 1: apiVersion: Unsupported value: "projectcalico.org/v3"`},
		{"apiVersion: tabby.dev/v1\nkind: IPPool\nspec: {cidr: 10.244.0.0/16}\n", `typo.yaml: document 1 (IPPool ""): metadata.name: Required value`},
	} {
		r := run(t, "", "create", "-f", writeFile(t, "typo.yaml", c.doc))
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("exit %d, stderr %q; want %q", r.code, r.stderr, c.want)
		}
	}
	// Overlap with a pool already in the cluster.
	mustRun(t, "", "create", "-f", writeFile(t, "one.yaml", "apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: existing}\nspec: {cidr: 10.244.128.0/18}\n"))
	t.Cleanup(func() { run(t, "", "delete", "ippool", "existing") })
	r := run(t, "", "create", "-f", writeFile(t, "two.yaml", "apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: inside}\nspec: {cidr: 10.244.130.0/24}\n"))
	if r.code == 0 || !strings.Contains(r.stderr, `two.yaml: document 1 (IPPool "inside"): spec.cidr: Invalid value: "10.244.130.0/24": overlaps IPPool existing (10.244.128.0/18)`) {
		t.Errorf("overlap with cluster: exit %d stderr %q", r.code, r.stderr)
	}
}

func createNode(t *testing.T, name string, labels, annotations map[string]string) {
	t.Helper()
	_, err := env.Kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func TestNodeView(t *testing.T) {
	needCluster(t)
	createNode(t, "nv-1", map[string]string{"kubernetes.io/hostname": "nv-1"}, map[string]string{"other.example/keep": "yes"})
	createNode(t, "nv-2", nil, map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.12/24", v1.AnnotationBGPIPv6Address: "2001:db8:100::12/64"})
	f := writeFile(t, "nodes.yaml", `apiVersion: tabby.dev/v1
kind: Node
metadata:
  name: nv-1
  labels: {route-reflector: "true"}
spec:
  bgp:
    asNumber: 64513
    ipv4Address: 198.51.100.11/24
    routeReflectorClusterID: 244.0.0.1
`)
	out := mustRun(t, "", "apply", "-f", f)
	if !strings.Contains(out, `Node "nv-1" configured`) {
		t.Fatalf("apply: %s", out)
	}
	k, err := env.Kube.CoreV1().Nodes().Get(context.Background(), "nv-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Annotations[v1.AnnotationBGPASN] != "64513" || k.Annotations[v1.AnnotationRRClusterID] != "244.0.0.1" ||
		k.Annotations["other.example/keep"] != "yes" || k.Labels["route-reflector"] != "true" || k.Labels["kubernetes.io/hostname"] != "nv-1" {
		t.Fatalf("node after apply: labels %v annotations %v", k.Labels, k.Annotations)
	}
	wantRows(t, mustRun(t, "", "get", "node", "nv-1", "nv-2"), [][]string{
		{"NAME", "ASN", "IPV4-ADDRESS", "IPV6-ADDRESS", "RR-CLUSTER-ID", "TUNNEL-ADDRESS"},
		{"nv-1", "64513", "198.51.100.11/24", "-", "244.0.0.1", "-"},
		{"nv-2", "(64512)", "198.51.100.12/24", "2001:db8:100::12/64", "-", "-"},
	})
	mustRun(t, "", "patch", "node", "nv-2", "-p", `{"spec":{"bgp":{"routeReflectorClusterID":"244.0.0.1","asNumber":64514}},"metadata":{"labels":{"route-reflector":"true"}}}`)
	wantRows(t, mustRun(t, "", "get", "no", "nv-2"), [][]string{
		{"NAME", "ASN", "IPV4-ADDRESS", "IPV6-ADDRESS", "RR-CLUSTER-ID", "TUNNEL-ADDRESS"},
		{"nv-2", "64514", "198.51.100.12/24", "2001:db8:100::12/64", "244.0.0.1", "-"},
	})
	mustRun(t, "", "patch", "node", "nv-2", "-p", `{"spec":{"bgp":{"routeReflectorClusterID":null}},"metadata":{"labels":{"route-reflector":null}}}`)
	k, _ = env.Kube.CoreV1().Nodes().Get(context.Background(), "nv-2", metav1.GetOptions{})
	if _, ok := k.Annotations[v1.AnnotationRRClusterID]; ok || k.Labels["route-reflector"] != "" || k.Annotations[v1.AnnotationBGPASN] != "64514" {
		t.Fatalf("after removing patch: labels %v annotations %v", k.Labels, k.Annotations)
	}

	r := run(t, "", "patch", "node", "nv-2", "-p", `{"spec":{"bgp":{"routeReflectorClusterID":"not-an-id"}}}`)
	if r.code == 0 || !strings.Contains(r.stderr, `Node "nv-2": spec.bgp.routeReflectorClusterID: Invalid value: "not-an-id"`) {
		t.Fatalf("bad patch: %+v", r)
	}
	r = run(t, "", "apply", "-f", writeFile(t, "n.yaml", "apiVersion: tabby.dev/v1\nkind: Node\nmetadata: {name: nv-1}\nspec: {bgp: {ipv4Address: 198.51.100.11}}\n"))
	if r.code == 0 || !strings.Contains(r.stderr, `n.yaml: document 1 (Node "nv-1"): spec.bgp.ipv4Address: Invalid value: "198.51.100.11"`) {
		t.Fatalf("bad node file: %+v", r)
	}
	r = run(t, "", "patch", "node", "nv-2", "-p", `{"spec":{"bgp":{"ipv6Address":"198.51.100.12/24"}}}`)
	if r.code == 0 || !strings.Contains(r.stderr, `Node "nv-2": spec.bgp.ipv6Address: Invalid value: "198.51.100.12/24"`) {
		t.Fatalf("IPv4 address as the IPv6 one: %+v", r)
	}
	r = run(t, "", "apply", "-f", writeFile(t, "n.yaml", "apiVersion: tabby.dev/v1\nkind: Node\nmetadata: {name: nv-missing}\nspec: {bgp: {asNumber: 65000}}\n"))
	if r.code == 0 || !strings.Contains(r.stderr, `no Kubernetes Node "nv-missing"`) {
		t.Fatalf("missing node: %+v", r)
	}

	// replace drops the tabby annotations the file leaves out; delete drops them all and keeps
	// the Node and everything else on it.
	mustRun(t, "", "replace", "-f", writeFile(t, "n.yaml", "apiVersion: tabby.dev/v1\nkind: Node\nmetadata: {name: nv-1}\nspec: {bgp: {ipv4Address: 198.51.100.21/24}}\n"))
	k, _ = env.Kube.CoreV1().Nodes().Get(context.Background(), "nv-1", metav1.GetOptions{})
	if k.Annotations[v1.AnnotationBGPIPv4Address] != "198.51.100.21/24" || k.Annotations[v1.AnnotationBGPASN] != "" || k.Annotations[v1.AnnotationRRClusterID] != "" {
		t.Fatalf("after replace: %v", k.Annotations)
	}
	out = mustRun(t, "", "delete", "node", "nv-1")
	if !strings.Contains(out, `Node "nv-1" tabby settings removed`) {
		t.Fatalf("delete: %s", out)
	}
	k, err = env.Kube.CoreV1().Nodes().Get(context.Background(), "nv-1", metav1.GetOptions{})
	if err != nil || k.Annotations[v1.AnnotationBGPIPv4Address] != "" || k.Annotations["other.example/keep"] != "yes" {
		t.Fatalf("after delete: %v %v", k, err)
	}
	// yaml of a node is a valid input.
	y := mustRun(t, "", "get", "node", "nv-2", "-o", "yaml")
	if !strings.Contains(y, "kind: Node") || !strings.Contains(y, "ipv4Address: 198.51.100.12/24") || !strings.Contains(y, "ipv6Address: 2001:db8:100::12/64") {
		t.Fatalf("node yaml:\n%s", y)
	}
	mustRun(t, y, "apply", "-f", "-")
}

func TestVersion(t *testing.T) {
	needCluster(t)
	out := mustRun(t, "", "version")
	if !strings.Contains(out, "Client Version:  v0.0.0-test") && os.Getenv("TABBY_BIN") == "" {
		t.Errorf("version: %s", out)
	}
	if !strings.Contains(out, "Cluster Version: unknown (tabby is not installed") {
		t.Errorf("version without tabby installed: %s", out)
	}
	if out := mustRun(t, "", "--version"); !strings.HasPrefix(out, "tabbyctl version ") || os.Getenv("TABBY_BIN") == "" && out != "tabbyctl version v0.0.0-test\n" {
		t.Errorf("--version: %q", out)
	}

	// Without the chart (the lab, tabby installed by hand), the versions tabby-node recorded on
	// the Nodes: one version is the cluster's; during an upgrade, which nodes run which.
	createNode(t, "ver-b", nil, map[string]string{v1.AnnotationVersion: "v1.2.2"})
	createNode(t, "ver-a", nil, map[string]string{v1.AnnotationVersion: "v1.2.2"})
	createNode(t, "ver-none", nil, nil)
	out = mustRun(t, "", "version")
	for _, want := range []string{"Cluster Version: v1.2.2 (what tabby-node runs)\n", "\ntabby-node:      v1.2.2 on 2 of ", " nodes (ver-a, ver-b)\n",
		"\ntabby-node:      no version recorded on "} {
		if !strings.Contains(out, want) {
			t.Errorf("version with agents, no chart: want %q in\n%s", want, out)
		}
	}
	createNode(t, "ver-c", nil, map[string]string{v1.AnnotationVersion: "v1.2.3"})
	out = mustRun(t, "", "version")
	if !strings.Contains(out, "Cluster Version: mixed (what tabby-node runs)\ntabby-node:      v1.2.2 on 2 of ") || !strings.Contains(out, "\ntabby-node:      v1.2.3 on 1 of ") {
		t.Errorf("version during an upgrade:\n%s", out)
	}

	// A namespace of its own each run: without a controller manager, a deleted one stays.
	created, err := env.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tabby-version-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := created.Name
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tabby-version", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "tabby", "tabby.dev/info": "version"}}, Data: map[string]string{"version": "v1.2.3"}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	out = mustRun(t, "", "version")
	if !strings.Contains(out, "Cluster Version: v1.2.3 (ConfigMap "+ns+"/tabby-version)\ntabby-node:      v1.2.2 on 2 of ") {
		t.Errorf("version: %s", out)
	}
}

func TestUsageErrors(t *testing.T) {
	needCluster(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "widgets"}, `unknown resource type "widgets"`},
		{[]string{"get", "ippool", "-o", "xml"}, `-o: Unsupported value: "xml"`},
		{[]string{"create"}, "-f FILE is required"},
		{[]string{"ipam", "show", "--ip", "10.244.0"}, `--ip: Invalid value: "10.244.0"`},
		{[]string{"ipam", "release"}, "--ip is required"},
	} {
		r := run(t, "", c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("tabbyctl %v: exit %d stderr %q; want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

func TestNodeMarkRestart(t *testing.T) {
	needCluster(t)
	createNode(t, "mr-1", nil, map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.31/24"})
	ctx := context.Background()
	before := time.Now()
	out := mustRun(t, "", "node", "mark-restart", "mr-1", "--for", "10m")
	k, err := env.Kube.CoreV1().Nodes().Get(ctx, "mr-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	until, err := validation.RestartingUntil(k.Annotations[v1.AnnotationBGPRestarting])
	if err != nil || until.Before(before.Add(9*time.Minute)) || until.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("mark %q (%v), want about 10 minutes from now; output: %s", k.Annotations[v1.AnnotationBGPRestarting], err, out)
	}
	if k.Annotations[v1.AnnotationBGPIPv4Address] != "198.51.100.31/24" {
		t.Fatalf("the mark touched other annotations: %v", k.Annotations)
	}
	mustRun(t, "", "node", "mark-restart", "mr-1", "--clear")
	if k, err = env.Kube.CoreV1().Nodes().Get(ctx, "mr-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, ok := k.Annotations[v1.AnnotationBGPRestarting]; ok {
		t.Fatalf("mark still there after --clear: %q", v)
	}
	for _, args := range [][]string{
		{"node", "mark-restart", "mr-1"},
		{"node", "mark-restart", "mr-1", "--for", "5m", "--clear"},
		{"node", "mark-restart", "no-such-node", "--for", "5m"},
	} {
		r := run(t, "", args...)
		if r.code == 0 || (!strings.Contains(r.stderr, "--for") && !strings.Contains(r.stderr, "no-such-node")) {
			t.Errorf("tabbyctl %v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

// TestNoKubeconfigSaysWhereItLooked: with no cluster configured anywhere, tabbyctl names what it
// looked for and how to point it at a cluster, not client-go's KUBERNETES_MASTER hint.
func TestNoKubeconfigSaysWhereItLooked(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the built tabbyctl")
	}
	cmd := exec.Command(tabbyctl, "get", "ippool")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err == nil {
		t.Fatal("tabbyctl without any kubeconfig succeeded")
	}
	msg := errb.String()
	for _, want := range []string{"--kubeconfig", "KUBECONFIG", ".kube/config", "in-cluster"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %s: %q", want, msg)
		}
	}
	if strings.Contains(msg, "KUBERNETES_MASTER") {
		t.Errorf("error still points at KUBERNETES_MASTER: %q", msg)
	}
}
