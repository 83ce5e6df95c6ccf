// Command cni benchmarks the tabby CNI plugin against the reference ptp + host-local
// (containernetworking/plugins v1.9.1) in one run on this machine: ADD and DEL latency over 100
// sequential pods (p50, p99), and the wall time of 100 pods added 10 at a time. tabby runs both
// ways it can reach IPAM: through tabby-node's service (a real ipam/rpc server in this process,
// the code tabby-node runs, over a real API server) and directly against the API server.
//
// Everything happens inside network namespaces this program makes (a "node" in which libcni runs
// the plugins as a runtime would, and one per pod); it needs root. Run: go run -C hack ./bench/cni
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
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
	"github.com/tabbynet/tabby/ipam/podcache"
	"github.com/tabbynet/tabby/ipam/rpc"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

func main() {
	pods := flag.Int("pods", 100, "pods per measurement")
	parallel := flag.Int("parallel", 10, "concurrent ADDs in the wall-time measurement")
	cpuprofile := flag.String("cpuprofile", "", "write the bench process's CPU profile (the ipam/rpc server) here")
	verbose := flag.Bool("v", false, "log every IPAM call of the ipam/rpc server (with its duration)")
	pluginLog := flag.String("plugin-log", "warn", "tabby's logLevel (info: one line per ADD with its steps' durations)")
	flag.Parse()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	if err := run(*pods, *parallel, *cpuprofile, *pluginLog); err != nil {
		fmt.Fprintln(os.Stderr, "bench cni:", err)
		os.Exit(1)
	}
}

type variant struct {
	name string
	list *libcni.NetworkConfigList
	ref  int // the variant its ratios are against (itself for a reference)
	ips  int // addresses every ADD must return: 2 for dual stack
}

type figures struct {
	addP50, addP99, delP50, delP99 time.Duration
	wall, wallDel                  time.Duration
}

func run(pods, parallel int, cpuprofile, pluginLog string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (network namespaces)")
	}
	// Ctrl-C (or a closed pipe, as with `| head`) must still remove the 100+ namespaces: a signal
	// ends the context, the next CNI call fails, and run's deferred clean-ups run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	signal.Ignore(syscall.SIGPIPE)
	tmp, err := os.MkdirTemp("", "tabby-bench-cni-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	tabbyDir, err := cnitest.TabbyBinaries(filepath.Join(tmp, "bin"))
	if err != nil {
		return err
	}
	refDir, err := cnitest.ReferencePlugins("ptp", "host-local")
	if err != nil {
		return err
	}
	env, err := testenv.StartProcess(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()

	const nodeName = "bench-node"
	if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, p := range []v1.IPPoolSpec{
		{CIDR: "10.244.0.0/18", BlockSize: 26, IPIPMode: v1.IPIPModeNever},
		// The dual-stack rows' IPv6 pool; the IPv4 rows skip it with assign_ipv6 "false".
		{CIDR: "fd00:10:244::/56", BlockSize: 122},
	} {
		name := "bench-pool"
		if strings.Contains(p.CIDR, ":") {
			name = "bench-pool6"
		}
		if _, err := env.Client.IPPools().Create(ctx, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: p}); err != nil {
			return err
		}
	}

	node, err := cnitest.NewHostNS([]string{tabbyDir, refDir}, filepath.Join(tmp, "cache"))
	if err != nil {
		return err
	}
	defer node.Close()
	target, err := cnitest.HostPort(env.URL)
	if err != nil {
		return err
	}
	proxy, err := node.Proxy(target)
	if err != nil {
		return err
	}
	defer proxy.Close()
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := cnitest.RewriteKubeconfig(env.Kubeconfig, kubeconfig, "https://"+proxy.Addr); err != nil {
		return err
	}

	// tabby-node's IPAM service, as tabby-node runs it.
	socket := filepath.Join(tmp, "ipam.sock")
	l, err := rpc.Listen(socket)
	if err != nil {
		return err
	}
	// The pods exist before their sandboxes' ADDs, as in a cluster (the kubelet calls CNI for a
	// pod the scheduler bound), and tabby-node's cache of its node's pods has heard of them.
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName(i), Namespace: "bench"},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		if _, err := env.Kube.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
	}
	podCtx, stopPods := context.WithCancel(ctx)
	defer stopPods()
	podCache := podcache.New(env.Client, nodeName)
	go podCache.Run(podCtx)
	for !podCache.HasSynced() {
		time.Sleep(10 * time.Millisecond)
	}
	store := newTimedStore(ipam.NewKubeStore(env.Client).ListsFromCache()) // as tabby-node
	alloc := ipam.New(store, ipam.Config{PodAnnotations: podCache.Annotations})
	srv := rpc.NewServer(alloc)
	go srv.Serve(l)
	defer srv.Stop()

	mk := func(name string, plugin map[string]any) (*libcni.NetworkConfigList, error) {
		b, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": name, "plugins": []any{plugin}})
		return libcni.NetworkConfFromBytes(b)
	}
	ref, err := mk("refnet", map[string]any{"type": "ptp", "ipam": map[string]any{
		"type": "host-local", "dataDir": filepath.Join(tmp, "host-local"),
		"ranges": [][]map[string]string{{{"subnet": "10.244.128.0/20"}}},
	}})
	if err != nil {
		return err
	}
	// Dual stack as the reference plugins do it: host-local with one range per family.
	refDual, err := mk("refnet-dual", map[string]any{"type": "ptp", "ipam": map[string]any{
		"type": "host-local", "dataDir": filepath.Join(tmp, "host-local-dual"),
		"ranges": [][]map[string]string{{{"subnet": "10.244.144.0/20"}}, {{"subnet": "fd00:10:245::/64"}}},
	}})
	if err != nil {
		return err
	}
	tabbyConf := func(socket, assign6 string) map[string]any {
		return map[string]any{"type": "tabby", "nodename": nodeName, "kubeconfig": kubeconfig, "ipamSocket": socket,
			"logLevel": pluginLog, "ipam": map[string]any{"type": "tabby-ipam", "assign_ipv6": assign6}}
	}
	viaSocket, err := mk("k8s-pod-network", tabbyConf(socket, "false"))
	if err != nil {
		return err
	}
	direct, err := mk("k8s-pod-network-direct", tabbyConf("none", "false"))
	if err != nil {
		return err
	}
	viaSocketDual, err := mk("k8s-pod-network-dual", tabbyConf(socket, "true"))
	if err != nil {
		return err
	}
	variants := []variant{
		{name: "ptp + host-local", list: ref, ref: 0, ips: 1},
		{name: "tabby via tabby-node", list: viaSocket, ref: 0, ips: 1},
		{name: "tabby direct (no tabby-node)", list: direct, ref: 0, ips: 1},
		{name: "dual stack: ptp + host-local", list: refDual, ref: 3, ips: 2},
		{name: "dual stack: tabby via tabby-node", list: viaSocketDual, ref: 3, ips: 2},
	}

	podNS := make([]ns.NetNS, pods)
	for i := range podNS {
		if podNS[i], err = cnitest.NewPod(); err != nil {
			return err
		}
		defer cnitest.RemovePod(podNS[i])
	}

	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	results := make([]figures, len(variants))
	var storeCalls string
	for round := range 2 { // round 0 warms up (a block claimed, binaries in the page cache)
		for i, v := range variants {
			n := pods
			if round == 0 {
				n = 5
			}
			store.reset()
			f, err := measure(ctx, node, v, podNS[:n], parallel)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			if round == 1 {
				results[i] = f
				if v.list == viaSocket {
					storeCalls = store.summary(2 * n)
				}
			}
		}
	}
	report(variants, results, pods, parallel)
	fmt.Printf("API calls of the IPAM service per pod (ADD+DEL, sequential and concurrent runs):\n%s", storeCalls)

	// Where the concurrent wall time goes: the IPAM service alone, same load, no CNI.
	c, err := api.Dial(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	assignWall, err := concurrently(pods, parallel, func(i int) error {
		_, err := c.Assign(ctx, &api.AssignRequest{Handle: fmt.Sprintf("ipam-only.%03d", i), Node: nodeName})
		return err
	})
	if err != nil {
		return err
	}
	releaseWall, err := concurrently(pods, parallel, func(i int) error {
		_, err := c.Release(ctx, &api.ReleaseRequest{Handle: fmt.Sprintf("ipam-only.%03d", i)})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("IPAM service alone (tabby-node's ipam/rpc, no CNI), %d pods %d at a time: Assign wall %s, Release wall %s\n",
		pods, parallel, ms(assignWall), ms(releaseWall))
	return nil
}

func rtFor(v variant, i int, p ns.NetNS) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: fmt.Sprintf("bench-%s-%03d", v.list.Name, i), NetNS: p.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "bench"}, {"K8S_POD_NAME", podName(i)}},
	}
}

func podName(i int) string { return fmt.Sprintf("pod-%03d", i) }

func measure(ctx context.Context, node *cnitest.HostNS, v variant, pods []ns.NetNS, parallel int) (figures, error) {
	var f figures
	adds := make([]time.Duration, len(pods))
	dels := make([]time.Duration, len(pods))
	for i, p := range pods {
		rt := rtFor(v, i, p)
		start := time.Now()
		res, err := node.Add(ctx, v.list, rt)
		if err != nil {
			return f, fmt.Errorf("ADD %d: %w", i, err)
		}
		adds[i] = time.Since(start)
		// A row must measure what it says: a dual-stack ADD that returned one address would
		// make the figure meaningless.
		r, err := current.NewResultFromResult(res.(types.Result))
		if err != nil {
			return f, fmt.Errorf("ADD %d: result: %w", i, err)
		}
		if len(r.IPs) != v.ips {
			return f, fmt.Errorf("ADD %d: %d addresses %v, want %d", i, len(r.IPs), r.IPs, v.ips)
		}
	}
	for i, p := range pods {
		rt := rtFor(v, i, p)
		start := time.Now()
		if err := node.Del(ctx, v.list, rt); err != nil {
			return f, fmt.Errorf("DEL %d: %w", i, err)
		}
		dels[i] = time.Since(start)
	}
	f.addP50, f.addP99 = percentiles(adds)
	f.delP50, f.delP99 = percentiles(dels)

	var err error
	if f.wall, err = concurrently(len(pods), parallel, func(i int) error {
		_, err := node.Add(ctx, v.list, rtFor(v, i, pods[i]))
		return err
	}); err != nil {
		return f, fmt.Errorf("concurrent ADD: %w", err)
	}
	if f.wallDel, err = concurrently(len(pods), parallel, func(i int) error {
		return node.Del(ctx, v.list, rtFor(v, i, pods[i]))
	}); err != nil {
		return f, fmt.Errorf("concurrent DEL: %w", err)
	}
	return f, nil
}

func concurrently(n, parallel int, f func(i int) error) (time.Duration, error) {
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return time.Since(start), first
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.50), at(0.99)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func report(vs []variant, rs []figures, pods, parallel int) {
	fmt.Printf("CNI ADD/DEL, %d pods sequentially; %d pods %d at a time (wall). Reference: containernetworking/plugins %s.\n",
		pods, pods, parallel, cnitest.ReferenceVersion)
	fmt.Printf("%-30s %12s %12s %12s %12s %14s %14s\n", "", "ADD p50", "ADD p99", "DEL p50", "DEL p99", "ADD wall", "DEL wall")
	for i, v := range vs {
		r := rs[i]
		fmt.Printf("%-30s %12s %12s %12s %12s %14s %14s\n", v.name, ms(r.addP50), ms(r.addP99), ms(r.delP50), ms(r.delP99), ms(r.wall), ms(r.wallDel))
		if ref := rs[v.ref]; v.ref != i {
			ratio := func(a, b time.Duration) string { return fmt.Sprintf("%.2fx", float64(a)/float64(b)) }
			fmt.Printf("%-30s %12s %12s %12s %12s %14s %14s\n", "  ratio to reference", ratio(r.addP50, ref.addP50), ratio(r.addP99, ref.addP99),
				ratio(r.delP50, ref.delP50), ratio(r.delP99, ref.delP99), ratio(r.wall, ref.wall), ratio(r.wallDel, ref.wallDel))
		}
	}
	fmt.Println("targets (tabby via tabby-node, each family setup against its reference): ADD p50 and DEL p50 ≤ 1.5x, ADD wall ≤ 2x")
}
