package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/internal/testenv"
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

// family runs a scenario written for IPv4 in either family. Its IPv6 run maps the test's IPv4
// pool into fd00:10:244::/48 (the IPv4 address as the last 32 bits, the prefix 96 bits longer:
// the same number of blocks and addresses) and suffixes the object names, since both runs share
// one API server.
type family struct{ ipfamily.Family }

var families = []family{{ipfamily.IPv4}, {ipfamily.IPv6}}

func forFamilies(t *testing.T, test func(*testing.T, family)) {
	for _, f := range families {
		t.Run(f.String(), func(t *testing.T) { test(t, f) })
	}
}

// cidr is the test's IPv4 prefix in this family.
func (f family) cidr(v4 string) string {
	p := netip.MustParsePrefix(v4)
	if f.Family == ipfamily.IPv4 {
		return p.String()
	}
	a := [16]byte{0xfd, 0x00, 0x00, 0x10, 0x02, 0x44}
	b := p.Addr().As4()
	copy(a[12:], b[:])
	return netip.PrefixFrom(netip.AddrFrom16(a), p.Bits()+96).String()
}

// blockSize is the test's IPv4 block size in this family.
func (f family) blockSize(v4 int) int {
	if f.Family == ipfamily.IPv6 {
		return v4 + 96
	}
	return v4
}

// name is an object name of the test's, distinct per family.
func (f family) name(s string) string { return s + f.NameSuffix() }

// req is a request of this family.
func (f family) req(r ipam.Request) ipam.Request {
	r.Family = f.Family
	return r
}
