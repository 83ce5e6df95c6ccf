package ipam_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/testenv"
	"github.com/tabbynet/tabby/ipam"
)

// One control plane serves every test of the package (each start costs seconds).
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	code := m.Run()
	if env != nil {
		env.Stop()
	}
	os.Exit(code)
}

func sharedEnv(tb testing.TB) *testenv.Env {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a real API server (skipped with -short)")
	}
	envOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		start := time.Now()
		env, envErr = testenv.StartProcess(ctx, testenv.Options{})
		if envErr == nil {
			fmt.Fprintf(os.Stderr, "control plane up in %v\n", time.Since(start).Round(time.Millisecond))
		}
	})
	if envErr != nil {
		tb.Fatalf("control plane: %v", envErr)
	}
	return env
}

// scenario makes a pool selecting only the test's nodes, and the nodes.
func scenario(tb testing.TB, e *testenv.Env, name, cidr string, blockSize int, nodes ...string) {
	tb.Helper()
	ctx := context.Background()
	p := &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.IPPoolSpec{CIDR: cidr, BlockSize: blockSize, NodeSelector: fmt.Sprintf("tabby-test == '%s'", name)}}
	if _, err := e.Client.IPPools().Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create pool: %v", err)
	}
	for _, n := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"tabby-test": name}}}
		if _, err := e.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatalf("create node: %v", err)
		}
	}
}

func kubeStore(tb testing.TB, e *testenv.Env) *ipam.KubeStore {
	return ipam.NewKubeStore(e.Client)
}

// blocksIn lists the blocks inside cidr.
func blocksIn(tb testing.TB, e *testenv.Env, cidr string) []v1.IPAMBlock {
	tb.Helper()
	l, err := e.Client.IPAMBlocks().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	var out []v1.IPAMBlock
	pool := mustPrefix(cidr)
	for _, b := range l.Items {
		if pool.Contains(mustPrefix(b.Spec.CIDR).Addr()) {
			out = append(out, b)
		}
	}
	return out
}
