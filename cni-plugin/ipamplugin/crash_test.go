package ipamplugin_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/gc"
)

// The requirement, literally: the real tabby-ipam binary, run as a runtime runs a CNI
// IPAM plugin against a real API server, SIGKILLed mid-allocation in a loop: no address is ever
// held twice, and the garbage collector gives back exactly what the dead pods' crashes left.

const (
	crashNetwork  = "crash-net"
	crashRounds   = 10
	crashPerRound = 8
	// gcGrace is short so the test is quick, but long enough that the "nothing before the grace
	// period" assertion means something.
	gcGrace = 500 * time.Millisecond
)

type killMode int

const (
	noKill killMode = iota
	// killTimer: SIGKILL at a random moment between 2 ms after exec and the 90th percentile of
	// the ADDs completed so far (exec, client set-up, lock wait and writes all get their share).
	// The direct path serialises a node's processes on /run/tabby/ipam-direct.lock, so most of
	// an ADD's life is the wait for that lock: these kills mostly land before any write.
	killTimer
	// killOnAlloc: SIGKILL a random 0–10 ms after its allocation appears in the block: after
	// its only write, before or while it prints its result.
	killOnAlloc
	// killFrozen: the moment is pinned with SIGSTOP as soon as the allocation appears, then
	// SIGKILL. A write already sent commits; the
	// reply is never read. Without the pin, a kill aimed after the block write often comes after
	// the process has printed its result and exited (it is faster than any watch).
	killFrozen
)

func (m killMode) String() string {
	return [...]string{"none", "timer", "on-alloc", "frozen"}[m]
}

// attempt is one container's ADD.
type attempt struct {
	round     int
	container string
	pod       string
	mode      killMode
	delay     time.Duration

	took      time.Duration
	completed bool       // exit 0 with a result
	killed    bool       // died of our SIGKILL
	ip        netip.Addr // completed only
	podKept   bool       // killed ones: does the pod survive?
}

func (a *attempt) handle() string { return crashNetwork + "." + a.container }

// triggers wakes the attempts waiting for their handle or allocation to appear.
type triggers struct {
	mu     sync.Mutex
	handle map[string]chan struct{}
	alloc  map[string]chan struct{}
	fired  map[string]bool // "h/"+handle or "a/"+handle
}

func (tr *triggers) wait(kind, handle string) <-chan struct{} {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m := tr.handle
	if kind == "a" {
		m = tr.alloc
	}
	ch := make(chan struct{})
	if tr.fired[kind+"/"+handle] {
		close(ch)
		return ch
	}
	m[handle] = ch
	return ch
}

func (tr *triggers) fire(kind, handle string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.fired[kind+"/"+handle] {
		return
	}
	tr.fired[kind+"/"+handle] = true
	m := tr.handle
	if kind == "a" {
		m = tr.alloc
	}
	if ch, ok := m[handle]; ok {
		close(ch)
		delete(m, handle)
	}
}

func watchIPAM(t *testing.T, env *testenv.Env) *triggers {
	t.Helper()
	ctx := context.Background()
	tr := &triggers{handle: map[string]chan struct{}{}, alloc: map[string]chan struct{}{}, fired: map[string]bool{}}
	hw, err := env.Client.IPAMHandles().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch IPAMHandles: %v", err)
	}
	bw, err := env.Client.IPAMBlocks().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		hw.Stop()
		t.Fatalf("watch IPAMBlocks: %v", err)
	}
	t.Cleanup(func() { hw.Stop(); bw.Stop() })
	go func() {
		for ev := range hw.ResultChan() {
			if h, ok := ev.Object.(*v1.IPAMHandle); ok && ev.Type == watch.Added {
				tr.fire("h", h.Spec.HandleID)
			}
		}
	}()
	go func() {
		for ev := range bw.ResultChan() {
			if b, ok := ev.Object.(*v1.IPAMBlock); ok && ev.Type != watch.Deleted {
				for _, al := range b.Spec.Allocations {
					tr.fire("a", al.Handle)
				}
			}
		}
	}()
	return tr
}

// ipamBinary is $TABBY_BIN/tabby-ipam (make test builds it), else a fresh build.
func ipamBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("TABBY_BIN"); b != "" {
		p := filepath.Join(b, "tabby-ipam")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "github.com/tabbynet/tabby/cmd/tabby-ipam")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build tabby-ipam: %v\n%s", err, out)
	}
	return filepath.Join(dir, "tabby-ipam")
}

// plugin runs the binary the way a main plugin (ptp, bridge) execs its IPAM plugin.
type plugin struct {
	bin          string
	conf         []byte
	namespace    string
	missingNetns string
}

func (p *plugin) command(verb string, a *attempt) *exec.Cmd {
	cmd := exec.Command(p.bin)
	cmd.Stdin = bytes.NewReader(p.conf)
	// A runtime's environment, nothing more: no KUBECONFIG, so the configured kubeconfig is
	// what the plugin uses. The netns does not exist: IPAM never enters it.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"CNI_COMMAND=" + verb,
		"CNI_CONTAINERID=" + a.container,
		"CNI_NETNS=" + p.missingNetns,
		"CNI_IFNAME=eth0",
		"CNI_PATH=" + filepath.Dir(p.bin),
		fmt.Sprintf("CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s", p.namespace, a.pod, a.container),
	}
	return cmd
}

// add runs ADD, killing it as a.mode says, and records the outcome.
func (p *plugin) add(t *testing.T, tr *triggers, a *attempt) {
	cmd := p.command("ADD", a)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Subscribe before exec: the allocation can appear within milliseconds.
	var allocSeen <-chan struct{}
	if a.mode == killOnAlloc || a.mode == killFrozen {
		allocSeen = tr.wait("a", a.handle())
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Errorf("start tabby-ipam ADD %s: %v", a.container, err)
		return
	}
	defer func() { a.took = time.Since(began) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var werr error
	switch a.mode {
	case noKill:
		werr = <-exited
	case killTimer:
		select {
		case werr = <-exited:
		case <-time.After(a.delay):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			werr = <-exited
		}
	case killOnAlloc, killFrozen:
		select {
		case werr = <-exited:
		case <-allocSeen:
			if a.mode == killFrozen {
				_ = cmd.Process.Signal(syscall.SIGSTOP)
				_ = cmd.Process.Signal(syscall.SIGKILL)
				werr = <-exited
				break
			}
			select {
			case werr = <-exited:
			case <-time.After(a.delay):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				werr = <-exited
			}
		}
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		a.killed = true
	case werr == nil:
		var res struct {
			IPs []struct {
				Address string `json:"address"`
			} `json:"ips"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res.IPs) != 1 {
			t.Errorf("ADD %s: result %q: want one address (%v)", a.container, stdout.String(), err)
			return
		}
		pfx, err := netip.ParsePrefix(res.IPs[0].Address)
		if err != nil || pfx.Bits() != 32 {
			t.Errorf("ADD %s: address %q is not a /32", a.container, res.IPs[0].Address)
			return
		}
		a.completed, a.ip = true, pfx.Addr()
	default:
		t.Errorf("ADD %s failed: %v\nstdout: %s\nstderr: %s", a.container, werr, stdout.String(), stderr.String())
	}
}

func (p *plugin) del(a *attempt) error {
	cmd := p.command("DEL", a)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("DEL %s: %v: %s", a.container, err, out)
	}
	return nil
}

// allocations lists every allocation of every block by address, failing on an address held
// twice (overlapping blocks: within a block the ordinal is the map key).
func allocations(t *testing.T, env *testenv.Env) map[netip.Addr]v1.Allocation {
	t.Helper()
	l, err := env.Client.IPAMBlocks().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list IPAMBlocks: %v", err)
	}
	out := map[netip.Addr]v1.Allocation{}
	for _, b := range l.Items {
		c, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			t.Fatalf("block %s: cidr %q: %v", b.Name, b.Spec.CIDR, err)
		}
		for k, al := range b.Spec.Allocations {
			o, err := strconv.Atoi(k)
			if err != nil || o < 0 || o >= 1<<(32-c.Bits()) {
				t.Fatalf("block %s: bad ordinal %q", b.Name, k)
			}
			ip := addrAt(c, o)
			if prev, dup := out[ip]; dup {
				t.Fatalf("DUPLICATE: %v allocated to %s and to %s", ip, prev.Handle, al.Handle)
			}
			out[ip] = al
		}
	}
	return out
}

func addrAt(c netip.Prefix, o int) netip.Addr {
	a := c.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) + uint32(o)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func handleIDs(t *testing.T, env *testenv.Env) map[string]bool {
	t.Helper()
	l, err := env.Client.IPAMHandles().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list IPAMHandles: %v", err)
	}
	out := map[string]bool{}
	for _, h := range l.Items {
		out[h.Spec.HandleID] = true
	}
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestSIGKILLMidAllocationLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tabby-ipam binary against a real API server: skipped with -short")
	}
	start := time.Now()
	bin := ipamBinary(t)
	env := testenv.Start(t)
	ctx := context.Background()
	suffix := randHex(3)
	node, namespace := "crash-node-"+suffix, "crash-"+suffix

	// A pool with small blocks, so the loop also claims blocks (and kills land in claims).
	if _, err := env.Client.IPPools().Create(ctx, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "crash-pool"},
		Spec: v1.IPPoolSpec{CIDR: "10.244.40.0/24", BlockSize: 28, IPIPMode: v1.IPIPModeNever}}); err != nil {
		t.Fatalf("create pool: %v", err)
	}
	if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	conf, err := json.Marshal(map[string]any{
		"cniVersion": "1.1.0", "name": crashNetwork, "type": "ptp",
		"nodename": node, "kubeconfig": env.Kubeconfig, "ipamSocket": "none", "timeoutSeconds": 20,
		"ipam": map[string]any{"type": "tabby-ipam"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &plugin{bin: bin, conf: conf, namespace: namespace, missingNetns: "/var/run/netns/tabby-crash-absent-" + suffix}
	tr := watchIPAM(t, env)
	pods := env.Kube.CoreV1().Pods(namespace)

	var all []*attempt
	usedIP := map[netip.Addr]string{}
	timerMax := 150 * time.Millisecond // then the p90 of the completed ADDs
	// fates[outcome][kept]: whether some killed attempt with that outcome (0 nothing written,
	// 1 allocation only, 2 allocation and handle) had its pod kept / deleted yet.
	var fates [3][2]bool
	var durs []time.Duration // of the completed ADDs
	for round := range crashRounds {
		batch := make([]*attempt, crashPerRound)
		for i := range batch {
			a := &attempt{round: round, container: fmt.Sprintf("%s%02d%02d%s", "c", round, i, randHex(6))}
			a.pod = "pod-" + a.container
			if mrand.IntN(5) < 3 {
				a.mode = killMode(1 + mrand.IntN(3))
				if a.mode == killTimer {
					a.delay = 2*time.Millisecond + mrand.N(timerMax-2*time.Millisecond)
				} else {
					a.delay = mrand.N(10 * time.Millisecond)
				}
			}
			// The runtime's pod exists before its sandbox's ADD.
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: a.pod, Namespace: namespace},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
			if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create pod %s: %v", a.pod, err)
			}
			batch[i] = a
		}
		var wg sync.WaitGroup
		for _, a := range batch {
			wg.Go(func() { p.add(t, tr, a) })
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		// The invariants after every round: no address twice (in the blocks, and in what the
		// ADDs returned), every returned address held by its handle.
		allocs := allocations(t, env)
		handles := handleIDs(t, env)
		held := map[string]bool{}
		for _, al := range allocs {
			held[al.Handle] = true
		}
		for _, a := range batch {
			if !a.completed {
				continue
			}
			if prev, dup := usedIP[a.ip]; dup {
				t.Fatalf("DUPLICATE: %v returned to %s and to %s", a.ip, prev, a.container)
			}
			usedIP[a.ip] = a.container
			if allocs[a.ip].Handle != a.handle() {
				t.Fatalf("round %d: ADD %s returned %v, but the block holds it for %q", round, a.container, a.ip, allocs[a.ip].Handle)
			}
		}
		// The kubelet's view afterwards: a completed ADD's pod runs with its address; a killed
		// one's pod either survives (the runtime will retry or DEL) or is deleted: at random,
		// except that the first kills of each outcome cover both fates.
		for _, a := range batch {
			switch {
			case a.completed:
				pod, err := pods.Get(ctx, a.pod, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("get pod %s: %v", a.pod, err)
				}
				pod.Status.Phase = corev1.PodRunning
				pod.Status.PodIP = a.ip.String()
				pod.Status.PodIPs = []corev1.PodIP{{IP: a.ip.String()}}
				if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("set pod %s status: %v", a.pod, err)
				}
			case a.killed:
				outcome := 0
				if held[a.handle()] {
					outcome = 1
					if handles[a.handle()] {
						outcome = 2
					}
				}
				switch f := &fates[outcome]; {
				case !f[0]:
					a.podKept = false
				case !f[1]:
					a.podKept = true
				default:
					a.podKept = mrand.IntN(2) == 0
				}
				if a.podKept {
					fates[outcome][1] = true
				} else {
					fates[outcome][0] = true
				}
				if !a.podKept {
					zero := int64(0)
					if err := pods.Delete(ctx, a.pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
						t.Fatalf("delete pod %s: %v", a.pod, err)
					}
				}
			}
		}
		for _, a := range batch {
			if a.completed {
				durs = append(durs, a.took)
			}
		}
		slices.Sort(durs)
		if len(durs) > 0 {
			timerMax = max(10*time.Millisecond, durs[len(durs)*9/10])
		}
		all = append(all, batch...)
	}

	if len(durs) > 0 {
		t.Logf("completed ADD durations: min %v p50 %v max %v; rounds took %v", durs[0], durs[len(durs)/2], durs[len(durs)-1], time.Since(start).Round(time.Millisecond))
	}
	// What the kills left, from the datastore. Every process is reaped by now; a request a
	// killed process had fully sent is committed within milliseconds, long before this list
	// (the last round's pod updates come first).
	allocs := allocations(t, env)
	handles := handleIDs(t, env)
	allocOf := map[string]netip.Addr{}
	for ip, al := range allocs {
		if _, dup := allocOf[al.Handle]; dup {
			t.Fatalf("handle %s holds two addresses", al.Handle)
		}
		allocOf[al.Handle] = ip
	}
	var completed, killed, untouched, allocOnly, dead int
	byMode := map[killMode][2]int{} // killed: nothing written, allocation written
	deadAllocs := map[netip.Addr]string{}
	var live []*attempt
	for _, a := range all {
		if a.completed {
			completed++
			live = append(live, a)
			continue
		}
		if !a.killed {
			continue
		}
		killed++
		_, hasAlloc := allocOf[a.handle()]
		hasHandle := handles[a.handle()]
		if hasHandle {
			t.Fatalf("killed %s left an IPAMHandle: an address of the node's own block needs none", a.container)
		}
		c := byMode[a.mode]
		switch {
		case hasAlloc:
			allocOnly++
			c[1]++
		default:
			untouched++
			c[0]++
		}
		byMode[a.mode] = c
		if a.podKept {
			live = append(live, a)
			continue
		}
		dead++
		if hasAlloc {
			deadAllocs[allocOf[a.handle()]] = a.handle()
		}
	}
	t.Logf("%d ADDs in %d rounds of %d: %d completed, %d SIGKILLed (%d before any write, %d after the block write but before the result); %d killed pods deleted",
		len(all), crashRounds, crashPerRound, completed, killed, untouched, allocOnly, dead)
	for _, m := range []killMode{killTimer, killOnAlloc, killFrozen} {
		c := byMode[m]
		t.Logf("  kill %-9s: %d nothing written, %d allocation written", m, c[0], c[1])
	}
	if allocOnly == 0 {
		t.Log("note: no kill landed after the allocation this run")
	}

	store := ipam.NewKubeStore(env.Client)
	rep, err := ipam.Check(ctx, store)
	if err != nil {
		t.Fatalf("ipam.Check: %v", err)
	}
	// Before the GC, only what the kills explain: allocations of deleted pods.
	for _, o := range rep.WithoutPod {
		if deadAllocs[o.IP] != o.Handle {
			t.Errorf("Check: %v (%s) reported without pod, but its pod lives", o.IP, o.Handle)
		}
	}
	if len(rep.WithoutPod) != len(deadAllocs) {
		t.Errorf("Check: %d allocations without pod, want %d", len(rep.WithoutPod), len(deadAllocs))
	}
	if other := rep.Problems() - len(rep.WithoutPod); other != 0 {
		t.Fatalf("Check before GC: %d unexpected problems: %+v", other, rep)
	}

	// The collector, as tabby-node runs it for its node, until nothing is pending.
	alloc := ipam.New(store, ipam.Config{})
	col := gc.New(store, alloc, gc.Config{Node: node, GracePeriod: gcGrace})
	released, deleted, restored := map[netip.Addr]bool{}, map[string]bool{}, map[string]bool{}
	gcStart := time.Now()
	deadline := gcStart.Add(20 * time.Second)
	runs := 0
	for {
		res, err := col.RunOnce(ctx)
		runs++
		if err != nil {
			t.Fatalf("GC run %d: %v", runs, err)
		}
		if n := len(res.ReleasedIPs) + len(res.DeletedHandles) + len(res.RestoredHandles); n > 0 && time.Since(gcStart) < gcGrace {
			t.Fatalf("GC collected %d leftovers %v after %v, before its grace period %v", n, res, time.Since(gcStart), gcGrace)
		}
		for _, h := range res.RestoredHandles {
			restored[h] = true
		}
		for _, ip := range res.ReleasedIPs {
			released[ip] = true
		}
		for _, h := range res.DeletedHandles {
			deleted[h] = true
		}
		if res.Pending == 0 {
			rep, err := ipam.Check(ctx, store)
			if err != nil {
				t.Fatalf("ipam.Check: %v", err)
			}
			if rep.Problems() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GC converged with problems left: %+v", rep)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC did not converge in 20 s: %d pending", res.Pending)
		}
		time.Sleep(100 * time.Millisecond) // the poll interval; the grace period is the condition
	}
	t.Logf("orphaned by the kills of deleted pods: %d allocations", len(deadAllocs))
	t.Logf("GC converged after %d runs in %v: released %d addresses of deleted pods, deleted %d handles, restored %d handles of live pods",
		runs, time.Since(gcStart).Round(time.Millisecond), len(released), len(deleted), len(restored))
	// Addresses of the node's own block need no handle object: none is written back.
	if len(restored) != 0 {
		t.Errorf("GC restored handles %v, want none", slices.Sorted(maps.Keys(restored)))
	}

	// Exactly the dead pods' addresses were released; the live ones kept theirs.
	for ip := range released {
		if _, ok := deadAllocs[ip]; !ok {
			t.Errorf("GC released %v, held by %s, whose pod lives", ip, allocs[ip].Handle)
		}
	}
	for ip, h := range deadAllocs {
		if !released[ip] {
			t.Errorf("GC did not release %v of deleted pod's %s", ip, h)
		}
	}
	after := allocations(t, env)
	afterHandles := handleIDs(t, env)
	for _, a := range all {
		ip, had := allocOf[a.handle()]
		isLive := a.completed || a.killed && a.podKept
		switch {
		case !isLive:
			if had && after[ip].Handle == a.handle() {
				t.Errorf("deleted pod %s still holds %v", a.pod, ip)
			}
			if afterHandles[a.handle()] {
				t.Errorf("deleted pod %s: handle %s still exists", a.pod, a.handle())
			}
		case had:
			if after[ip].Handle != a.handle() {
				t.Errorf("live pod %s lost %v (now %q)", a.pod, ip, after[ip].Handle)
			}
			if deleted[a.handle()] {
				t.Errorf("live pod %s: handle %s deleted by the GC", a.pod, a.handle())
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The runtime tears the live containers down (killed ones too: their ADD failed). DEL of a
	// handle the GC already removed must succeed.
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var delErrs []error
	for _, a := range live {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := p.del(a); err != nil {
				mu.Lock()
				delErrs = append(delErrs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range delErrs {
		t.Error(err)
	}
	final := allocations(t, env)
	finalHandles := handleIDs(t, env)
	if len(final) != 0 || len(finalHandles) != 0 {
		t.Fatalf("after DEL of every live container: %d allocations %v and %d handles %v remain",
			len(final), final, len(finalHandles), slices.Sorted(maps.Keys(finalHandles)))
	}
	t.Logf("DEL of %d live containers left 0 allocations and 0 handles; total %v", len(live), time.Since(start).Round(time.Millisecond))
}
