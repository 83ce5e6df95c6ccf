// Package e2e holds tabby's end-to-end tests: real clusters built by hack/lab (real
// kube-apiserver and etcd, tabby-node in node namespaces, pods wired by the tabby CNI plugin
// through libcni, FRR or BIRD2 as ToR) and asserted by behaviour: pings, kernel routes, BGP
// sessions, packet captures. They need root, the control plane (`make controlplane`) and the
// binaries (`make build`, TABBY_BIN); `make e2e` provides all three. Skipped only under -short.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

func TestMain(m *testing.M) {
	// Inside the qemu guest the test binary runs one scenario instead of the tests.
	if name := os.Getenv(guestScenarioEnv); name != "" {
		os.Exit(runGuestScenario(name))
	}
	os.Exit(m.Run())
}

// startLab builds a lab for one test and removes it when the test ends, printing the lab's
// diagnostics first if the test failed.
func startLab(t *testing.T, o lab.Options) *lab.Lab {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: needs root, the control plane and the tabby binaries (skipped under -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	l, err := lab.New(ctx, o)
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Logf("lab %s up in %s (objects from %s)", l.ID, time.Since(start).Round(time.Millisecond), l.Chart)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			t.Logf("diagnostics:\n%s", l.Diagnostics(ctx))
		}
		if err := l.Close(ctx); err != nil {
			t.Errorf("lab teardown: %v", err)
		}
		assertNothingLeft(t, l.ID)
	})
	return l
}

// assertNothingLeft checks that no namespace or state of the lab survived its Close.
func assertNothingLeft(t *testing.T, id string) {
	t.Helper()
	ents, _ := os.ReadDir("/var/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), lab.NetnsPrefix+id+"-") {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
	if _, err := os.Stat(lab.StateRoot + "/" + id); err == nil {
		t.Errorf("state directory %s/%s left behind", lab.StateRoot, id)
	}
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// nodeSpecs names n nodes node-1…node-n on subnet A.
func nodeSpecs(n int) []lab.NodeSpec {
	specs := make([]lab.NodeSpec, n)
	for i := range specs {
		specs[i] = lab.NodeSpec{Name: fmt.Sprintf("node-%d", i+1)}
	}
	return specs
}

func addNodes(t *testing.T, ctx context.Context, l *lab.Lab, specs ...lab.NodeSpec) []*lab.Node {
	t.Helper()
	start := time.Now()
	nodes, err := l.AddNodes(ctx, specs...)
	if err != nil {
		t.Fatalf("add nodes: %v", err)
	}
	t.Logf("%d nodes ready in %s", len(nodes), time.Since(start).Round(time.Millisecond))
	return nodes
}

// addPodsPerNode adds per pods on each node, named <node>-p<i>.
func addPodsPerNode(t *testing.T, ctx context.Context, l *lab.Lab, nodes []*lab.Node, per int) []*lab.Pod {
	t.Helper()
	var specs []lab.PodSpec
	for _, n := range nodes {
		for i := range per {
			specs = append(specs, lab.PodSpec{Name: fmt.Sprintf("%s-p%d", n.Name, i), Node: n.Name})
		}
	}
	start := time.Now()
	pods, err := l.AddPods(ctx, specs...)
	if err != nil {
		t.Fatalf("add pods: %v", err)
	}
	t.Logf("%d pods added in %s", len(pods), time.Since(start).Round(time.Millisecond))
	return pods
}

// requireReach fails the test unless every source reaches every destination within timeout.
func requireReach(t *testing.T, ctx context.Context, what string, from, to []lab.Endpoint, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m := lab.PingMatrix(mctx, from, to)
	if f := m.Failures(); len(f) > 0 {
		t.Fatalf("%s: %d pairs unreachable after %s:\n%s\n%s", what, len(f), timeout, strings.Join(f, "\n"), m)
	}
	t.Logf("%s: all %d×%d reachable (%s)", what, len(from), len(to), time.Since(start).Round(time.Millisecond))
}

func podEndpoints(pods []*lab.Pod) []lab.Endpoint {
	es := make([]lab.Endpoint, len(pods))
	for i, p := range pods {
		es[i] = p.Endpoint()
	}
	return es
}

// requireRoutes waits until every node holds exactly the expected tabby routes.
func requireRoutes(t *testing.T, ctx context.Context, l *lab.Lab, timeout time.Duration) {
	t.Helper()
	for _, n := range l.Nodes() {
		if err := lab.Eventually(ctx, timeout, func(ctx context.Context) error { return l.CheckRoutes(ctx, n) }); err != nil {
			t.Fatal(err)
		}
	}
}

func corev1Namespace(name string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
