package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/netpol"
)

func pct(d []time.Duration, p int) time.Duration { return benchutil.Pct(d, p) }

// waitEnforced waits until node-1's chains and sets are exactly what the API objects call for
// and api is isolated.
func (w *world) waitEnforced(ctx context.Context) error {
	if err := w.waitMatches(ctx, w.n1); err != nil {
		return err
	}
	if lab.Probe(ctx, w.client.NS, netip.AddrPortFrom(w.api.IP, 80), corev1.ProtocolTCP, 200*time.Millisecond) == nil {
		return errors.New("api answers the client although api-isolate isolates it")
	}
	return nil
}

// waitMatches waits until n's chains and sets are exactly what the API objects call for
// (tabbyctl policy check, felix's calculator on the same objects).
func (w *world) waitMatches(ctx context.Context, n *lab.Node) error {
	err := lab.Eventually(ctx, 3*time.Minute, func(ctx context.Context) error {
		if out, err := w.l.Tabbyctl(ctx, "policy", "check", "--node", n.Name, "--netns", lab.NetnsPath(n.NS)); err != nil {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			return fmt.Errorf("%v: %s", err, lines[len(lines)-1])
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s never matched the policies: %w", n.Name, err)
	}
	return nil
}

// connectionRate counts TCP connections a second from client to web, the best of a few
// windows (a busy machine only ever takes away): connect, then close with a reset (no
// TIME_WAIT piling up over the run), from one thread in the client's namespace.
func (w *world) connectionRate(ctx context.Context) (float64, error) {
	best := 0.0
	for range connWindows {
		r, err := w.connectionWindow(ctx)
		if err != nil {
			return 0, err
		}
		best = max(best, r)
	}
	return best, nil
}

func (w *world) connectionWindow(ctx context.Context) (float64, error) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread goes back to its namespace before it is unlocked: a thread Go retires
		// would take the lab's agents with it (they die with the thread that started them).
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer orig.Close()
		h, err := netns.GetFromPath(lab.NetnsPath(w.client.NS))
		if err == nil {
			defer h.Close()
			err = netns.Set(h)
		}
		defer func() {
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
		}()
		if err != nil {
			done <- result{err: err}
			return
		}
		addr := netip.AddrPortFrom(w.web.IP, 80).String()
		d := net.Dialer{Timeout: time.Second}
		n := 0
		for end := time.Now().Add(connWindow); time.Now().Before(end) && ctx.Err() == nil; n++ {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				done <- result{err: fmt.Errorf("connection %d: %w", n, err)}
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
		done <- result{n: n}
	}()
	r := <-done
	return float64(r.n) / connWindow.Seconds(), r.err
}

// alternatingRates measures the connection rate window by window in turn in two states, the
// best window of each: the current one, then the other after set(false), then back after
// set(true), connWindows times, so both see the same machine. It ends in the first state.
func (w *world) alternatingRates(ctx context.Context, set func(first bool) error) (first, second float64, err error) {
	for range connWindows {
		r, err := w.connectionWindow(ctx)
		if err != nil {
			return 0, 0, err
		}
		first = max(first, r)
		if err := set(false); err != nil {
			return 0, 0, err
		}
		if r, err = w.connectionWindow(ctx); err != nil {
			return 0, 0, err
		}
		second = max(second, r)
		if err := set(true); err != nil {
			return 0, 0, err
		}
	}
	return first, second, nil
}

// createToEnforced: for each sample create writes a policy allowing the client into api,
// and the time from the write returning to the first connection that gets through is taken;
// the policy is deleted and api is isolated again before the next.
func (w *world) createToEnforced(ctx context.Context, create func(ctx context.Context, i int) (name string, del func(context.Context) error, err error)) ([]time.Duration, error) {
	api := netip.AddrPortFrom(w.api.IP, 80)
	var out []time.Duration
	for i := range createRounds {
		name, del, err := create(ctx, i)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		for lab.Probe(ctx, w.client.NS, api, corev1.ProtocolTCP, 5*time.Millisecond) != nil {
			if time.Since(t0) > 10*time.Second || ctx.Err() != nil {
				slow := lab.Probe(ctx, w.client.NS, api, corev1.ProtocolTCP, time.Second)
				return nil, fmt.Errorf("sample %d: %s not enforced after 10s (a probe with 1s: %v)", i, name, slow)
			}
		}
		out = append(out, time.Since(t0))
		if err := del(ctx); err != nil {
			return nil, err
		}
		err = lab.Eventually(ctx, 10*time.Second, func(ctx context.Context) error {
			if lab.Probe(ctx, w.client.NS, api, corev1.ProtocolTCP, 50*time.Millisecond) == nil {
				return errors.New("api still answers the client")
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("sample %d: deleting %s: %w", i, name, err)
		}
	}
	return out, nil
}

// createAPIAllowNP is createToEnforced's writer for NetworkPolicy: a policy of api's own.
func (w *world) createAPIAllowNP(ctx context.Context, i int) (string, func(context.Context) error, error) {
	client := netpol.PodsIn(netpol.Labels("team", "t1"), netpol.Labels("tier", "client"))
	np := netpol.Policy(nsName(0), "api-allow-"+strconv.Itoa(i), netpol.Labels("app", "api")).Ingress(netpol.From(client).On(netpol.TCP(80))).P()
	nps := w.l.Kube.NetworkingV1().NetworkPolicies(np.Namespace)
	if _, err := nps.Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return "", nil, err
	}
	return "NetworkPolicy " + np.Name, func(ctx context.Context) error {
		return nps.Delete(ctx, np.Name, metav1.DeleteOptions{})
	}, nil
}

// podToIPSet: for each sample a made-up pod labelled probe=yes gets a Pod object, then an IPAM
// allocation (as a CNI ADD would write it); the time from that write to its address being in
// node-1's set of probe=yes pods of its namespace is taken.
func (w *world) podToIPSet(ctx context.Context) ([]time.Duration, error) {
	set, err := w.probeSet(ctx)
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := range joinRounds {
		name := "joiner-" + strconv.Itoa(i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.probeNS, Labels: map[string]string{"probe": "yes", "app": "joiner"}},
			Spec: corev1.PodSpec{NodeName: "node-3", Containers: []corev1.Container{{Name: "app", Image: "bench.invalid/none"}}}}
		if _, err := w.l.Kube.CoreV1().Pods(w.probeNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		ip, err := w.allocate(ctx, name)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		for {
			if _, err := w.n1.Exec(ctx, "ipset", "test", set, ip.String()); err == nil {
				break
			}
			if time.Since(t0) > 10*time.Second || ctx.Err() != nil {
				return nil, fmt.Errorf("sample %d: %s not in %s after 10s", i, ip, set)
			}
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// probeSet finds node-1's set holding exactly the probe=yes pods of probeNS.
func (w *world) probeSet(ctx context.Context) (string, error) {
	var want []string
	for i := range fakePods {
		ns, _, labels := fakePod(i)
		if ns == w.probeNS && labels["probe"] == "yes" {
			want = append(want, fakeIP(i).String())
		}
	}
	slices.Sort(want)
	saved, err := w.n1.Exec(ctx, "ipset", "save")
	if err != nil {
		return "", err
	}
	members := map[string][]string{}
	for _, line := range strings.Split(saved, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "add" && strings.HasPrefix(f[1], "tabby-p4-") {
			members[f[1]] = append(members[f[1]], f[2])
		}
	}
	for name, m := range members {
		slices.Sort(m)
		if slices.Equal(m, want) {
			return name, nil
		}
	}
	return "", fmt.Errorf("no set on node-1 holds exactly the probe=yes pods of %s (%v)", w.probeNS, want)
}

// fakeIP is made-up pod i's address (populate's layout).
func fakeIP(i int) netip.Addr {
	base, k := netip.MustParseAddr("10.244.128.0"), i-localFake
	if i < localFake {
		base, k = netip.MustParseAddr("10.244.64.0"), i
	}
	b4 := base.As4()
	b4[2] += byte(k / 256)
	b4[3] = byte(k % 256)
	return netip.AddrFrom4(b4)
}

// allocate writes pod's allocation into the joiners' block, compare-and-swap as IPAM does.
func (w *world) allocate(ctx context.Context, pod string) (netip.Addr, error) {
	for {
		b, err := w.l.Client.IPAMBlocks().Get(ctx, names.BlockName(w.joinerBlock))
		if err != nil {
			return netip.Addr{}, err
		}
		ord := w.joinerOrd
		if b.Spec.Allocations == nil {
			b.Spec.Allocations = map[string]v1.Allocation{}
		}
		b.Spec.Allocations[strconv.Itoa(ord)] = v1.Allocation{Handle: "bench.j" + strconv.Itoa(ord), Namespace: w.probeNS, Pod: pod, Node: "node-3"}
		if _, err := w.l.Client.IPAMBlocks().Update(ctx, b); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return netip.Addr{}, err
		}
		w.joinerOrd++
		a := w.joinerBlock.Addr().As4()
		a[3] += byte(ord)
		return netip.AddrFrom4(a), nil
	}
}

// diagnose describes what a failed measurement needs: node-1's policy chains of the real pods
// with their packet counters, the routes to them on both nodes, and what tabbyctl says.
func (w *world) diagnose(ctx context.Context) string {
	var b strings.Builder
	show, _ := w.l.Tabbyctl(ctx, "policy", "show", w.web.Key(), "--from", w.client.Key(), "--port", "80")
	check, _ := w.l.Tabbyctl(ctx, "policy", "check", "--node", w.n1.Name, "--netns", lab.NetnsPath(w.n1.NS))
	fmt.Fprintf(&b, "tabbyctl policy show:\n%s\ntabbyctl policy check:\n%s\n", show, check)
	var ifaces []string
	for _, p := range w.real {
		out, _ := p.Node.Exec(ctx, "ip", "-o", "route", "get", p.IP.String())
		f := strings.Fields(out)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "dev" {
				ifaces = append(ifaces, f[i+1])
			}
		}
		fmt.Fprintf(&b, "%s %s on %s: %s", p.Key(), p.IP, p.Node.Name, out)
	}
	filter := "tabby-FORWARD|FORWARD|cali\\+"
	for _, i := range ifaces {
		filter += "|" + i
	}
	save, _ := w.n1.Exec(ctx, "sh", "-c", "iptables-save -c -t filter | grep -E '"+filter+"' | grep -v '^\\[0:0\\] -A tabby-to-wl-dispatch\\|^\\[0:0\\] -A tabby-from-wl-dispatch' | head -120")
	fmt.Fprintf(&b, "node-1 filter table (counters):\n%s\n", save)
	for _, n := range w.l.Nodes() {
		r, _ := n.Exec(ctx, "ip", "route")
		fmt.Fprintf(&b, "%s routes:\n%s\n", n.Name, r)
	}
	for _, n := range w.l.Nodes() {
		fmt.Fprintf(&b, "%s: tabby-node running %v; log:\n%s\n", n.Name, n.Running(), n.LogTail(40))
	}
	return b.String()
}
