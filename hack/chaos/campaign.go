// Package chaos is tabby's fault campaign: a dual-stack lab (hack/lab) with steady traffic
// between pods on different nodes, directly and through a Service, and two pods isolated (by a
// NetworkPolicy and by a BaselineAdminNetworkPolicy) that must stay blocked, and a table of
// faults (agents killed, the API server killed or gone for minutes, etcd restarted or slowed,
// typha replicas killed, an uplink flapped, a node power-cycled, reflectors and the ToR killed),
// each with its expected outcome written down first and then measured: packets lost,
// connections reset, connects wrongly allowed, recovery time.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/lab"
)

// Options describe a campaign's lab.
type Options struct {
	// Typha runs this many tabby-typha replicas (the typha faults need at least one).
	Typha int
	// Topology is the nodes' BGP: a full mesh, or two route reflectors the nodes are clients of.
	Topology Topology
	// Log receives progress; slog.Default() when nil.
	Log *slog.Logger
}

// Topology is how the lab's nodes exchange routes.
type Topology int

const (
	// Mesh: node-1 and node-2 peer with each other.
	Mesh Topology = iota
	// Reflectors: the mesh off, rr-1 and rr-2 reflect every route between node-1 and node-2.
	Reflectors
	// ToR: node-1 and rr-1 on one subnet, node-2 and rr-2 on the other, and the router between
	// them a ToR (FRR with zebra) that learns the pod routes from the reflectors: pod traffic
	// crosses it natively.
	ToR
)

func (t Topology) String() string { return [...]string{"mesh", "route reflectors", "ToR"}[t] }

// reflectorClusterID is the reflectors' cluster ID.
const reflectorClusterID = "244.0.0.1"

// Campaign is a lab with the monitor's traffic running in it.
type Campaign struct {
	Lab *lab.Lab
	// Clients is the node whose pod opens every flow; Servers holds the servers and the
	// isolated pod, and is the node most faults hit.
	Clients, Servers *lab.Node
	Pairs, Isolated  []Pair
	Monitor          *Monitor
	// Reflectors are the route reflector nodes (Topology Reflectors).
	Reflectors []*lab.Node

	log     *slog.Logger
	closers []io.Closer
	seq     int // names of the pods and policies faults make
}

// isolatedLabels select the pod a NetworkPolicy isolates; baselineLabels the one the
// BaselineAdminNetworkPolicy isolates (no NetworkPolicy selects it, so the baseline decides).
var (
	isolatedLabels = map[string]string{"app": "chaos-isolated"}
	baselineLabels = map[string]string{"app": "chaos-baseline"}
	// backendLabels select the Service's endpoint.
	backendLabels = map[string]string{"app": "chaos-backend"}
)

// Setup builds the lab (two dual-stack nodes), the pods, the isolating policy, and starts the
// monitor. Close removes it all.
func Setup(ctx context.Context, o Options) (_ *Campaign, err error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	l, err := lab.New(ctx, lab.Options{Families: lab.DualStack, Typha: o.Typha, TwoSubnets: o.Topology == ToR, EtcdRelay: true, Log: o.Log})
	if err != nil {
		return nil, err
	}
	c := &Campaign{Lab: l, log: o.Log}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = c.Close(cctx)
		}
	}()
	specs := []lab.NodeSpec{{Name: "node-1"}, {Name: "node-2"}}
	if o.Topology != Mesh {
		if err := l.UseRouteReflectors(ctx); err != nil {
			return nil, err
		}
		specs = append(specs, lab.NodeSpec{Name: "rr-1", RouteReflectorClusterID: reflectorClusterID},
			lab.NodeSpec{Name: "rr-2", RouteReflectorClusterID: reflectorClusterID})
	}
	if o.Topology == ToR {
		specs[1].Subnet, specs[3].Subnet = lab.B, lab.B
		if err := c.peerWithToR(ctx); err != nil {
			return nil, err
		}
	}
	nodes, err := l.AddNodes(ctx, specs...)
	if err != nil {
		return nil, err
	}
	c.Clients, c.Servers, c.Reflectors = nodes[0], nodes[1], nodes[2:]
	if o.Topology == ToR {
		if err := l.Router().StartFRR(ctx, lab.FRROptions{Zebra: true, Neighbors: []lab.BGPNeighbor{
			{Addr: c.Reflectors[0].IP(), ASN: v1.DefaultASNumber}, {Addr: c.Reflectors[1].IP(), ASN: v1.DefaultASNumber},
			{Addr: c.Reflectors[1].IP6(), ASN: v1.DefaultASNumber},
		}}); err != nil {
			return nil, err
		}
	}
	pods, err := l.AddPods(ctx,
		lab.PodSpec{Name: "client", Node: c.Clients.Name},
		lab.PodSpec{Name: "server", Node: c.Servers.Name},
		lab.PodSpec{Name: "isolated", Node: c.Servers.Name, Labels: isolatedLabels},
		lab.PodSpec{Name: "baseline", Node: c.Servers.Name, Labels: baselineLabels},
		lab.PodSpec{Name: "backend", Node: c.Servers.Name, Labels: backendLabels},
	)
	if err != nil {
		return nil, err
	}
	client, server, isolated, baseline, backend := pods[0], pods[1], pods[2], pods[3], pods[4]
	svcIPs, err := c.serve(ctx, backend)
	if err != nil {
		return nil, err
	}
	for i, v6 := range []bool{false, true} {
		c.Pairs = append(c.Pairs, Pair{Client: client, Server: server, IPv6: v6}, Pair{Client: client, Server: backend, IPv6: v6, Service: svcIPs[i]})
		c.Isolated = append(c.Isolated, Pair{Client: client, Server: isolated, IPv6: v6}, Pair{Client: client, Server: baseline, IPv6: v6})
	}
	for _, p := range c.Pairs {
		if err := lab.Eventually(ctx, time.Minute, func(context.Context) error { return lab.Ping(ctx, p.Client.NS, p.dst(0).Addr()) }); err != nil {
			return nil, fmt.Errorf("%s→%s %s before any fault: %w", p.Client.Name, p.Server.Name, p.family(), err)
		}
	}
	if len(c.Pairs) != udpStreams {
		return nil, fmt.Errorf("%d probed pairs, the faults' budgets count %d", len(c.Pairs), udpStreams)
	}
	if err := c.isolate(ctx); err != nil {
		return nil, err
	}
	if c.Monitor, err = StartMonitor(ctx, c.Pairs, c.Isolated); err != nil {
		return nil, err
	}
	return c, nil
}

// serve puts a dual-stack Service in front of backend (the monitor's UDP and TCP ports) and
// runs kube-proxy on the clients' node; it returns the Service's IPv4 and IPv6 ClusterIPs once
// kube-proxy translates both.
func (c *Campaign) serve(ctx context.Context, backend *lab.Pod) ([2]netip.Addr, error) {
	var ips [2]netip.Addr
	dual := corev1.IPFamilyPolicyRequireDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-svc", Namespace: lab.PodNamespace},
		Spec: corev1.ServiceSpec{
			Selector:       backendLabels,
			IPFamilyPolicy: &dual,
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports: []corev1.ServicePort{
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: UDPPort, TargetPort: intstr.FromInt32(UDPPort)},
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: TCPPort, TargetPort: intstr.FromInt32(TCPPort)},
			},
		},
	}
	created, err := c.Lab.Kube.CoreV1().Services(lab.PodNamespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return ips, fmt.Errorf("create Service %s: %w", svc.Name, err)
	}
	if len(created.Spec.ClusterIPs) != 2 {
		return ips, fmt.Errorf("the Service %s: ClusterIPs %v, want one per family", svc.Name, created.Spec.ClusterIPs)
	}
	for i, s := range created.Spec.ClusterIPs {
		if ips[i], err = netip.ParseAddr(s); err != nil {
			return ips, fmt.Errorf("the Service %s: ClusterIP %q: %w", svc.Name, s, err)
		}
	}
	if err := c.Lab.WriteEndpointSlices(ctx, created, []*lab.Pod{backend}); err != nil {
		return ips, err
	}
	if err := c.Lab.StartKubeProxy(ctx, c.Clients); err != nil {
		return ips, err
	}
	err = lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
		for i, ipt := range []string{"iptables-save", "ip6tables-save"} {
			out, err := c.Clients.Exec(ctx, ipt, "-t", "nat")
			if err != nil {
				return err
			}
			if !strings.Contains(out, "-d "+netip.PrefixFrom(ips[i], ips[i].BitLen()).String()) {
				return fmt.Errorf("kube-proxy on %s does not translate %s yet", c.Clients.Name, ips[i])
			}
		}
		return nil
	})
	return ips, err
}

// peerWithToR makes the reflectors peer with the router: rr-1 over IPv4, rr-2 over IPv4 and
// IPv6, each keeping the nodes' own next hops, so the ToR forwards pod traffic straight to the
// node that owns the block.
func (c *Campaign) peerWithToR(ctx context.Context) error {
	for name, p := range map[string]v1.BGPPeerSpec{
		"tor-a":  {Node: "rr-1", PeerIP: lab.RouterA.String(), ASNumber: lab.DefaultToRASN, KeepOriginalNextHop: true},
		"tor-b":  {Node: "rr-2", PeerIP: lab.RouterB.String(), ASNumber: lab.DefaultToRASN, KeepOriginalNextHop: true},
		"tor-b6": {Node: "rr-2", PeerIP: "[" + lab.RouterB6.String() + "]:179", ASNumber: lab.DefaultToRASN, KeepOriginalNextHop: true},
	} {
		if _, err := c.Lab.Client.BGPPeers().Create(ctx, &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: p}); err != nil {
			return fmt.Errorf("BGPPeer %s: %w", name, err)
		}
	}
	return nil
}

// isolate proves the isolated pairs connect without policy (the probe can see a leak), then
// applies a default-deny ingress NetworkPolicy to one server and a BaselineAdminNetworkPolicy
// denying every namespace's ingress to the other, and waits until every connect fails.
func (c *Campaign) isolate(ctx context.Context) error {
	for _, p := range c.Isolated {
		ln, err := ListenIsolated(p)
		if err != nil {
			return err
		}
		c.closers = append(c.closers, ln)
		if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error { return ConnectIsolated(ctx, p) }); err != nil {
			return fmt.Errorf("isolated pair %s→%s %s before its policy: connect: %w", p.Client.Name, p.Server.Name, p.family(), err)
		}
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-isolate", Namespace: lab.PodNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: isolatedLabels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if _, err := c.Lab.Kube.NetworkingV1().NetworkPolicies(lab.PodNamespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the isolating policy: %w", err)
	}
	all := &metav1.LabelSelector{}
	banp := &anpv1alpha1.BaselineAdminNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
			Subject: anpv1alpha1.AdminNetworkPolicySubject{Pods: &anpv1alpha1.NamespacedPod{
				PodSelector: metav1.LabelSelector{MatchLabels: baselineLabels},
			}},
			Ingress: []anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{{
				Name: "deny-all", Action: anpv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny,
				From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: all}},
			}},
		},
	}
	if _, err := c.Lab.Client.BaselineAdminNetworkPolicies().Create(ctx, banp); err != nil {
		return fmt.Errorf("create the isolating BaselineAdminNetworkPolicy: %w", err)
	}
	for _, p := range c.Isolated {
		err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			for range 3 {
				if ConnectIsolated(ctx, p) == nil {
					return fmt.Errorf("isolated pair %s→%s %s: a connect still succeeds", p.Client.Name, p.Server.Name, p.family())
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Close stops the monitor and removes the lab.
func (c *Campaign) Close(ctx context.Context) error {
	if c.Monitor != nil {
		c.Monitor.Stop()
	}
	for _, cl := range c.closers {
		_ = cl.Close()
	}
	return c.Lab.Close(ctx)
}

// name is a fresh name for something a fault makes.
func (c *Campaign) name(prefix string) string {
	c.seq++
	return fmt.Sprintf("%s-%d", prefix, c.seq)
}

// settled waits until the cluster is whole again: every agent ready, the API server
// answering, and, after a fault that touched IPAM, `tabbyctl ipam check` clean.
func (c *Campaign) settled(ctx context.Context, ipam bool) error {
	for _, n := range c.Lab.Nodes() {
		if err := n.WaitReady(ctx); err != nil {
			return err
		}
	}
	if err := lab.Eventually(ctx, 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Lab.Kube.Discovery().ServerVersion()
		return err
	}); err != nil {
		return fmt.Errorf("API server: %w", err)
	}
	if !ipam {
		return nil
	}
	return lab.Eventually(ctx, 2*time.Minute, func(ctx context.Context) error {
		out, err := c.Lab.Tabbyctl(ctx, "ipam", "check")
		if err != nil || !strings.Contains(out, "No problems found") {
			return fmt.Errorf("tabbyctl ipam check: %v\n%s", err, out)
		}
		return nil
	})
}

// Run injects the fault f.Rounds times (at least once) while the monitor runs, waits for the
// cluster to settle after each, and measures the window from just before the first injection
// to a few seconds after the last recovery.
func (c *Campaign) Run(ctx context.Context, f Fault) Result {
	r := Result{Fault: f}
	if f.Prepare != nil {
		if err := f.Prepare(ctx, c); err != nil {
			r.Err = fmt.Errorf("prepare: %w", err)
			return r
		}
	}
	const margin = 2 * time.Second
	from := time.Now()
	if err := sleep(ctx, margin); err != nil {
		r.Err = err
		return r
	}
	rounds := max(f.Rounds, 1)
	var healed []time.Time
	var settledAt []time.Time
	var notes []string
	for i := range rounds {
		c.log.Info("fault", "name", f.Name, "round", i+1, "of", rounds)
		h, note, err := f.Inject(ctx, c)
		if note != "" {
			notes = append(notes, note)
		}
		if err != nil {
			r.Err = fmt.Errorf("round %d: %w", i+1, err)
			break
		}
		if err := c.settled(ctx, f.IPAM); err != nil {
			r.Err = fmt.Errorf("round %d: not settled: %w", i+1, err)
			break
		}
		healed, settledAt = append(healed, h), append(settledAt, time.Now())
		if i+1 < rounds {
			if err := sleep(ctx, margin); err != nil {
				r.Err = err
				break
			}
		}
	}
	r.Notes = dedupe(notes)
	if err := sleep(ctx, margin+time.Second); err != nil && r.Err == nil {
		r.Err = err
	}
	to := time.Now()
	stats, err := c.Monitor.Window(ctx, from, to)
	if err != nil {
		r.Err = errors.Join(r.Err, err)
		return r
	}
	r.Stats, r.Window = stats, to.Sub(from)
	for _, s := range stats {
		if s.Late > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %d answered later than %s (not counted as lost)", s.Name, s.Late, probeTimeout))
		}
		if !s.FirstBad.IsZero() {
			what := "failed"
			if s.Kind == Isolated {
				what = "wrongly allowed"
			}
			rel := func(t time.Time) string { return t.Sub(from).Round(10 * time.Millisecond).String() }
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %d of %d %s, from +%s to +%s of the window (faults at %s)",
				s.Name, max(s.Failed, s.Allowed), s.Exchanges, what, rel(s.FirstBad), rel(s.LastBad), strings.Join(mapTimes(healed, rel), ", ")))
		}
	}
	if err := CheckRan(stats, r.Window); err != nil {
		r.Err = errors.Join(r.Err, err)
	}
	for _, s := range stats {
		switch s.Kind {
		case UDPProbes:
			r.Probes += s.Exchanges
			r.Lost += s.Failed
		case TCPFlow:
			r.Resets += s.Resets
		case Isolated:
			r.Connects += s.Exchanges
			r.Allowed += s.Allowed
		}
	}
	// Recovery of the last round: healed → the later of settled and the first exchange that
	// succeeded after the last failure of any flow.
	if n := len(healed); n > 0 {
		h, back := healed[n-1], settledAt[n-1]
		for _, s := range stats {
			if s.Kind == Isolated || s.LastBad.IsZero() || s.LastBad.Before(h) && s.FirstGoodAfter.Before(h) {
				continue
			}
			if s.FirstGoodAfter.IsZero() {
				r.Err = errors.Join(r.Err, fmt.Errorf("%s: no exchange succeeded after its last failure", s.Name))
				continue
			}
			if s.FirstGoodAfter.After(back) {
				back = s.FirstGoodAfter
			}
		}
		r.Recovery = max(back.Sub(h), 0)
	}
	return r
}

func mapTimes(ts []time.Time, f func(time.Time) string) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = "+" + f(t)
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// RunTopologies runs the faults of each topology in a lab of its own (Options.Topology is
// ignored), the mesh's first.
func RunTopologies(ctx context.Context, o Options, faults []Fault) ([]Result, error) {
	var rs []Result
	for _, t := range []Topology{Mesh, Reflectors, ToR} {
		o.Topology = t
		more, err := RunAll(ctx, o, faults)
		rs = append(rs, more...)
		if err != nil {
			return rs, fmt.Errorf("%s: %w", t, err)
		}
	}
	return rs, nil
}

// RunAll sets a campaign up, runs the faults one at a time and removes it; a fault whose outcome
// breaks its expectation does not stop the ones after it.
func RunAll(ctx context.Context, o Options, faults []Fault) ([]Result, error) {
	faults = slices.DeleteFunc(slices.Clone(faults), func(f Fault) bool { return f.Topology != o.Topology })
	if len(faults) == 0 {
		return nil, nil
	}
	c, err := Setup(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Close(cctx); err != nil {
			c.log.Error("lab teardown", "err", err)
		}
	}()
	var rs []Result
	for _, f := range faults {
		r := c.Run(ctx, f)
		c.log.Info("fault done", "name", f.Name, "lost", r.Lost, "resets", r.Resets, "allowed", r.Allowed, "recovery", r.Recovery, "ok", r.OK())
		if !r.OK() {
			for _, n := range c.Lab.Nodes() {
				c.log.Warn("fault not as expected: agent log", "node", n.Name, "tail", n.LogTail(60))
			}
		}
		rs = append(rs, r)
		if ctx.Err() != nil {
			return rs, ctx.Err()
		}
	}
	return rs, nil
}
