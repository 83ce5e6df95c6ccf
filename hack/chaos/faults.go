package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/hack/churn"
	"github.com/tabbynet/tabby/hack/lab"
)

// Fault is one row of the campaign: what is done to the cluster, what must happen, and the
// most it may cost.
type Fault struct {
	Name string
	// Expected is the outcome written before the fault is run, printed beside the measure.
	Expected string
	// MaxLost and MaxResets are what Expected allows (UDP probes of all pairs, long-lived
	// connections); a connect to the isolated pod that succeeds is never allowed.
	MaxLost, MaxResets int
	// IPAM: the fault touches address allocation, so the cluster is settled only once
	// `tabbyctl ipam check` is clean.
	IPAM bool
	// Rounds is how many times the fault is injected in one window (at least once).
	Rounds int
	// Topology is the lab the fault runs in.
	Topology Topology
	// Prepare, if set, readies the lab for the fault before its window opens (once per lab).
	Prepare func(ctx context.Context, c *Campaign) error
	// Inject does the fault and heals it: it returns the instant it healed (the killed part
	// started again, the link up) and what it observed.
	Inject func(ctx context.Context, c *Campaign) (healed time.Time, note string, err error)
}

// Settings size the table's faults.
type Settings struct {
	// Outage is how long the API server stays stopped.
	Outage time.Duration
	// Rounds repeats the faults that are cheap to repeat (agent and API server kills).
	Rounds int
	// Flap is how long a node's uplink stays down.
	Flap time.Duration
	// Hold is the BGP hold time between tabby nodes: a reflector cut off for longer is dead to
	// its clients.
	Hold time.Duration
}

// udpStreams are the monitor's UDP streams: client→server and client→the Service, per family.
const udpStreams = 4

// etcdDelays are the latencies the etcd row adds to every request, in turn.
var etcdDelays = []time.Duration{200 * time.Millisecond, time.Second, 5 * time.Second}

// Faults is the campaign's table, in the order it runs. Typha faults need a lab with replicas.
func Faults(s Settings) []Fault {
	rounds := max(s.Rounds, 1)
	// Probes a second of every UDP stream together: what a second of loss on every path costs.
	udpPerSecond := udpStreams * int(time.Second/UDPInterval)
	return []Fault{
		{
			Name:     "none (control)",
			Expected: "0 lost, 0 resets, isolated pairs blocked",
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				err := sleep(ctx, 3*time.Second)
				return time.Now(), "", err
			},
		},
		{
			Name:     "tabby-node SIGKILLed during a policy change, restarted",
			Expected: "0 lost, 0 resets; the isolated pod unreachable at every instant, during the restart too",
			Rounds:   rounds,
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				if err := c.churnPolicy(ctx); err != nil {
					return time.Time{}, "", err
				}
				// Somewhere inside the agent's apply of the change.
				if err := sleep(ctx, time.Duration(rand.IntN(200))*time.Millisecond); err != nil {
					return time.Time{}, "", err
				}
				return c.killAgent(ctx, c.Servers, time.Second)
			},
		},
		{
			Name:     "tabby-node SIGKILLed during a burst of CNI ADDs, restarted",
			Expected: "0 lost, 0 resets; each ADD succeeds or fails leaving no veth, route or address; ipam check clean",
			IPAM:     true,
			Rounds:   rounds,
			Inject:   func(ctx context.Context, c *Campaign) (time.Time, string, error) { return c.killDuringAdds(ctx, 6) },
		},
		{
			Name:     "kube-apiserver SIGKILLed, restarted",
			Expected: "0 lost, 0 resets, isolated pairs blocked",
			Rounds:   rounds,
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				healed, err := churn.RestartAPIServer(ctx, c.Lab, syscall.SIGKILL, 0)
				return healed, "", err
			},
		},
		{
			Name: fmt.Sprintf("kube-apiserver stopped for %s, CNI ADDs during it", s.Outage),
			Expected: "0 lost, 0 resets; each ADD fails with a named cause leaving no veth, route or address, " +
				"or succeeds; ipam check clean after",
			IPAM: true,
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				return c.apiOutage(ctx, s.Outage, 3)
			},
		},
		{
			Name:     "etcd SIGKILLed, restarted",
			Expected: "0 lost, 0 resets, isolated pairs blocked",
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				healed := time.Now()
				return healed, "", c.Lab.Env.RestartEtcd(ctx, syscall.SIGKILL)
			},
		},
		{
			Name: fmt.Sprintf("etcd slowed: %s, %s, then %s added to every request from kube-apiserver; CNI ADDs and a policy change at each",
				etcdDelays[0], etcdDelays[1], etcdDelays[2]),
			Expected: "0 lost, 0 resets, isolated pairs blocked; each ADD succeeds, slower, or fails with a named cause " +
				"leaving nothing; ipam check clean after",
			IPAM: true,
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				return c.slowEtcd(ctx, etcdDelays, 3)
			},
		},
		{
			Name:     "every tabby-typha replica SIGKILLed, restarted",
			Expected: "0 lost, 0 resets, isolated pairs blocked",
			Inject:   func(ctx context.Context, c *Campaign) (time.Time, string, error) { return c.killTyphas(ctx) },
		},
		{
			Name:     "route reflector rr-1 SIGKILLed, restarted",
			Expected: "0 lost, 0 resets, isolated pairs blocked (rr-2 reflects every route meanwhile)",
			Topology: Reflectors,
			Rounds:   rounds,
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				return c.killAgent(ctx, c.Reflectors[0], time.Second)
			},
		},
		{
			Name:     "route reflector rr-1 dies (uplink down until its sessions time out) and returns",
			Expected: "0 lost, 0 resets, isolated pairs blocked (rr-2 reflects every route meanwhile)",
			Topology: Reflectors,
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				rr, other := c.Reflectors[0], c.Reflectors[1]
				if err := rr.CutLink(ctx); err != nil {
					return time.Time{}, "", err
				}
				cut := time.Now()
				// Dead to its clients: their only session left is the one to rr-2.
				for _, n := range []*lab.Node{c.Clients, c.Servers} {
					if err := n.WaitPeers(ctx, s.Hold+30*time.Second, other.IP()); err != nil {
						_ = rr.RestoreLink(ctx)
						return time.Time{}, "", fmt.Errorf("rr-1 cut off: %w", err)
					}
				}
				note := fmt.Sprintf("the clients' sessions to rr-1 down %s after the cut", time.Since(cut).Round(100*time.Millisecond))
				if err := sleep(ctx, 3*time.Second); err != nil {
					return time.Time{}, note, err
				}
				healed := time.Now()
				if err := rr.RestoreLink(ctx); err != nil {
					return healed, note, err
				}
				var others []netip.Addr
				for _, n := range c.Lab.Nodes() {
					if n != rr {
						others = append(others, n.IP())
					}
				}
				return healed, note, rr.WaitPeers(ctx, time.Minute, others...)
			},
		},
		{
			Name: "the ToR (FRR: bgpd and zebra) SIGKILLed, restarted",
			Expected: fmt.Sprintf("loss only until the restarted ToR has relearned the pod routes (≤ %d probes: 10 s), 0 resets, isolated pairs blocked",
				udpPerSecond*10),
			MaxLost:  udpPerSecond * 10,
			Topology: ToR,
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				if err := c.Lab.Router().StopDaemons(syscall.SIGKILL); err != nil {
					return time.Time{}, "", err
				}
				if err := sleep(ctx, time.Second); err != nil {
					return time.Time{}, "", err
				}
				healed := time.Now()
				if err := c.Lab.Router().StartDaemons(ctx); err != nil {
					return healed, "", err
				}
				for _, rr := range c.Reflectors {
					var want []netip.Addr
					for _, n := range c.Lab.Nodes() {
						if n != rr {
							want = append(want, n.IP())
						}
					}
					want = append(want, rr.Subnet.Gateway())
					if rr == c.Reflectors[1] {
						want = append(want, rr.Subnet.Gateway6())
					}
					if err := rr.WaitPeers(ctx, time.Minute, want...); err != nil {
						return healed, "", err
					}
				}
				return healed, "", nil
			},
		},
		{
			Name: fmt.Sprintf("node-2's uplink down for %s", s.Flap),
			Expected: fmt.Sprintf("loss only while the link is down (≤ %d probes), 0 resets (TCP retransmits), isolated pairs blocked",
				udpPerSecond*int((s.Flap+2*time.Second)/time.Second)),
			MaxLost: udpPerSecond * int((s.Flap+2*time.Second)/time.Second),
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				if err := c.Servers.CutLink(ctx); err != nil {
					return time.Time{}, "", err
				}
				if err := sleep(ctx, s.Flap); err != nil {
					return time.Time{}, "", err
				}
				healed := time.Now()
				return healed, "", c.Servers.RestoreLink(ctx)
			},
		},
		{
			Name: rebootNode + " rebooted: a power cut (link, agent, pods and namespace gone at once), booted, its pods restarted",
			Expected: fmt.Sprintf("0 lost, 0 resets, isolated pairs blocked (the monitor's pods are elsewhere); the other nodes drop "+
				"its routes within the hold time (%s); back, its restarted and new pods reachable, the old sandboxes' addresses "+
				"released or taken again; ipam check clean", s.Hold),
			IPAM:    true,
			Rounds:  rounds,
			Prepare: func(ctx context.Context, c *Campaign) error { return c.addRebootNode(ctx) },
			Inject: func(ctx context.Context, c *Campaign) (time.Time, string, error) {
				return c.reboot(ctx, s.Hold)
			},
		},
	}
}

// Select keeps the faults whose names contain one of the words (all of them with none).
func Select(fs []Fault, words ...string) []Fault {
	if len(words) == 0 {
		return fs
	}
	var out []Fault
	for _, f := range fs {
		for _, w := range words {
			if strings.Contains(f.Name, w) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// killAgent SIGKILLs tabby-node on n, leaves it down for down, and starts it again.
func (c *Campaign) killAgent(ctx context.Context, n *lab.Node, down time.Duration) (time.Time, string, error) {
	healed, err := churn.RestartAgent(ctx, n, true, down)
	return healed, "", err
}

// churnPolicy adds, or removes if it is there, a second policy on the isolated pod: a rule
// allowing pods that do not exist. The isolated pod's rules change and must stay closed.
func (c *Campaign) churnPolicy(ctx context.Context) error {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-churn", Namespace: lab.PodNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: isolatedLabels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "chaos-nobody"}},
			}}}},
		},
	}
	if _, err := churn.TogglePolicy(ctx, c.Lab, np); err != nil {
		return fmt.Errorf("policy change: %w", err)
	}
	return nil
}

// addOutcome is how one CNI ADD of a fault ended.
type addOutcome struct {
	pod  *lab.Pod
	err  error
	took time.Duration
	done time.Time
}

// tryAdds runs CNI ADD for pods whose objects exist, and sorts the outcomes: a failed ADD
// must leave nothing behind in the node (its host veth) or the pod (an interface besides lo);
// the pod's namespace stays for DiscardPod.
func (c *Campaign) checkFailedAdd(ctx context.Context, p *lab.Pod) error {
	veth := names.HostVethName(p.Namespace, p.Name, p.ContainerID)
	if out, err := p.Node.Exec(ctx, "ip", "-o", "link", "show", "dev", veth); err == nil {
		return fmt.Errorf("failed ADD of %s left its host veth %s: %s", p.Key(), veth, strings.TrimSpace(out))
	}
	out, err := p.Exec(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return fmt.Errorf("failed ADD of %s: list its links: %w", p.Key(), err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" && !strings.Contains(line, ": lo:") {
			return fmt.Errorf("failed ADD of %s left an interface in the pod: %s", p.Key(), line)
		}
	}
	return nil
}

// leftAllocation fails if IPAM holds anything for the container: a block allocation or a
// handle. Run with the API server up.
func (c *Campaign) leftAllocation(ctx context.Context, p *lab.Pod) error {
	blocks, err := c.Lab.Client.IPAMBlocks().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, b := range blocks.Items {
		for ord, a := range b.Spec.Allocations {
			if strings.Contains(a.Handle, p.ContainerID) {
				return fmt.Errorf("failed ADD of %s left an allocation in block %s (ordinal %s)", p.Key(), b.Spec.CIDR, ord)
			}
		}
	}
	handles, err := c.Lab.Client.IPAMHandles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, h := range handles.Items {
		if strings.Contains(h.Spec.HandleID, p.ContainerID) {
			return fmt.Errorf("failed ADD of %s left the IPAM handle %s", p.Key(), h.Spec.HandleID)
		}
	}
	return nil
}

// finishAdds settles the outcomes of a fault's ADDs once the API server is up: a succeeded pod
// is reported, must be reachable from the client pod, and is deleted (CNI DEL); a failed one
// must have left no allocation and is discarded. It returns a note counting the outcomes.
func (c *Campaign) finishAdds(ctx context.Context, outcomes []addOutcome) (string, error) {
	var errs []error
	causes := map[string]int{}
	ok := 0
	client := c.Pairs[0].Client
	for _, o := range outcomes {
		p := o.pod
		if o.err == nil {
			ok++
			if err := c.Lab.ReportPod(ctx, p); err != nil {
				errs = append(errs, err)
				continue
			}
			for _, a := range p.Addrs() {
				if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error { return lab.Ping(ctx, client.NS, a) }); err != nil {
					errs = append(errs, fmt.Errorf("pod %s added during the fault: %s unreachable: %w", p.Key(), a, err))
				}
			}
			if err := c.Lab.DeletePod(ctx, p.Key()); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		causes[cause(o.err)]++
		if err := c.leftAllocation(ctx, p); err != nil {
			errs = append(errs, err)
		}
		if err := c.Lab.DiscardPod(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range c.Lab.Nodes() {
		if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error { return c.Lab.CheckRoutes(ctx, n) }); err != nil {
			errs = append(errs, err)
		}
	}
	var cs []string
	for k, n := range causes {
		cs = append(cs, fmt.Sprintf("%d× %q", n, k))
	}
	var slowest time.Duration
	for _, o := range outcomes {
		slowest = max(slowest, o.took)
	}
	sort.Strings(cs)
	note := fmt.Sprintf("CNI ADDs: %d succeeded, %d failed", ok, len(outcomes)-ok)
	if len(cs) > 0 {
		note += " (" + strings.Join(cs, ", ") + "), each leaving nothing"
	}
	note += fmt.Sprintf("; the slowest took %s", slowest.Round(100*time.Millisecond))
	return note, errors.Join(errs...)
}

// cause is the CNI error's message (what the plugin says failed), without the detail that
// names the pod.
func cause(err error) string {
	s := err.Error()
	if i := strings.Index(s, "failed (add): "); i >= 0 {
		s = s[i+len("failed (add): "):]
	}
	if i := strings.Index(s, ";"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// killDuringAdds starts n CNI ADDs on the server node at once and SIGKILLs its agent while
// they run.
func (c *Campaign) killDuringAdds(ctx context.Context, n int) (time.Time, string, error) {
	pods := make([]*lab.Pod, n)
	for i := range pods {
		p, err := c.Lab.CreatePod(ctx, lab.PodSpec{Name: c.name("burst"), Node: c.Servers.Name})
		if err != nil {
			return time.Time{}, "", err
		}
		pods[i] = p
	}
	outcomes := make([]addOutcome, n)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			start := time.Now()
			err := c.Lab.CNIAdd(actx, p)
			outcomes[i] = addOutcome{pod: p, err: err, took: time.Since(start), done: time.Now()}
		}()
	}
	if err := sleep(ctx, time.Duration(50+rand.IntN(250))*time.Millisecond); err != nil {
		return time.Time{}, "", err
	}
	killed := time.Now()
	healed, _, err := c.killAgent(ctx, c.Servers, time.Second)
	wg.Wait()
	if err != nil {
		return healed, "", err
	}
	before := 0
	for _, o := range outcomes {
		if o.done.Before(killed) {
			before++
		}
	}
	var errs []error
	for _, o := range outcomes {
		if o.err != nil {
			if err := c.checkFailedAdd(ctx, o.pod); err != nil {
				errs = append(errs, err)
			}
		}
	}
	note, err := c.finishAdds(ctx, outcomes)
	note += fmt.Sprintf("; %d of %d ended before the kill", before, n)
	return healed, note, errors.Join(append(errs, err)...)
}

// apiOutage stops the API server for d and runs adds CNI ADDs on the server node spread over
// the outage, for pods whose objects were made before it.
func (c *Campaign) apiOutage(ctx context.Context, d time.Duration, adds int) (time.Time, string, error) {
	pods := make([]*lab.Pod, adds)
	for i := range pods {
		p, err := c.Lab.CreatePod(ctx, lab.PodSpec{Name: c.name("outage"), Node: c.Servers.Name})
		if err != nil {
			return time.Time{}, "", err
		}
		pods[i] = p
	}
	if err := c.Lab.Env.StopAPIServer(syscall.SIGTERM); err != nil {
		return time.Time{}, "", err
	}
	down := time.Now()
	outcomes := make([]addOutcome, adds)
	var errs []error
	for i, p := range pods {
		// The first ADD right away, the last one near the end of the outage.
		at := down.Add(time.Duration(i) * d / time.Duration(adds))
		if err := sleep(ctx, time.Until(at)); err != nil {
			return time.Time{}, "", err
		}
		actx, cancel := context.WithTimeout(ctx, d)
		start := time.Now()
		err := c.Lab.CNIAdd(actx, p)
		cancel()
		c.log.Info("CNI ADD during the API server outage", "pod", p.Name, "took", time.Since(start).Round(time.Millisecond), "err", err)
		outcomes[i] = addOutcome{pod: p, err: err, took: time.Since(start), done: time.Now()}
		if err != nil {
			if err := c.checkFailedAdd(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := sleep(ctx, time.Until(down.Add(d))); err != nil {
		return time.Time{}, "", err
	}
	healed := time.Now()
	if err := c.Lab.Env.StartAPIServer(ctx); err != nil {
		return healed, "", err
	}
	note, err := c.finishAdds(ctx, outcomes)
	return healed, note, errors.Join(append(errs, err)...)
}

// killTyphas SIGKILLs every replica, one after the other, and starts them again.
func (c *Campaign) killTyphas(ctx context.Context) (time.Time, string, error) {
	if len(c.Lab.Typhas) == 0 {
		return time.Time{}, "", errors.New("the lab runs no tabby-typha")
	}
	for _, t := range c.Lab.Typhas {
		t.Stop()
		if err := sleep(ctx, time.Second); err != nil {
			return time.Time{}, "", err
		}
	}
	healed := time.Now()
	for _, t := range c.Lab.Typhas {
		if err := t.Start(ctx); err != nil {
			return healed, "", err
		}
	}
	return healed, "", nil
}
