// Command bird benchmarks tabby's BGP agent (bird, embedded GoBGP) in one run, inside a private
// network namespace: update propagation in a 20-node full mesh and in a 2-route-reflector
// topology (18 clients), and one speaker's RSS and CPU at idle with 19 peers (a child process).
// Run as root: go run -C hack ./bench/bird
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

const (
	envNetns   = "TABBY_BENCH_BIRD_NETNS"
	envSpeaker = "TABBY_BENCH_BIRD_SPEAKER"
	nodes      = 20
	samples    = 50
)

var pool = netip.MustParsePrefix("10.244.0.0/16")

func main() {
	flag.Parse()
	var err error
	switch {
	case os.Getenv(envSpeaker) != "":
		err = runSpeaker(os.Getenv(envSpeaker))
	case os.Getenv(envNetns) == "":
		err = reexecInNetns()
	default:
		err = bench()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench bird:", err)
		os.Exit(1)
	}
}

// reexecInNetns runs the benchmark in a fresh network namespace that dies with it.
func reexecInNetns() error {
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Env = append(os.Environ(), envNetns+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	return cmd.Run()
}

func addr(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", i)) }

func mkNode(i int, rr bool) model.Node {
	n := model.Node{Name: fmt.Sprintf("node%d", i), BGPAddress: ipfamily.PairOf(netip.PrefixFrom(addr(i), 24), netip.Prefix{})}
	if rr {
		n.Labels = map[string]string{"tabby.dev/route-reflector": "true"}
		n.RRClusterID = "244.0.0.1"
	}
	return n
}

func block(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/26", i)) }

// extra is the k-th prefix injected at the source node.
func extra(k int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("10.244.%d.%d/32", 200+k/200, k%200))
}

func setupNetns() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	for i := 1; i <= nodes; i++ {
		a, _ := netlink.ParseAddr(netip.PrefixFrom(addr(i), 32).String())
		if err := netlink.AddrReplace(lo, a); err != nil {
			return err
		}
	}
	return nil
}

// seen records when each node saw each prefix.
type seen struct {
	mu   sync.Mutex
	at   map[netip.Prefix]map[string]time.Time
	wake chan struct{}
}

func (s *seen) mark(node string, p netip.Prefix, t time.Time) {
	s.mu.Lock()
	if s.at[p] == nil {
		s.at[p] = map[string]time.Time{}
	}
	if _, ok := s.at[p][node]; !ok {
		s.at[p][node] = t
	}
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

func (s *seen) waitAll(p netip.Prefix, n int, timeout time.Duration) (map[string]time.Time, error) {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		got := s.at[p]
		ch := s.wake
		if len(got) >= n {
			out := maps(got)
			s.mu.Unlock()
			return out, nil
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return nil, fmt.Errorf("%s seen by %d of %d nodes after %v", p, len(got), n, timeout)
		}
	}
}

func maps(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type topology struct {
	name    string
	rr      func(i int) bool
	conf    *v1.BGPConfiguration
	peers   []v1.BGPPeer
	source  int // where prefixes are injected
	inChild int // node run as a child process (RSS/CPU); 0 = none
}

type result struct {
	name     string
	converge time.Duration
	lat      []time.Duration // per prefix: until the last node saw it
	hop      []time.Duration // per prefix and node
	rss      int64
	cpu      float64
	child    int
}

func bench() error {
	if err := setupNetns(); err != nil {
		return fmt.Errorf("set up namespace: %w", err)
	}
	off := false
	topos := []topology{
		{name: "full mesh, 20 speakers", rr: func(int) bool { return false }, source: 1, inChild: nodes},
		{name: "2 RRs + 18 clients", rr: func(i int) bool { return i > nodes-2 }, source: 1,
			conf:  &v1.BGPConfiguration{Spec: v1.BGPConfigurationSpec{NodeToNodeMeshEnabled: &off}},
			peers: []v1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "rrs"}, Spec: v1.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "has(tabby.dev/route-reflector)"}}}},
	}
	var results, refs []result
	for _, tp := range topos {
		r, err := run(tp)
		if err != nil {
			return fmt.Errorf("%s: %w", tp.name, err)
		}
		results = append(results, r)
		ref, err := bird2Run(tp)
		if err != nil {
			return fmt.Errorf("%s: %w", tp.name, err)
		}
		refs = append(refs, ref)
	}
	fmt.Printf("bird (embedded GoBGP v4.8.0) vs BIRD2 2.0.12: %d speakers on one host (2 cores), %d prefixes injected one at a time at node1\n", nodes, samples)
	fmt.Println("all-seen = until the last of the 19 other nodes has the route (tabby: OnRoute; BIRD2: its kernel table); per-node = each node's arrival")
	fmt.Printf("%-24s %-6s %10s %13s %13s %13s %13s\n", "topology", "", "converge", "all-seen p50", "all-seen p99", "per-node p50", "per-node p99")
	for i, r := range results {
		ref := refs[i]
		fmt.Printf("%-24s %-6s %10v %13v %13v %13v %13v\n", r.name, "tabby", r.converge.Round(time.Millisecond), benchutil.Pct(r.lat, 50), benchutil.Pct(r.lat, 99), benchutil.Pct(r.hop, 50), benchutil.Pct(r.hop, 99))
		fmt.Printf("%-24s %-6s %10v %13v %13v %13v %13v\n", "", "BIRD2", ref.converge.Round(time.Millisecond), benchutil.Pct(ref.lat, 50), benchutil.Pct(ref.lat, 99), benchutil.Pct(ref.hop, 50), benchutil.Pct(ref.hop, 99))
		fmt.Printf("%-24s %-6s %10s %13s %13s %13s %13s\n", "", "ratio", div(r.converge, ref.converge), div(benchutil.Pct(r.lat, 50), benchutil.Pct(ref.lat, 50)), div(benchutil.Pct(r.lat, 99), benchutil.Pct(ref.lat, 99)), div(benchutil.Pct(r.hop, 50), benchutil.Pct(ref.hop, 50)), div(benchutil.Pct(r.hop, 99), benchutil.Pct(ref.hop, 99)))
	}
	fmt.Printf("target all-seen p99 < 250ms: mesh %s, RR %s\n", ratio(benchutil.Pct(results[0].lat, 99), 250*time.Millisecond), ratio(benchutil.Pct(results[1].lat, 99), 250*time.Millisecond))
	m := results[0]
	fmt.Printf("tabby speaker in a child process, 19 established peers, idle: RSS %.1f MB (target < 60 MB, %s), CPU %.2f%% of one core over 10 s (target < 1%%)\n",
		float64(m.rss)/1e6, ratio(time.Duration(m.rss), 60e6), m.cpu)
	fmt.Println("reference (GoBGP v3 alone, two namespaces, measured on this kind of machine): p50 0.3 ms, p99 < 3 ms per iBGP hop; 19 MB RSS with 19 idle peers")
	return nil
}

func div(a, b time.Duration) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

func ratio(got, target time.Duration) string {
	return fmt.Sprintf("%.2fx of target", float64(got)/float64(target))
}

func run(tp topology) (result, error) {
	res := result{name: tp.name}
	var all []model.Node
	for i := 1; i <= nodes; i++ {
		all = append(all, mkNode(i, tp.rr(i)))
	}
	sn := &seen{at: map[netip.Prefix]map[string]time.Time{}, wake: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var birds []*bird.Bird
	var wg sync.WaitGroup
	defer func() {
		for _, b := range birds {
			_ = b.Stop(false)
		}
		cancel()
		wg.Wait()
	}()
	start := time.Now()
	var child *exec.Cmd
	for i := 1; i <= nodes; i++ {
		n := all[i-1]
		if i == tp.inChild {
			var err error
			if child, err = startChild(n, all, tp, sn); err != nil {
				return res, err
			}
			defer func() { _ = child.Process.Signal(syscall.SIGTERM); _ = child.Wait() }()
			continue
		}
		name := n.Name
		b, err := bird.New(bird.Config{NodeName: name, Logger: log, Routes: func(msg any) {
			if u, ok := msg.(model.RouteUpdate); ok {
				sn.mark(name, u.Prefix, time.Now())
			}
		}})
		if err != nil {
			return res, err
		}
		configure(b, name, all, tp, block(i))
		birds = append(birds, b)
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.Run(ctx) }()
	}
	// Converged: every node has every other node's block.
	for i := 1; i <= nodes; i++ {
		if _, err := sn.waitAll(block(i), nodes-1, 60*time.Second); err != nil {
			return res, fmt.Errorf("convergence: %w", err)
		}
	}
	res.converge = time.Since(start)

	src, srcName := birds[tp.source-1], all[tp.source-1].Name
	for k := 0; k < samples; k++ {
		p := extra(k)
		t0 := time.Now()
		// A /32 block claimed by the source node.
		src.OnUpdate(model.BlockUpdate{Block: model.Block{CIDR: p, Node: srcName}})
		got, err := sn.waitAll(p, nodes-1, 10*time.Second)
		if err != nil {
			return res, err
		}
		var last time.Duration
		for _, at := range got {
			d := at.Sub(t0)
			res.hop = append(res.hop, d)
			last = max(last, d)
		}
		res.lat = append(res.lat, last)
	}
	if child != nil {
		time.Sleep(5 * time.Second) // let the injection settle before measuring idle
		res.child = child.Process.Pid
		var err error
		if res.rss, res.cpu, err = idle(child.Process.Pid, 10*time.Second); err != nil {
			return res, err
		}
	}
	return res, nil
}

// configure gives node self's agent the cluster, as the model's messages: the nodes, the BGP
// configuration, the BGPPeers, the pool and self's block.
func configure(b *bird.Bird, self string, all []model.Node, tp topology, own netip.Prefix) {
	for _, n := range all {
		b.OnUpdate(model.NodeUpdate{Node: n})
	}
	b.OnUpdate(model.BGPConfigurationUpdate{Config: tp.conf})
	for _, p := range tp.peers {
		b.OnUpdate(model.BGPPeerUpdate{Peer: &p})
	}
	b.OnUpdate(model.PoolUpdate{Pool: model.Pool{Name: "default", CIDR: pool}})
	b.OnUpdate(model.BlockUpdate{Block: model.Block{CIDR: own, Node: self}})
}

type childSpec struct {
	Self  model.Node
	All   []model.Node
	Conf  *v1.BGPConfiguration
	Peers []v1.BGPPeer
}

// startChild runs one node's speaker in a child process; it reports routes on stdout.
func startChild(n model.Node, all []model.Node, tp topology, sn *seen) (*exec.Cmd, error) {
	raw, _ := json.Marshal(childSpec{Self: n, All: all, Conf: tp.conf, Peers: tp.peers})
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), envSpeaker+"="+string(raw))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			p, err1 := netip.ParsePrefix(f[0])
			ns, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 == nil && err2 == nil {
				sn.mark(n.Name, p, time.Unix(0, ns))
			}
		}
	}()
	return cmd, nil
}

func runSpeaker(raw string) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	b, err := bird.New(bird.Config{
		NodeName: spec.Self.Name,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		Routes: func(msg any) {
			u, ok := msg.(model.RouteUpdate)
			if !ok {
				return
			}
			mu.Lock()
			fmt.Fprintf(w, "%s %d\n", u.Prefix, time.Now().UnixNano())
			w.Flush()
			mu.Unlock()
		},
	})
	if err != nil {
		return err
	}
	var i int
	fmt.Sscanf(spec.Self.BGPAddress.Get(ipfamily.IPv4).Addr().String(), "198.51.100.%d", &i)
	configure(b, spec.Self.Name, spec.All, topology{conf: spec.Conf, peers: spec.Peers}, block(i))
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	err = b.Run(ctx)
	_ = b.Stop(false)
	return err
}

// idle samples a process's RSS and CPU share over d.
func idle(pid int, d time.Duration) (rss int64, cpu float64, err error) {
	ticks := func() (int64, error) { return benchutil.CPUTicks(pid) }
	t0, err := ticks()
	if err != nil {
		return 0, 0, err
	}
	time.Sleep(d)
	t1, err := ticks()
	if err != nil {
		return 0, 0, err
	}
	cpu = float64(t1-t0) / 100 / d.Seconds() * 100 // USER_HZ = 100
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			rss = kb * 1000
		}
	}
	return rss, cpu, nil
}
