package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/qemu"
	"github.com/tabbynet/tabby/internal/testenv"
)

// The build machine's kernel has no ipip driver, so the cross-subnet IPIP scenario runs in a
// qemu guest with Debian's kernel: the host runs the API server (forwarded into the guest) and
// this very test binary runs the scenario in the guest, driving a lab there.
const (
	guestScenarioEnv = "TABBY_E2E_GUEST_SCENARIO"
	guestAPIPort     = 6443
)

// TestCrossSubnetIPIP: nodes on two subnets joined by a router that knows no pod routes, pool
// ipipMode CrossSubnet: same-subnet pods talk directly, cross-subnet pods through tunl0 (the
// router sees IP protocol 4); ipipMode Never across subnets fails; Always tunnels everything.
// One guest boot runs the whole scenario.
func TestCrossSubnetIPIP(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end in qemu (skipped under -short)")
	}
	ctx := testCtx(t, 10*time.Minute)
	env := testenv.Start(t)
	pool := &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: lab.DefaultPoolName}, Spec: v1.IPPoolSpec{
		CIDR: lab.PodCIDR.String(), BlockSize: v1.DefaultBlockSizeIPv4, IPIPMode: v1.IPIPModeCrossSubnet,
	}}
	if _, err := env.Client.IPPools().Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	share := t.TempDir()
	binDir := os.Getenv("TABBY_BIN")
	if binDir == "" {
		repo, err := lab.FindRepo()
		if err != nil {
			t.Fatal(err)
		}
		binDir = filepath.Join(repo, "bin")
	}
	for _, b := range []string{"tabby", "tabby-ipam", "tabby-node", "tabbyctl"} {
		if err := copyFile(filepath.Join(binDir, b), filepath.Join(share, "bin", b)); err != nil {
			t.Fatalf("guest binaries (make build): %v", err)
		}
	}
	ref, err := lab.ReferencePlugins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(ref)
	for _, e := range ents {
		if err := copyFile(filepath.Join(ref, e.Name()), filepath.Join(share, "cache", filepath.Base(ref), e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := copyFile(self, filepath.Join(share, "e2e.test")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "guest.sh")
	if err := os.WriteFile(script, []byte(guestScript), 0o755); err != nil {
		t.Fatal(err)
	}
	hostAddr := strings.TrimPrefix(env.URL, "https://")
	// A healthy guest runs the scenario in about a minute. Under TCG on a loaded 2-core host the
	// guest kernel has been seen stuck in soft lockups for minutes (once in many runs): such a
	// guest, one that never finished, gets one more boot; a scenario that fails is not retried.
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		start := time.Now()
		res, err := qemu.Run(actx, qemu.Options{
			Script: script, ShareDir: share, MemoryMB: 1536, CPUs: 2,
			Forwards: []qemu.Forward{{GuestPort: guestAPIPort, HostAddr: hostAddr}},
			Env: map[string]string{
				guestScenarioEnv:  "ipip",
				"TABBY_API_URL":   fmt.Sprintf("https://%s:%d", qemu.GuestForwardIP, guestAPIPort),
				"TABBY_API_TOKEN": env.Config.BearerToken,
			},
		})
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		t.Logf("guest ran %s (boot to power-off %s); output:\n%s", time.Since(start).Round(time.Millisecond), res.Boot.Round(time.Millisecond), res.Output)
		if err == nil {
			return
		}
		if timedOut && attempt == 1 && strings.Contains(res.Console, "soft lockup") {
			t.Logf("guest kernel stuck (soft lockup) and killed after %s: booting it again; console tail:\n%s",
				time.Since(start).Round(time.Second), tailString(res.Console, 1500))
			// The killed guest never tore its lab down: what it wrote to the API server would
			// make the next boot fail at once ("nodes a-1 already exists").
			if err := resetGuestObjects(ctx, env, pool); err != nil {
				t.Fatalf("clean up after the stuck guest: %v", err)
			}
			continue
		}
		t.Fatalf("guest scenario: %v\nconsole tail:\n%s", err, tailString(res.Console, 3000))
	}
}

var nsObj = corev1Namespace(lab.Namespace)

// resetGuestObjects removes what a guest's lab wrote to the test's own API server (its nodes and
// their IPAM) and puts the pool back as the test made it.
func resetGuestObjects(ctx context.Context, env *testenv.Env, pool *v1.IPPool) error {
	if err := env.Kube.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete nodes: %w", err)
	}
	pods, err := env.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	zero := int64(0)
	for _, p := range pods.Items {
		if err := env.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	blocks, err := env.Client.IPAMBlocks().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, b := range blocks.Items {
		if err := env.Client.IPAMBlocks().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete IPAMBlock %s: %w", b.Name, err)
		}
	}
	affs, err := env.Client.BlockAffinities().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, a := range affs.Items {
		if err := env.Client.BlockAffinities().Delete(ctx, a.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete BlockAffinity %s: %w", a.Name, err)
		}
	}
	handles, err := env.Client.IPAMHandles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, h := range handles.Items {
		if err := env.Client.IPAMHandles().Delete(ctx, h.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete IPAMHandle %s: %w", h.Name, err)
		}
	}
	cur, err := env.Client.IPPools().Get(ctx, pool.Name)
	if err != nil {
		return err
	}
	cur.Spec = pool.Spec
	_, err = env.Client.IPPools().Update(ctx, cur)
	return err
}

// guestScript runs the scenario in the guest. A node's kernel loads the netlink families
// (xfrm, netfilter) netlink handles open on demand; the guest's minimal init may not, so load
// them first.
const guestScript = `set -e
for m in xfrm_user nfnetlink ip_tunnel ipip; do modprobe "$m" 2>/dev/null || echo "note: modprobe $m failed"; done
export TABBY_CACHE=/mnt/cache TABBY_BIN=/mnt/bin
exec /mnt/e2e.test -test.v
`

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm()|0o500)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// runGuestScenario runs in the guest (TestMain dispatches here) and returns the exit status.
func runGuestScenario(name string) int {
	if name != "ipip" {
		fmt.Fprintf(os.Stderr, "unknown guest scenario %q\n", name)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	l, err := lab.New(ctx, lab.Options{
		TwoSubnets: true, TabbyBin: os.Getenv("TABBY_BIN"), RepoDir: "/mnt",
		External: &lab.External{URL: os.Getenv("TABBY_API_URL"), Token: os.Getenv("TABBY_API_TOKEN")},
		// Under TCG on a busy host three agents starting at once have taken 40 s to reach
		// their first log line: the 60 s default was missed with nothing wrong.
		ReadyTimeout: 3 * time.Minute,
	})
	if err != nil {
		fmt.Println("FAIL: start lab in the guest:", err)
		return 1
	}
	err = guestIPIP(ctx, l)
	if err != nil {
		fmt.Println("FAIL:", err)
		fmt.Println(l.Diagnostics(context.Background()))
	}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	if cerr := l.Close(cctx); cerr != nil {
		fmt.Println("FAIL: teardown:", cerr)
		return 1
	}
	if err != nil {
		return 1
	}
	fmt.Println("PASS: cross-subnet IPIP scenario")
	return 0
}

func step(format string, args ...any) {
	fmt.Printf("--- %s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func guestIPIP(ctx context.Context, l *lab.Lab) error {
	nodes, err := l.AddNodes(ctx,
		lab.NodeSpec{Name: "a-1", Subnet: lab.A}, lab.NodeSpec{Name: "a-2", Subnet: lab.A},
		lab.NodeSpec{Name: "b-1", Subnet: lab.B})
	if err != nil {
		return err
	}
	a1, a2, b1 := nodes[0], nodes[1], nodes[2]
	step("nodes ready")
	pods, err := l.AddPods(ctx,
		lab.PodSpec{Name: "pa1", Node: "a-1"}, lab.PodSpec{Name: "pa2", Node: "a-2"}, lab.PodSpec{Name: "pb1", Node: "b-1"})
	if err != nil {
		return err
	}
	pa1, pa2, pb1 := pods[0], pods[1], pods[2]
	step("pods %s %s %s", pa1.IP, pa2.IP, pb1.IP)
	routeOf := func(ctx context.Context, n, to *lab.Node) (lab.Route, error) {
		blocks, err := l.Blocks(ctx)
		if err != nil {
			return lab.Route{}, err
		}
		rs, err := n.TabbyRoutes(ctx)
		if err != nil {
			return lab.Route{}, err
		}
		for _, r := range rs {
			for _, b := range blocks[to.Name] {
				if r.Dst == b.String() {
					return r, nil
				}
			}
		}
		return lab.Route{}, fmt.Errorf("%s has no route to the blocks of %s (%v)", n.Name, to.Name, lab.RouteStrings(rs))
	}
	wantRoute := func(n, to *lab.Node, dev string) error {
		return lab.Eventually(ctx, 60*time.Second, func(ctx context.Context) error {
			r, err := routeOf(ctx, n, to)
			if err != nil {
				return err
			}
			if r.Dev != dev || r.Gateway != to.IP().String() {
				return fmt.Errorf("%s routes %s's block as %q, want via %s dev %s", n.Name, to.Name, r, to.IP(), dev)
			}
			return nil
		})
	}
	reach := func(what string, from, to *lab.Pod) error {
		m := lab.PingMatrix(ctxTimeout(ctx, 60*time.Second), []lab.Endpoint{from.Endpoint()}, []lab.Endpoint{to.Endpoint()})
		if f := m.Failures(); len(f) > 0 {
			return fmt.Errorf("%s: %v", what, f)
		}
		return nil
	}
	// captureIPIP counts IP-in-IP packets on a router or switch interface while from pings to
	// (tcpdump prints one line per captured packet on stdout; it shows the inner packet).
	captureIPIP := func(netns, dev string, from, to *lab.Pod) (int, error) {
		cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, "ip", "netns", "exec", netns, "tcpdump", "-n", "-l", "-i", dev, "-c", "3", "ip proto 4")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		// tcpdump reports "listening on" once its capture is attached.
		_ = lab.Eventually(ctx, 5*time.Second, func(context.Context) error {
			if !strings.Contains(stderr.String(), "listening on") {
				return fmt.Errorf("tcpdump not attached")
			}
			return nil
		})
		for range 5 {
			_ = lab.Ping(ctx, from.NS, to.IP)
		}
		_ = cmd.Wait()
		n := 0
		for _, line := range strings.Split(stdout.String(), "\n") {
			if strings.TrimSpace(line) != "" {
				n++
			}
		}
		step("capture on %s %s while %s pings %s: %d IPIP packets", netns, dev, from.Name, to.Name, n)
		return n, nil
	}
	setMode := func(mode v1.IPIPMode) error {
		return lab.Eventually(ctx, 10*time.Second, func(ctx context.Context) error {
			p, err := l.Client.IPPools().Get(ctx, lab.DefaultPoolName)
			if err != nil {
				return err
			}
			p.Spec.IPIPMode = mode
			_, err = l.Client.IPPools().Update(ctx, p)
			return err
		})
	}
	rt := l.Router().NS

	step("CrossSubnet: same subnet direct, across subnets through tunl0")
	if err := wantRoute(a1, a2, "eth0"); err != nil {
		return err
	}
	if err := wantRoute(a1, b1, "tunl0"); err != nil {
		return err
	}
	if err := reach("CrossSubnet same subnet", pa1, pa2); err != nil {
		return err
	}
	if err := reach("CrossSubnet across subnets", pa1, pb1); err != nil {
		return err
	}
	if err := reach("CrossSubnet across subnets back", pb1, pa2); err != nil {
		return err
	}
	if c, err := captureIPIP(rt, "eth-a", pa1, pb1); err != nil || c == 0 {
		return fmt.Errorf("CrossSubnet: the router saw %d IPIP packets from a-1 to b-1 (err %v)", c, err)
	}
	if c, _ := captureIPIP(l.NetnsName("sw"), a2.Port, pa1, pa2); c != 0 {
		return fmt.Errorf("CrossSubnet: a-2's switch port saw %d IPIP packets between same-subnet pods", c)
	}

	step("Never: across subnets fails (the router knows no pod routes)")
	if err := setMode(v1.IPIPModeNever); err != nil {
		return err
	}
	if err := lab.Eventually(ctx, 60*time.Second, func(ctx context.Context) error {
		r, err := routeOf(ctx, a1, b1)
		if err == nil && r.Dev == "tunl0" {
			return fmt.Errorf("a-1 still routes b-1 via tunl0: %s", r)
		}
		if lab.Ping(ctx, pa1.NS, pb1.IP) == nil {
			return fmt.Errorf("pa1 still reaches pb1 with ipipMode Never")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := reach("Never same subnet", pa1, pa2); err != nil {
		return err
	}

	step("Always: everything through tunl0")
	if err := setMode(v1.IPIPModeAlways); err != nil {
		return err
	}
	if err := wantRoute(a1, a2, "tunl0"); err != nil {
		return err
	}
	if err := wantRoute(a1, b1, "tunl0"); err != nil {
		return err
	}
	if err := reach("Always across subnets", pa1, pb1); err != nil {
		return err
	}
	if err := reach("Always same subnet", pa1, pa2); err != nil {
		return err
	}
	if c, err := captureIPIP(rt, "eth-a", pa1, pb1); err != nil || c == 0 {
		return fmt.Errorf("Always: the router saw %d IPIP packets from a-1 to b-1 (err %v)", c, err)
	}
	if c, err := captureIPIP(l.NetnsName("sw"), a2.Port, pa1, pa2); err != nil || c == 0 {
		return fmt.Errorf("Always: a-2's switch port saw %d IPIP packets between same-subnet pods (err %v)", c, err)
	}
	step("all phases passed")
	return nil
}

func ctxTimeout(ctx context.Context, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(ctx, d)
	go func() { <-c.Done(); cancel() }()
	return c
}
