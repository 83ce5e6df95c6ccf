package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/netpol"
)

// TestPolicyHarness proves the truth-table harness without tabby's enforcement: with iptables
// drops in x's pods standing in for a default-deny-ingress of x, the runner sees the policy's
// matrix and the case agrees; the no-policy case with the same drops disagrees on exactly x's
// ingress (the harness sees blocks); without the drops everything agrees again. When tabby
// enforces, the real policy and the stand-in agree with each other and the test still holds.
func TestPolicyHarness(t *testing.T) {
	ctx := testCtx(t, 5*time.Minute)
	_, w, o := netpolWorld(t, ctx, 2)
	prober := &netpol.Prober{W: w, Timeout: probeTimeout, Parallel: probeParallel}
	r := netpol.NewRunner(w, o, prober, 15*time.Second, t.Logf)
	var denyX netpol.Case
	for _, c := range netpol.UpstreamCases(w) {
		if c.Name == "default-deny-ingress" {
			denyX = c
		}
	}
	run := func(c netpol.Case, wantOK bool) netpol.StepResult {
		t.Helper()
		res, err := r.RunCase(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		last := res[len(res)-1]
		if last.OK() {
			reportStep(t, w, r, last)
		}
		if last.OK() != wantOK {
			reportStep(t, w, r, last)
			t.Fatalf("%s: agreement %v, want %v", c.Name, last.OK(), wantOK)
		}
		return last
	}
	run(netpol.Baseline(), true)

	var xPods []*lab.Pod
	for _, p := range w.Pods {
		if p.Namespace == "x" {
			xPods = append(xPods, p)
		}
	}
	drop := func(op string) {
		t.Helper()
		for _, p := range xPods {
			for _, proto := range []string{"tcp", "udp"} {
				if out, err := p.Exec(ctx, "iptables", "-w", op, "INPUT", "-p", proto, "--dport", "80:81", "-j", "DROP"); err != nil {
					t.Fatalf("iptables %s in %s: %v: %s", op, p.Key(), err, out)
				}
			}
		}
	}
	drop("-A")
	dropped := true
	t.Cleanup(func() {
		if dropped {
			drop("-D")
		}
	})
	start := time.Now()
	got := prober.Run(ctx, r.Probes())
	denied := 0
	for _, o := range got {
		if !o.OK {
			denied++
		}
	}
	t.Logf("one round with x's ingress dropped: %d probes, %d denied, %s", len(got), denied, time.Since(start).Round(time.Millisecond))

	s := run(denyX, true)
	t.Logf("default-deny-ingress with the stand-in drops: agrees after %d rounds", s.Rounds)

	r.Deadline = 2 * time.Second
	s = run(netpol.Baseline(), false)
	want := 8 * 3 * len(w.Ports) * len(w.Protocols) // every other pod into x's three pods
	blocks := 0
	for _, m := range s.Mismatches {
		if !m.Got.OK && m.Expected.Allowed && strings.HasPrefix(m.Probe.To, "x/") {
			blocks++
		}
	}
	if blocks != want || len(s.Mismatches) != want {
		t.Fatalf("no-policies with the drops: %d mismatches, %d of them blocks into x, want %d:\n%s", len(s.Mismatches), blocks, want, netpol.MismatchTable(s.Mismatches, 20))
	}
	t.Logf("no-policies with the drops: the harness reports exactly the %d blocked probes into x", want)

	drop("-D")
	dropped = false
	r.Deadline = 15 * time.Second
	run(netpol.Baseline(), true)
}

// TestPolicyPodStart: a pod that starts in a namespace whose policy denies all ingress is never
// reachable, not even in the moment between its CNI ADD returning and the node learning about
// it; a pod that starts in a namespace that denies all egress never gets a packet out. From
// the instant the ADD returns, eight probers per direction hammer the new pod (TCP and UDP, from
// a client on its node and one on the other node) for two seconds. The same race in a namespace
// without policy must see answers within the window, or the race proved nothing.
func TestPolicyPodStart(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 5*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(2)...)
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {Name: "echo", ContainerPort: 80, Protocol: corev1.ProtocolUDP}}
	for _, ns := range []string{"guarded", "sealed", "open"} {
		if err := l.EnsureNamespace(ctx, ns, map[string]string{"role": ns}); err != nil {
			t.Fatal(err)
		}
	}
	spec := func(ns, name string, node *lab.Node) lab.PodSpec {
		return lab.PodSpec{Name: name, Namespace: ns, Node: node.Name, Labels: map[string]string{"app": name}, Ports: ports, Serve: true}
	}
	pods, err := l.AddPods(ctx, spec("open", "client-1", nodes[0]), spec("open", "client-2", nodes[1]),
		spec("guarded", "sentinel", nodes[0]), spec("sealed", "sentinel", nodes[0]))
	if err != nil {
		t.Fatal(err)
	}
	clients, guarded, sealed := pods[:2], pods[2], pods[3]
	requireReach(t, ctx, "pod to pod", podEndpoints(pods), podEndpoints(pods), 30*time.Second)

	for _, p := range []*networkingv1.NetworkPolicy{
		netpol.Policy("guarded", "deny-ingress", netpol.Labels()).Ingress().P(),
		netpol.Policy("sealed", "deny-egress", netpol.Labels()).Egress().P(),
	} {
		if _, err := l.Kube.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The policies hold for the pods that exist, twice in a row, before any pod races them.
	held := 0
	err = lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		var bad []string
		check := func(from, to *lab.Pod, proto corev1.Protocol, want bool) {
			err := lab.Probe(ctx, from.NS, netip.AddrPortFrom(to.IP, 80), proto, probeTimeout)
			if (err == nil) != want {
				bad = append(bad, fmt.Sprintf("%s -> %s 80/%s: answered=%v, want %v", from.Key(), to.Key(), proto, err == nil, want))
			}
		}
		for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP} {
			for _, c := range clients {
				check(c, guarded, proto, false)
				check(sealed, c, proto, false)
				check(c, sealed, proto, true) // only sealed's egress is denied; replies are not egress
				check(guarded, c, proto, true)
			}
		}
		if len(bad) > 0 {
			held = 0
			return errors.New(strings.Join(bad, "; "))
		}
		if held++; held < 2 {
			return errors.New("agreed once")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the policies are not enforced on existing pods: %v", err)
	}

	const window = 2 * time.Second
	for i := range 4 {
		node := nodes[i%2]
		for _, c := range []struct {
			ns      string
			ingress bool
			policed bool
		}{{"guarded", true, true}, {"open", true, false}, {"sealed", false, true}, {"open", false, false}} {
			name := fmt.Sprintf("new-%d-%s", i, map[bool]string{true: "in", false: "out"}[c.ingress])
			res := raceNewPod(t, ctx, l, spec(c.ns, name, node), clients, c.ingress, window)
			dir := map[bool]string{true: "into", false: "out of"}[c.ingress]
			switch {
			case c.policed && res.answered > 0:
				t.Errorf("%s/%s on %s: %d of %d probes %s it answered within %s of its CNI ADD returning (first after %s)",
					c.ns, name, node.Name, res.answered, res.probes, dir, window, res.first.Round(time.Millisecond))
			case c.policed:
				t.Logf("%s/%s on %s: none of %d probes %s it answered in the %s after its CNI ADD returned", c.ns, name, node.Name, res.probes, dir, window)
			case res.answered == 0:
				t.Errorf("control %s/%s on %s: none of %d probes %s it answered within %s: the race shows nothing", c.ns, name, node.Name, res.probes, dir, window)
			default:
				t.Logf("control %s/%s on %s: first answer %s after its CNI ADD returned (%d of %d probes answered)", c.ns, name, node.Name, res.first.Round(time.Microsecond), res.answered, res.probes)
			}
		}
	}

	// tabby-node down: the kernel keeps enforcing what it last wrote. A pod that starts on a node
	// whose tabby-node is stopped (the CNI plugin takes its address from the API directly) has no
	// chains yet, and the dispatch chains' default drop for a workload felix has not programmed
	// holds its traffic, in whatever namespace. Once tabby-node is back, the pod in the open
	// namespace answers and the guarded one still does not. Without that default drop the
	// guarded pod would answer here: nothing else on the node knows about it.
	down := nodes[0]
	if err := down.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var late []*lab.Pod
	for _, ns := range []string{"guarded", "open"} {
		res := raceNewPod(t, ctx, l, spec(ns, "while-down", down), clients, true, window)
		late = append(late, res.pod)
		if res.answered > 0 {
			t.Errorf("%s/while-down on %s with tabby-node stopped: %d of %d probes into it answered (first %s after its CNI ADD returned)",
				ns, down.Name, res.answered, res.probes, res.first.Round(time.Millisecond))
		} else {
			t.Logf("%s/while-down on %s with tabby-node stopped: none of %d probes into it answered", ns, down.Name, res.probes)
		}
	}
	if err := down.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err = lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		for _, c := range clients {
			if err := lab.Probe(ctx, c.NS, netip.AddrPortFrom(late[1].IP, 80), corev1.ProtocolTCP, probeTimeout); err != nil {
				return fmt.Errorf("%s -> open/while-down: %w", c.Key(), err)
			}
			if err := lab.Probe(ctx, c.NS, netip.AddrPortFrom(late[0].IP, 80), corev1.ProtocolTCP, probeTimeout); err == nil {
				return fmt.Errorf("%s -> guarded/while-down answered", c.Key())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after tabby-node came back: %v", err)
	}
	t.Logf("tabby-node back on %s: open/while-down answers, guarded/while-down does not", down.Name)
}

type raceResult struct {
	pod              *lab.Pod
	probes, answered int
	first            time.Duration // to the first answer, from the ADD returning
}

// raceNewPod adds the pod and, from the moment its CNI ADD returns, probes it for window from
// every client (ingress) or the clients from it (egress), with eight probers in parallel so one
// is always in flight.
func raceNewPod(t *testing.T, ctx context.Context, l *lab.Lab, spec lab.PodSpec, clients []*lab.Pod, ingress bool, window time.Duration) raceResult {
	t.Helper()
	var (
		pod      *lab.Pod
		added    time.Time
		startNow = make(chan struct{})
		probes   atomic.Int64
		answered atomic.Int64
		firstNs  atomic.Int64
		wg       sync.WaitGroup
	)
	spec.OnAdded = func(p *lab.Pod) { pod, added = p, time.Now(); close(startNow) }
	protos := []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-startNow:
			case <-ctx.Done():
				return
			}
			// A probe every 20 ms per prober, the probers 2.5 ms apart (the first at once), finds
			// the window as a tight loop would, without leaving tens of thousands of conntrack
			// entries.
			next := added.Add(time.Duration(k) * 20 * time.Millisecond / 8)
			for n := k; time.Since(added) < window && ctx.Err() == nil; n++ {
				select {
				case <-ctx.Done():
				case <-time.After(time.Until(next)):
				}
				next = next.Add(20 * time.Millisecond)
				c := clients[n%len(clients)]
				proto := protos[(n/len(clients))%len(protos)]
				from, to := c.NS, netip.AddrPortFrom(pod.IP, 80)
				if !ingress {
					from, to = pod.NS, netip.AddrPortFrom(c.IP, 80)
				}
				err := lab.Probe(ctx, from, to, proto, 150*time.Millisecond)
				probes.Add(1)
				if err == nil {
					answered.Add(1)
					firstNs.CompareAndSwap(0, int64(time.Since(added)))
				}
			}
		}()
	}
	_, err := l.AddPod(ctx, spec)
	if err != nil {
		select {
		case <-startNow:
		default:
			close(startNow) // the probers would wait for a pod that never came
		}
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return raceResult{pod: pod, probes: int(probes.Load()), answered: int(answered.Load()), first: time.Duration(firstNs.Load())}
}

// TestPolicyRestart: tabby-node on one node is restarted three times while every probe of the
// truth-table matrix loops, under policies that allow and deny traffic into and out of that
// node's pods. No allowed probe may fail and no denied probe may succeed at any moment: a
// restart keeps the dataplane's rules (as it keeps routes) and replaces them atomically. The
// tolerance is zero: a probe gets 900 ms, hundreds of times what a veth needs, and less than
// TCP's first SYN retransmission (1 s), so a dropped SYN shows instead of hiding behind it.
func TestPolicyRestart(t *testing.T) {
	ctx := testCtx(t, 6*time.Minute)
	l, w, o := netpolWorld(t, ctx, 2)
	prober := &netpol.Prober{W: w, Timeout: probeTimeout, Parallel: probeParallel}
	r := netpol.NewRunner(w, o, prober, 20*time.Second, t.Logf)
	c := netpol.One("under-restart",
		netpol.Policy("x", "from-y-or-b", netpol.Labels("pod", "a")).Ingress(
			netpol.From(netpol.NamespacesOf(netpol.Labels("ns", "y")), netpol.Pods(netpol.Labels("pod", "b")))).P(),
		netpol.Policy("y", "b-to-prod", netpol.Labels("pod", "b")).Egress(
			netpol.To(netpol.NamespacesOf(netpol.Labels("env", "prod")))).P(),
		netpol.Policy("z", "udp-from-tiered", netpol.Labels()).Ingress(
			netpol.From(netpol.PodsIn(netpol.Labels(), netpol.Exprs(netpol.Req("tier", netpol.Exists)))).On(netpol.AllOf(corev1.ProtocolUDP))).P(),
	)
	res, err := r.RunCase(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res {
		reportStep(t, w, r, s)
	}
	if t.Failed() {
		t.FailNow()
	}
	want := res[len(res)-1].Expected
	probes := r.Probes()
	allowed := 0
	for _, p := range probes {
		if want[p].Allowed {
			allowed++
		}
	}

	victim := l.Node("node-1")
	loop := &netpol.Prober{W: w, Timeout: 900 * time.Millisecond, Parallel: 64}
	var (
		mu         sync.Mutex
		violations []string
		rounds     int
		total      int
		restarted  = make(chan struct{})
		roundsPost int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Three loops a third of a second apart, each starting a round at most once a second, so
	// that every probe is tried about three times a second (and the probes leave no more
	// conntrack entries than the kernel's table holds with room to spare).
	for k := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now().Add(time.Duration(k) * time.Second / 3)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Until(next)):
				}
				began := time.Now()
				next = began.Add(time.Second)
				got := loop.Run(ctx, probes)
				mu.Lock()
				rounds++
				total += len(got)
				select {
				case <-restarted:
					roundsPost++
				default:
				}
				for _, p := range probes {
					if g := got[p]; g.OK != want[p].Allowed {
						violations = append(violations, fmt.Sprintf("%s %s: %s, oracle: %v (%s)", began.Format("15:04:05.000"), p, g, want[p].Allowed, want[p].Why))
					}
				}
				mu.Unlock()
			}
		}()
	}
	err = lab.Eventually(ctx, 30*time.Second, func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if rounds < 3 {
			return fmt.Errorf("%d rounds before the first restart", rounds)
		}
		return nil
	})
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		start := time.Now()
		if err := victim.Restart(ctx); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("restart %d: %v", i, err)
		}
		t.Logf("restart %d of tabby-node on %s at %s: ready in %s", i, victim.Name, start.Format("15:04:05.000"), time.Since(start).Round(time.Millisecond))
	}
	close(restarted)
	// Every loop completes two rounds after the last restart.
	err = lab.Eventually(ctx, time.Minute, func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if roundsPost < 6 {
			return fmt.Errorf("%d rounds since the last restart", roundsPost)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rounds, %d probes (%d of %d pairs×ports allowed) across three restarts: %d disagreed with the oracle",
		rounds, total, allowed, len(probes), len(violations))
	if len(violations) > 0 {
		if len(violations) > 40 {
			violations = append(violations[:40], fmt.Sprintf("… and %d more", len(violations)-40))
		}
		t.Fatalf("probes that disagreed while tabby-node restarted:\n%s", strings.Join(violations, "\n"))
	}
}
