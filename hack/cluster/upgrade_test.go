package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/hack/chaos"
	"github.com/tabbynet/tabby/hack/lab"
)

var (
	upgradeOld   = flag.String("upgrade-old", "v0.1.0", "the version TestUpgrade installs first and downgrades back to: a release tag or commit")
	upgradeNew   = flag.String("upgrade-new", "", "the version TestUpgrade upgrades to: a tag or commit; empty for the working tree (make build's bin/)")
	upgradeNodes = flag.Int("upgrade-nodes", 2, "nodes of TestUpgrade's cluster")
	// A tabby-node's restart keeps its routes in the kernel and at its peers (BGP graceful
	// restart): the bound is slack for a busy machine, not loss the design expects.
	upgradeMaxLost = flag.Int("upgrade-max-lost", 250, "UDP probes a pair may lose during a roll (50 a second)")
)

// TestUpgrade is `make upgrade`: tabby installed with helm at an earlier version, then `helm
// upgrade` to the working tree (or -upgrade-new) rolling the DaemonSet one node at a time, then
// `helm rollback` to the earlier version, while traffic runs: a long-lived TCP connection and
// UDP probes from a pod on every node to a pod on the next, the same through a ClusterIP Service,
// and connects to a pod a NetworkPolicy isolates; pods are created and deleted on every node
// during each roll. Each roll must replace tabby-node one node at a time, reset no connection,
// lose at most -upgrade-max-lost probes per pair, let no connect to the isolated pod through,
// get every churned pod Ready, and leave every node's routes as the datastore says, IPAM and the
// policy dataplane consistent and every BGP session established.
func TestUpgrade(t *testing.T) {
	if os.Getenv("TABBY_CLUSTER_UPGRADE") == "" {
		t.Skip("minutes long: make upgrade runs it (TABBY_CLUSTER_UPGRADE=1)")
	}
	repo, err := lab.FindRepo()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	old := checkout(ctx, t, repo, *upgradeOld)
	bin := os.Getenv("TABBY_BIN")
	if bin == "" {
		bin = repo + "/bin"
	}
	cur := WorkingTree(repo, bin)
	if *upgradeNew != "" {
		cur = checkout(ctx, t, repo, *upgradeNew)
	}

	c := startCluster(t, Options{NoTabby: true, Nodes: *upgradeNodes})
	for _, v := range []Version{old, cur} {
		if v.ImageTag != c.ImageTag { // the cluster imported the working tree's image
			if err := c.ImportVersion(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()
	if err := c.InstallVersion(ctx, old, "node.updateStrategy.maxUnavailable=1"); err != nil {
		t.Fatalf("install %s: %v", old.Name, err)
	}
	t.Logf("%s installed by helm in %s", old.Name, time.Since(start).Round(time.Second))

	// A BGPFilter no peer uses, beside the chart's pool and BGPConfiguration: objects whose
	// every field must survive both rolls.
	filter := filepath.Join(t.TempDir(), "filter.yaml")
	if err := os.WriteFile(filter, []byte(upgradeFilter), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "apply", "-f", filter); err != nil {
		t.Fatal(err)
	}
	specs, err := c.ConfigSpecs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := startTraffic(ctx, t, c)
	tr.specs = specs
	defer tr.stop()
	tr.window(ctx, t, "steady, before the upgrade", 10*time.Second, nil)

	tr.roll(ctx, t, fmt.Sprintf("helm upgrade %s → %s", old.Name, cur.Name), old, cur, func() error {
		// What a user is told to do first: helm never upgrades CRDs.
		if err := c.ApplyCRDs(ctx, cur.Chart); err != nil {
			return err
		}
		return c.Helm(ctx, "upgrade", cur.Chart, cur.ImageTag, "--set", "node.updateStrategy.maxUnavailable=1")
	})
	tr.roll(ctx, t, fmt.Sprintf("helm rollback %s → %s", cur.Name, old.Name), cur, old, func() error {
		// The CRDs stay at the newer version: a downgrade must not drop fields objects hold.
		return c.Rollback(ctx, 1)
	})
}

// checkout checks a version out and builds it, removing the checkout when the test ends.
func checkout(ctx context.Context, t *testing.T, repo, ref string) Version {
	t.Helper()
	start := time.Now()
	v, remove, err := CheckoutVersion(ctx, repo, ref, t.TempDir())
	if remove != nil {
		t.Cleanup(func() {
			if err := remove(); err != nil {
				t.Errorf("remove the checkout of %s: %v", ref, err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s checked out and built in %s", ref, time.Since(start).Round(time.Second))
	return v
}

// traffic is the monitor and what it runs between.
type traffic struct {
	c       *Cluster
	m       *chaos.Monitor
	closers []func() error
	// specs are the configuration objects' specs before the first roll.
	specs map[string]any
}

const upgradeFilter = `apiVersion: tabby.dev/v1
kind: BGPFilter
metadata: {name: upgrade-kept}
spec:
  importV4:
    - {action: Accept, matchOperator: Equal, cidr: 0.0.0.0/0}
  exportV4:
    - {action: Reject, matchOperator: In, cidr: 10.244.128.0/17}
`

const upgradeNS = "upgrade"

// startTraffic starts pods (a peer on every node; behind a Service and isolated by a policy,
// a pod on the last node) and the monitor between them.
func startTraffic(ctx context.Context, t *testing.T, c *Cluster) *traffic {
	t.Helper()
	kube := c.Lab.Kube
	tr := &traffic{c: c}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upgradeNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	last := c.Nodes[len(c.Nodes)-1].Name
	type podSpec struct{ name, node, role string }
	var specs []podSpec
	for _, n := range c.Nodes {
		specs = append(specs, podSpec{"peer-" + n.Name, n.Name, "peer"})
	}
	specs = append(specs, podSpec{"web-" + last, last, "web"}, podSpec{"isolated-" + last, last, "isolated"})
	for _, s := range specs {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: map[string]string{"role": s.role}},
			Spec: corev1.PodSpec{
				NodeName: s.node,
				Containers: []corev1.Container{{
					Name: "pause", Image: AgnhostImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
				}},
			},
		}
		if _, err := kube.CoreV1().Pods(upgradeNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := kube.CoreV1().Services(upgradeNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"role": "web"},
			Ports: []corev1.ServicePort{
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: chaos.UDPPort, TargetPort: intstr.FromInt32(chaos.UDPPort)},
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: chaos.TCPPort, TargetPort: intstr.FromInt32(chaos.TCPPort)},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]*lab.Pod{}
	if err := lab.Eventually(ctx, 2*time.Minute, func(ctx context.Context) error {
		for _, s := range specs {
			p, err := kube.CoreV1().Pods(upgradeNS).Get(ctx, s.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !podReady(p) || len(p.Status.PodIPs) == 0 {
				return fmt.Errorf("pod %s not ready (%s)", p.Name, p.Status.Phase)
			}
			if pods[s.name] != nil {
				continue
			}
			lp := &lab.Pod{Name: s.name, Namespace: upgradeNS, NS: fmt.Sprintf("upg-%s-%s", c.Lab.ID, s.name)}
			for _, ip := range p.Status.PodIPs {
				a, err := netip.ParseAddr(ip.IP)
				if err != nil {
					return lab.Stop(err)
				}
				if a.Is4() {
					lp.IP = a
				} else {
					lp.IP6 = a
				}
			}
			detach, err := c.AttachPodNetns(ctx, p, lp.NS)
			if err != nil {
				return err
			}
			tr.closers = append(tr.closers, detach)
			pods[s.name] = lp
		}
		return nil
	}); err != nil {
		tr.stop()
		t.Fatal(err)
	}
	families := []bool{false}
	if pods[specs[0].name].IP6.IsValid() {
		families = append(families, true)
	} else {
		t.Log("the cluster is IPv4 only: every stream is IPv4")
	}
	var pairs, isolated []chaos.Pair
	for i, n := range c.Nodes {
		next := c.Nodes[(i+1)%len(c.Nodes)]
		for _, v6 := range families {
			pairs = append(pairs, chaos.Pair{Client: pods["peer-"+n.Name], Server: pods["peer-"+next.Name], IPv6: v6})
		}
	}
	first := pods["peer-"+c.Nodes[0].Name]
	for _, v6 := range families {
		via := svc.Spec.ClusterIP
		for _, ip := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is6() == v6 {
				via = ip
			}
		}
		pairs = append(pairs, chaos.Pair{Client: first, Server: pods["web-"+last], IPv6: v6, Service: netip.MustParseAddr(via)})
		isolated = append(isolated, chaos.Pair{Client: first, Server: pods["isolated-"+last], IPv6: v6})
	}
	tr.waitService(ctx, t, pairs[len(pairs)-1])
	tr.isolate(ctx, t, isolated)
	if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
		m, err := chaos.StartMonitor(context.WithoutCancel(ctx), pairs, isolated)
		tr.m = m
		return err
	}); err != nil {
		tr.stop()
		t.Fatal(err)
	}
	return tr
}

// waitService waits until kube-proxy forwards the Service to its pod: a connect to the
// ClusterIP reaches a listener in the pod, made for this and closed before the monitor starts.
func (tr *traffic) waitService(ctx context.Context, t *testing.T, p chaos.Pair) {
	t.Helper()
	dst := netip.AddrPortFrom(p.Server.IP, chaos.TCPPort)
	via := netip.AddrPortFrom(p.Service, chaos.TCPPort)
	var ln net.Listener
	if err := lab.InNetns(p.Server.NS, func() error {
		var err error
		ln, err = net.Listen("tcp", dst.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
		return lab.InNetns(p.Client.NS, func() error {
			c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", via.String())
			if err != nil {
				return err
			}
			return c.Close()
		})
	}); err != nil {
		t.Fatalf("Service %s → %s: %v", via, dst, err)
	}
}

// isolate proves the isolated pod is reachable without policy (the probe can see a leak), then
// applies a default-deny ingress policy to it and waits until every connect fails.
func (tr *traffic) isolate(ctx context.Context, t *testing.T, ps []chaos.Pair) {
	t.Helper()
	for _, p := range ps {
		ln, err := chaos.ListenIsolated(p)
		if err != nil {
			t.Fatal(err)
		}
		tr.closers = append(tr.closers, ln.Close)
		if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error { return chaos.ConnectIsolated(ctx, p) }); err != nil {
			t.Fatalf("isolated pod before its policy: %v", err)
		}
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "isolate"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "isolated"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if _, err := tr.c.Lab.Kube.NetworkingV1().NetworkPolicies(upgradeNS).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			for range 3 {
				if chaos.ConnectIsolated(ctx, p) == nil {
					return fmt.Errorf("a connect to the isolated pod still succeeds")
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func (tr *traffic) stop() {
	if tr.m != nil {
		tr.m.Stop()
	}
	for _, cl := range tr.closers {
		_ = cl() // the pods and their names go with the cluster all the same
	}
}

// roll runs do (a helm upgrade or rollback from version from to v), waits until the cluster runs
// v everywhere and is whole again, and judges the traffic over the whole of it. Every tabby-node
// pod must have been replaced, one node at a time.
func (tr *traffic) roll(ctx context.Context, t *testing.T, what string, from, v Version, do func() error) {
	t.Helper()
	c := tr.c
	before, err := c.AgentPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var start time.Time
	tr.window(ctx, t, what, 0, func() error {
		start = time.Now()
		ch := startChurn(ctx, c)
		err := do()
		if err == nil {
			if err = c.WaitRollout(ctx, v.ImageTag, 10*time.Minute); err != nil {
				err = fmt.Errorf("rollout: %w", err)
			}
		}
		rolled := time.Since(start)
		churned, retried, cerr := ch.stop(ctx)
		if err != nil {
			return err
		}
		t.Logf("%s: rolled out in %s; pod churn meanwhile: %s", what, rolled.Round(100*time.Millisecond), churned)
		if cerr != nil {
			return fmt.Errorf("pod churn during the roll: %w", cerr)
		}
		// With tabby-node away the plugins go to the API server themselves, with the token
		// the version being replaced gave them: a roll fails no CNI ADD once that token
		// outlives its pod.
		if retried > 0 {
			if outlivesPod, err := cniTokenOutlivesPod(from); err != nil {
				return err
			} else if outlivesPod {
				t.Errorf("%s: %d pod sandboxes failed during the roll", what, retried)
			} else {
				t.Logf("%s: %s gives the CNI plugins its pod's token, refused once the pod is deleted: sandboxes failed until the next pod wrote a new one", what, from.Name)
			}
		}
		settle := time.Now()
		err = lab.Eventually(ctx, 2*time.Minute, func(ctx context.Context) error {
			return errors.Join(c.CheckRoutes(ctx), c.CheckIPAM(ctx), c.CheckBGP(ctx), c.CheckPolicy(ctx, v), c.CheckCRDVersions(ctx))
		})
		if err != nil {
			return err
		}
		specs, err := c.ConfigSpecs(ctx)
		if err != nil {
			return err
		}
		if lost := LostFields(tr.specs, specs); len(lost) > 0 {
			return fmt.Errorf("configuration lost in the roll: %s", strings.Join(lost, "; "))
		}
		bound, err := c.CNITokenBoundTo()
		if err != nil {
			return err
		}
		if own, err := cniTokenOutlivesPod(v); err != nil {
			return err
		} else if own {
			for node, pod := range bound {
				if pod != "" {
					return fmt.Errorf("node %s: the CNI plugins' token is bound to pod %s, and is refused once it is deleted", node, pod)
				}
			}
			t.Logf("%s: every node's CNI kubeconfig holds a token of its own, bound to no pod", what)
		}
		t.Logf("%s: routes as the blocks say, ipam check and policy check clean, every BGP session established %s after the rollout; %d configuration objects kept every field", what, time.Since(settle).Round(100*time.Millisecond), len(tr.specs))
		return nil
	})
	after, err := c.AgentPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mu, err := c.AgentMaxUnavailable(ctx); err != nil || mu != "1" {
		t.Errorf("%s: tabby-node's DaemonSet rolls with maxUnavailable %q (%v), want 1", what, mu, err)
	}
	var b strings.Builder
	for i, a := range after {
		for _, o := range before {
			if o.UID == a.UID {
				t.Errorf("%s: tabby-node pod %s on %s was not replaced", what, a.Name, a.Node)
			}
		}
		fmt.Fprintf(&b, " %s: created +%s, ready +%s;", a.Node, a.Created.Sub(start).Truncate(time.Second), a.ReadyAt.Sub(start).Truncate(time.Second))
		// The API's timestamps are whole seconds: the next node's pod is never created before
		// this one was ready.
		if i > 0 && a.Created.Before(after[i-1].ReadyAt) {
			t.Errorf("%s: tabby-node on %s was created at %s, before the one on %s was ready (%s): more than one node at a time", what, a.Node, a.Created, after[i-1].Node, after[i-1].ReadyAt)
		}
	}
	t.Logf("%s: tabby-node replaced one node at a time (maxUnavailable 1):%s", what, strings.TrimSuffix(b.String(), ";"))
}

// window measures the traffic over do (or, when nil, over d), with margins either side, and
// fails the test on a reset, a connect to the isolated pod, or more lost probes than allowed.
func (tr *traffic) window(ctx context.Context, t *testing.T, what string, d time.Duration, do func() error) {
	t.Helper()
	const margin = 2 * time.Second
	from := time.Now()
	wait := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	wait(margin)
	if do != nil {
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	} else {
		wait(d)
	}
	wait(margin)
	to := time.Now()
	stats, err := tr.m.Window(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if err := chaos.CheckRan(stats, to.Sub(from)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s of traffic\n", what, to.Sub(from).Round(100*time.Millisecond))
	for _, s := range stats {
		switch s.Kind {
		case chaos.UDPProbes:
			fmt.Fprintf(&b, "  %-52s %d of %d lost, %d late\n", s.Name, s.Failed, s.Exchanges, s.Late)
			if s.Failed > *upgradeMaxLost {
				t.Errorf("%s: %s lost %d probes, more than %d", what, s.Name, s.Failed, *upgradeMaxLost)
			}
		case chaos.TCPFlow:
			fmt.Fprintf(&b, "  %-52s %d resets, %d of %d exchanges failed\n", s.Name, s.Resets, s.Failed, s.Exchanges)
			if s.Resets > 0 || s.Failed > 0 {
				t.Errorf("%s: %s: %d resets, %d failed exchanges, want none", what, s.Name, s.Resets, s.Failed)
			}
		case chaos.Isolated:
			fmt.Fprintf(&b, "  %-52s %d of %d connects allowed\n", s.Name, s.Allowed, s.Exchanges)
			if s.Allowed > 0 {
				t.Errorf("%s: %s: %d connects to the isolated pod succeeded", what, s.Name, s.Allowed)
			}
		}
	}
	t.Log(b.String())
}

// cniTokenOutlivesPod tells whether a version gives the CNI plugins a token of their own rather
// than the pod's (its chart lets tabby-node request one).
func cniTokenOutlivesPod(v Version) (bool, error) {
	b, err := os.ReadFile(filepath.Join(v.Chart, "templates", "rbac.yaml"))
	if err != nil {
		return false, err
	}
	return strings.Contains(string(b), "serviceaccounts/token"), nil
}
