package ipam_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/gc"
)

const (
	crashChildEnv = "TABBY_IPAM_CRASH_CHILD"  // kubeconfig path
	crashRunEnv   = "TABBY_IPAM_CRASH_RUN"    // run number, to name handles
	crashFamEnv   = "TABBY_IPAM_CRASH_FAMILY" // 4 or 6
	crashNode     = "crash-node"
)

// crashFamily is the family a crash child allocates in.
func crashFamily() family {
	if os.Getenv(crashFamEnv) == "6" {
		return family{ipfamily.IPv6}
	}
	return family{ipfamily.IPv4}
}

// crashChild assigns in a loop with several workers, printing "OK <handle> <ip>" after each
// success, until the parent kills it.
func crashChild() int {
	cfg, err := client.LoadConfig(os.Getenv(crashChildEnv), "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := client.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a := ipam.New(ipam.NewKubeStore(c), ipam.Config{})
	run := os.Getenv(crashRunEnv)
	f := crashFamily()
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := 0
	for range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				pod := fmt.Sprintf("%s-%s-%d", f.name("crash"), run, i)
				as, err := a.Assign(context.Background(), f.req(ipam.Request{Handle: "net." + pod, Node: f.name(crashNode), Namespace: "default", Pod: pod}))
				mu.Lock()
				if err != nil {
					fmt.Printf("ERR %s %v\n", pod, err)
				} else {
					fmt.Printf("OK net.%s %s\n", pod, as.IP)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

func TestRealCrashSafety(t *testing.T) { forFamilies(t, testRealCrashSafety) }

func testRealCrashSafety(t *testing.T, f family) {
	e := sharedEnv(t)
	ctx := context.Background()
	pool := f.cidr("10.244.32.0/24")
	crashNode := f.name(crashNode)
	scenario(t, e, f.name("crash"), pool, f.blockSize(29), crashNode)
	reported := map[string]netip.Addr{} // handle -> IP, from every child's OK lines
	byIP := map[netip.Addr]string{}
	const runs = 8
	start := time.Now()
	for run := range runs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+e.Kubeconfig, fmt.Sprintf("%s=%d", crashRunEnv, run), fmt.Sprintf("%s=%d", crashFamEnv, f.Family))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 3 + rand.IntN(12)
		sc := bufio.NewScanner(out)
		oks := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "OK" {
				ip := netip.MustParseAddr(f[2])
				if prev, dup := byIP[ip]; dup {
					t.Fatalf("duplicate address %v: %s and %s", ip, prev, f[1])
				}
				byIP[ip], reported[f[1]] = f[1], ip
				oks++
				if oks == killAfter {
					// Mid-allocation: the other workers are between writes right now.
					time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
					_ = cmd.Process.Signal(syscall.SIGKILL)
				}
			} else if len(f) > 0 && f[0] == "ERR" {
				t.Errorf("child: %s", sc.Text())
			}
		}
		_ = cmd.Wait()
	}
	t.Logf("%d runs killed, %d assignments reported, in %v", runs, len(reported), time.Since(start).Round(time.Millisecond))

	store := kubeStore(t, e)
	before, err := ipam.Check(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.DuplicateIPs) != 0 {
		t.Fatalf("duplicates: %+v", before.DuplicateIPs)
	}
	// What the crashes left: every allocation or handle that no child reported.
	orphanAllocs, orphanHandles := map[netip.Addr]string{}, map[string]bool{}
	for _, b := range blocksIn(t, e, pool) {
		c := mustPrefix(b.Spec.CIDR)
		for k, al := range b.Spec.Allocations {
			var o int
			fmt.Sscan(k, &o)
			ip := ipam.AddrAt(c, o)
			if h, ok := byIP[ip]; ok {
				if al.Handle != h {
					t.Fatalf("%v reported for %s but held by %s", ip, h, al.Handle)
				}
				continue
			}
			orphanAllocs[ip] = al.Handle
		}
	}
	for _, h := range before.HandlesWithoutAllocation {
		orphanHandles[h] = true
	}
	t.Logf("left by the crashes: %d allocations of unreported assigns %v, %d handles without allocation %v",
		len(orphanAllocs), orphanAllocs, len(orphanHandles), orphanHandles)

	// The reported pods are live; the others were never created (their ADD never returned).
	for h := range reported {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.TrimPrefix(h, "net."), Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: crashNode, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		if _, err := e.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	alloc := ipam.New(store, ipam.Config{})
	col := gc.New(store, alloc, gc.Config{Node: crashNode, GracePeriod: 200 * time.Millisecond})
	released, deleted := map[netip.Addr]bool{}, map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := col.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ip := range res.ReleasedIPs {
			released[ip] = true
		}
		for _, h := range res.DeletedHandles {
			deleted[h] = true
		}
		rep, err := ipam.Check(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.WithoutPod) == 0 && len(rep.HandlesWithoutAllocation) == 0 && len(rep.WithoutHandle) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC did not converge: %+v", rep)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Exactly what was orphaned, and nothing of a live pod.
	for ip := range released {
		if _, ok := orphanAllocs[ip]; !ok {
			t.Fatalf("GC released %v, which was not orphaned (held by %s)", ip, byIP[ip])
		}
	}
	for ip := range orphanAllocs {
		if !released[ip] {
			t.Fatalf("orphaned %v not released", ip)
		}
	}
	for h := range deleted {
		if _, live := reported[h]; live {
			t.Fatalf("GC deleted the handle of live %s", h)
		}
	}
	for h, ip := range reported {
		got, err := alloc.Lookup(ctx, h)
		if err != nil || len(got) != 1 || got[0].IP != ip {
			t.Fatalf("live %s: %+v %v, want %v", h, got, err, ip)
		}
	}
	// A claim cut between the block and its affinity is repaired when the node's allocator loads.
	if _, err := ipam.New(store, ipam.Config{}).Assign(ctx, f.req(ipam.Request{Handle: "net." + f.name("crash-after"), Node: crashNode})); err != nil {
		t.Fatal(err)
	}
	affs, _ := e.Client.BlockAffinities().List(ctx, metav1.ListOptions{})
	have := map[string]bool{}
	for _, a := range affs.Items {
		have[a.Name] = true
	}
	for _, b := range blocksIn(t, e, pool) {
		if !have[names.AffinityName(crashNode, mustPrefix(b.Spec.CIDR))] {
			t.Fatalf("block %s has no affinity", b.Spec.CIDR)
		}
	}
	t.Logf("GC released %d addresses and deleted %d handles; %d live pods kept theirs", len(released), len(deleted), len(reported))
}
