package cluster

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
)

// LoadBalancerTestEnv set to 1 runs TestLoadBalancerOverBGP (`make cluster-lb`): minutes of a
// real cluster and many scalings, more than `make test` spends on one feature.
const LoadBalancerTestEnv = "TABBY_CLUSTER_LB"

var lbRounds = flag.Int("lb-rounds", 8, "TestLoadBalancerOverBGP: scale-down/scale-up rounds under externalTrafficPolicy Local")

// lbPool is the test's LoadBalancer pool: the top of 203.0.113.0/24, the lab's "internet" subnet
// behind the router, where no host has an address (the internet host is .100). The /32 the ToR
// learns by BGP is more specific than the subnet's connected route.
var lbPool = netip.MustParsePrefix("203.0.113.240/28")

// lbConvergenceBound is what the test asserts of an EndpointSlice change reaching the ToR's RIB:
// generous, for a loaded 2-core machine; the figures go to the log.
const lbConvergenceBound = 10 * time.Second

// A Service of type LoadBalancer with only tabby installed: it gets an address from a
// LoadBalancer IPPool, every node peers eBGP with an FRR ToR, and the ToR reaches the
// Deployment behind it through kube-proxy. Under externalTrafficPolicy Cluster every node
// announces the address and the ToR routes it over all of them (ECMP); under Local only the
// nodes with a ready endpoint do, the ToR follows the pods as the Deployment scales, and the pods
// see the ToR's own address as the client.
func TestLoadBalancerOverBGP(t *testing.T) {
	if os.Getenv(LoadBalancerTestEnv) != "1" {
		t.Skipf("minutes of a real cluster: run with %s=1 (make cluster-lb)", LoadBalancerTestEnv)
	}
	c := startCluster(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	kube := c.Lab.Kube
	tor := c.Lab.Router()
	nodeIP := map[string]string{}
	var neighbors []lab.BGPNeighbor
	for _, n := range c.Nodes {
		nodeIP[n.Name] = n.IP().String()
		neighbors = append(neighbors, lab.BGPNeighbor{Addr: n.IP(), ASN: v1.DefaultASNumber})
	}
	allNodes := slices.Sorted(maps.Keys(nodeIP))

	if err := tor.StartFRR(ctx, lab.FRROptions{Zebra: true, Neighbors: neighbors, MaximumPaths: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lab.Client.BGPPeers().Create(ctx, &v1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Name: "tor"},
		Spec:       v1.BGPPeerSpec{PeerIP: lab.RouterA.String(), ASNumber: lab.DefaultToRASN},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lab.Client.IPPools().Create(ctx, &v1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec:       v1.IPPoolSpec{CIDR: lbPool.String(), AllowedUses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
		return torEstablished(ctx, tor, neighbors)
	}); err != nil {
		t.Fatalf("BGP sessions to the ToR: %v", err)
	}

	const ns, name = "lb", "web"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, webDeployment(name, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			Selector:              map[string]string{"app": name},
			Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
		},
	}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eps := watchReadyNodes(ctx, t, c, ns, name)
	if _, err := eps.waitAfter(ctx, 0, 2*time.Minute, func(nodes []string) bool { return slices.Equal(nodes, allNodes) }); err != nil {
		t.Fatalf("a ready endpoint on every node: %v", err)
	}

	var lbIP netip.Addr
	if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
		s, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("service %s/%s has no status.loadBalancer.ingress", ns, name)
		}
		a, err := netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		if err != nil || !lbPool.Contains(a) {
			return lab.Stop(fmt.Errorf("service %s/%s got %+v, not an address of the pool %s", ns, name, s.Status.LoadBalancer.Ingress, lbPool))
		}
		lbIP = a
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("service %s/%s has LoadBalancer address %s", ns, name, lbIP)

	// externalTrafficPolicy Cluster: every node announces the address, the ToR installs them
	// all, and kube-proxy on whichever node a connection reaches spreads it over both pods.
	if _, err := waitToR(ctx, tor, lbIP, nodeIPs(nodeIP, allNodes), time.Minute); err != nil {
		t.Fatalf("Cluster: %v", err)
	}
	if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		gws, err := torKernelNextHops(ctx, tor, lbIP)
		if err != nil {
			return err
		}
		if want := nodeIPs(nodeIP, allNodes); !slices.Equal(gws, want) {
			return fmt.Errorf("the ToR's kernel routes %s via %v, want a multipath route via %v", lbIP, gws, want)
		}
		return nil
	}); err != nil {
		t.Error(err)
	} else {
		t.Logf("Cluster: the ToR's kernel routes %s over every node: %v", lbIP, nodeIPs(nodeIP, allNodes))
	}
	// kube-proxy may still know one pod when the EndpointSlice has both (it syncs at most once a
	// second): requests go on until both answered.
	pods := podNames(ctx, t, c, ns, name)
	seen := map[string]int{}
	if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		got, err := hostnamesFromToR(ctx, tor, lbIP, 10)
		for p, n := range got {
			seen[p] += n
		}
		if err != nil {
			return lab.Stop(err)
		}
		if !slices.Equal(slices.Sorted(maps.Keys(seen)), pods) {
			return fmt.Errorf("requests from the ToR reached %v, want both pods %v", seen, pods)
		}
		return nil
	}); err != nil {
		t.Errorf("Cluster: HTTP from the ToR to %s: %v", lbIP, err)
	} else {
		t.Logf("Cluster: requests from the ToR reached both pods: %v", seen)
	}
	if ip, err := clientIPFromToR(ctx, tor, lbIP); err == nil {
		t.Logf("Cluster: the pod saw the client as %s (kube-proxy masquerades)", ip)
	}

	// externalTrafficPolicy Local: only nodes with a ready endpoint announce it.
	if err := setTrafficPolicy(ctx, c, ns, name, corev1.ServiceExternalTrafficPolicyLocal); err != nil {
		t.Fatal(err)
	}
	if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		ip, err := clientIPFromToR(ctx, tor, lbIP)
		if err != nil {
			return err
		}
		if ip != lab.RouterA.String() {
			return fmt.Errorf("the pod saw the client as %s, want the ToR's own address %s", ip, lab.RouterA)
		}
		return nil
	}); err != nil {
		t.Errorf("Local: client source: %v", err)
	} else {
		t.Logf("Local: the pod sees the ToR's own address %s as the client", lab.RouterA)
	}

	// The ToR's kernel is watched through rtnetlink: when zebra installed each change.
	kernel, err := benchutil.WatchRoutes(map[string]string{"tor": lab.NetnsPath(tor.NS)}, zebraProtoBGP, lbPool)
	if err != nil {
		t.Fatal(err)
	}
	defer kernel.Close()
	hostRoute := netip.PrefixFrom(lbIP, lbIP.BitLen())
	var down, up, downKernel, upKernel []time.Duration
	for round := 1; round <= *lbRounds; round++ {
		mark := eps.mark()
		if err := scaleDeployment(ctx, c, ns, name, 1); err != nil {
			t.Fatal(err)
		}
		d, ch, err := converge(ctx, eps, tor, lbIP, nodeIP, mark, func(nodes []string) bool { return len(nodes) == 1 })
		if err != nil {
			t.Fatalf("round %d, scaled to 1: %v", round, err)
		}
		nodes := ch.nodes
		down = append(down, d)
		// zebra installs what bgpd chose a moment later: the kernel's route, then traffic.
		at, err := kernelRouteAt(ctx, kernel, hostRoute, nodeIPs(nodeIP, nodes))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		downKernel = append(downKernel, at.Sub(ch.at))
		t.Logf("round %d: scaled to 1, endpoint on %v: the ToR's RIB followed in %s, its kernel in %s", round, nodes, d.Round(time.Millisecond), at.Sub(ch.at).Round(time.Millisecond))
		left := podNames(ctx, t, c, ns, name)
		if seen, err := hostnamesFromToR(ctx, tor, lbIP, 5); err != nil {
			t.Errorf("round %d: HTTP from the ToR with one pod left: %v", round, err)
		} else if !slices.Equal(slices.Sorted(maps.Keys(seen)), left) {
			t.Errorf("round %d: requests reached %v, want the pod left %v", round, seen, left)
		}
		if round == 1 {
			checkNodeStatus(ctx, t, c, ns+"/"+name, netip.PrefixFrom(lbIP, lbIP.BitLen()), nodes)
		}
		// The scheduler places the new pod beside no other, a terminating one included: wait
		// until the old one is gone.
		if err := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil {
				return err
			}
			if n := len(pods.Items); n != 1 {
				return fmt.Errorf("%d pods of %s, want 1", n, name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		mark = eps.mark()
		if err := scaleDeployment(ctx, c, ns, name, 2); err != nil {
			t.Fatal(err)
		}
		d, ch, err = converge(ctx, eps, tor, lbIP, nodeIP, mark, func(nodes []string) bool { return slices.Equal(nodes, allNodes) })
		if err != nil {
			t.Fatalf("round %d, scaled to 2: %v", round, err)
		}
		up = append(up, d)
		at, err = kernelRouteAt(ctx, kernel, hostRoute, nodeIPs(nodeIP, allNodes))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		upKernel = append(upKernel, at.Sub(ch.at))
		t.Logf("round %d: scaled to 2: the ToR's RIB has both nodes again after %s, its kernel after %s", round, d.Round(time.Millisecond), at.Sub(ch.at).Round(time.Millisecond))
	}
	for _, f := range []struct {
		what string
		ds   []time.Duration
	}{
		{"scaled to 1 (withdrawn) → the ToR's RIB", down},
		{"scaled to 2 (announced) → the ToR's RIB", up},
		{"scaled to 1 (withdrawn) → the ToR's kernel", downKernel},
		{"scaled to 2 (announced) → the ToR's kernel", upKernel},
	} {
		p50, p99 := percentile(f.ds, 0.50), percentile(f.ds, 0.99)
		t.Logf("Local, EndpointSlice change %s: p50 %s, p99 %s, min %s, max %s over %d rounds", f.what,
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), slices.Min(f.ds).Round(time.Millisecond), slices.Max(f.ds).Round(time.Millisecond), len(f.ds))
		if p99 > lbConvergenceBound {
			t.Errorf("EndpointSlice change %s: p99 %s, beyond the bound %s", f.what, p99, lbConvergenceBound)
		}
	}
}

// zebraProtoBGP is the protocol number of the routes zebra installs from BGP.
const zebraProtoBGP = 186

// kernelRouteAt waits until the ToR's kernel routes p via exactly hops, and returns when that
// route arrived.
func kernelRouteAt(ctx context.Context, kernel *benchutil.RouteWatch, p netip.Prefix, hops []string) (time.Time, error) {
	var at time.Time
	err := kernel.WaitFor(ctx, 30*time.Second, fmt.Sprintf("the ToR's kernel route %s via %v", p, hops), func(st map[string]map[netip.Prefix]benchutil.SeenRoute) error {
		r, ok := st["tor"][p]
		var got []string
		for _, h := range r.Hops {
			got = append(got, h.String())
		}
		if !ok || !slices.Equal(got, hops) {
			return fmt.Errorf("via %v", got)
		}
		at = r.At
		return nil
	})
	return at, err
}

// checkNodeStatus: `tabbyctl node status` in each tabby-node pod lists the Service, with its host
// route on the nodes with a ready endpoint and the reason it is held back on the others.
func checkNodeStatus(ctx context.Context, t *testing.T, c *Cluster, svc string, route netip.Prefix, withEndpoint []string) {
	t.Helper()
	pods, err := c.Lab.Kube.CoreV1().Pods(lab.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=tabby-node"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out, err := c.Kubectl(ctx, "exec", "-n", lab.Namespace, p.Name, "-c", "tabby-node", "--", "tabbyctl", "node", "status")
		if err != nil {
			t.Errorf("tabbyctl node status on %s: %v", p.Spec.NodeName, err)
			continue
		}
		var line string
		for l := range strings.Lines(out) {
			if strings.Contains(l, svc) {
				line = strings.TrimSpace(l)
			}
		}
		want := "no ready endpoint on this node"
		if slices.Contains(withEndpoint, p.Spec.NodeName) {
			want = route.String()
		}
		if !strings.Contains(line, want) {
			t.Errorf("tabbyctl node status on %s: want %s listed with %q:\n%s", p.Spec.NodeName, svc, want, out)
			continue
		}
		t.Logf("tabbyctl node status on %s: %s", p.Spec.NodeName, line)
	}
}

// webDeployment is netexec with replicas pods, never two on one node.
func webDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec := netexecPod("").Spec
	spec.TerminationGracePeriodSeconds = new(int64(1))
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

func scaleDeployment(ctx context.Context, c *Cluster, ns, name string, replicas int32) error {
	deps := c.Lab.Kube.AppsV1().Deployments(ns)
	s, err := deps.GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("scale of %s/%s: %w", ns, name, err)
	}
	s.Spec.Replicas = replicas
	if _, err := deps.UpdateScale(ctx, name, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale %s/%s to %d: %w", ns, name, replicas, err)
	}
	return nil
}

func setTrafficPolicy(ctx context.Context, c *Cluster, ns, name string, p corev1.ServiceExternalTrafficPolicy) error {
	svcs := c.Lab.Kube.CoreV1().Services(ns)
	s, err := svcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Spec.ExternalTrafficPolicy = p
	if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("service %s/%s externalTrafficPolicy %s: %w", ns, name, p, err)
	}
	return nil
}

// podNames are the names of the Deployment's pods, sorted.
func podNames(ctx context.Context, t *testing.T, c *Cluster, ns, app string) []string {
	t.Helper()
	pods, err := c.Lab.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// converge waits for the EndpointSlices to reach a set of nodes with a ready endpoint that want
// accepts (a change after mark), and for the ToR's RIB to hold exactly those nodes' paths. It
// returns the time from the EndpointSlice change to the first look at the RIB that found it
// (an upper bound: the look's end).
func converge(ctx context.Context, eps *readyNodes, tor *lab.Router, addr netip.Addr, nodeIP map[string]string, mark int, want func([]string) bool) (time.Duration, nodesChange, error) {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		ch, ok := eps.lastAfter(mark)
		paths, err := torPaths(ctx, tor, addr)
		seenAt := time.Now()
		if err != nil {
			return 0, nodesChange{}, err
		}
		if ok && want(ch.nodes) {
			if slices.Equal(paths, nodeIPs(nodeIP, ch.nodes)) {
				// The EndpointSlice may have changed again while the RIB was read.
				if now, _ := eps.lastAfter(mark); now.at.Equal(ch.at) {
					return seenAt.Sub(ch.at), ch, nil
				}
			}
			last = fmt.Sprintf("ready endpoints on %v; the ToR's paths for %s: %v", ch.nodes, addr, paths)
		} else {
			last = fmt.Sprintf("no EndpointSlice change yet to the set wanted; the ToR's paths for %s: %v", addr, paths)
		}
		select {
		case <-ctx.Done():
			return 0, nodesChange{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return 0, nodesChange{}, fmt.Errorf("not converged in 2m: %s", last)
}

// readyNodes follows a Service's EndpointSlices and records each change of the set of nodes
// with a ready endpoint, with the time the watch delivered it.
type readyNodes struct {
	mu      sync.Mutex
	history []nodesChange
}

type nodesChange struct {
	nodes []string
	at    time.Time
}

// watchReadyNodes starts following the EndpointSlices of Service ns/svc until the test ends.
func watchReadyNodes(ctx context.Context, t *testing.T, c *Cluster, ns, svc string) *readyNodes {
	r := &readyNodes{}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		slicesAPI := c.Lab.Kube.DiscoveryV1().EndpointSlices(ns)
		sel := discoveryv1.LabelServiceName + "=" + svc
		var current []string
		for ctx.Err() == nil {
			list, err := slicesAPI.List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				select { // the API server is loaded: list again shortly
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			byName := map[string]*discoveryv1.EndpointSlice{}
			for i := range list.Items {
				byName[list.Items[i].Name] = &list.Items[i]
			}
			current = r.publish(current, byName)
			w, err := slicesAPI.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				s, ok := ev.Object.(*discoveryv1.EndpointSlice)
				if !ok {
					break // an error event: list again
				}
				if ev.Type == watch.Deleted {
					delete(byName, s.Name)
				} else {
					byName[s.Name] = s
				}
				current = r.publish(current, byName)
			}
			w.Stop()
		}
	}()
	return r
}

// publish records the set of nodes with a ready endpoint if it differs from current.
func (r *readyNodes) publish(current []string, byName map[string]*discoveryv1.EndpointSlice) []string {
	set := map[string]bool{}
	for _, s := range byName {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready && e.NodeName != nil {
				set[*e.NodeName] = true
			}
		}
	}
	nodes := append([]string{}, slices.Sorted(maps.Keys(set))...)
	if current != nil && slices.Equal(nodes, current) {
		return current
	}
	r.mu.Lock()
	r.history = append(r.history, nodesChange{nodes: nodes, at: time.Now()})
	r.mu.Unlock()
	return nodes
}

// mark is the position in the history from which later changes count.
func (r *readyNodes) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.history)
}

// lastAfter is the newest change recorded at or after mark.
func (r *readyNodes) lastAfter(mark int) (nodesChange, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.history) <= mark {
		return nodesChange{}, false
	}
	return r.history[len(r.history)-1], true
}

// waitAfter waits for a change at or after mark whose set want accepts, and returns it.
func (r *readyNodes) waitAfter(ctx context.Context, mark int, timeout time.Duration, want func([]string) bool) (nodesChange, error) {
	var got nodesChange
	err := lab.Eventually(ctx, timeout, func(context.Context) error {
		ch, ok := r.lastAfter(mark)
		if !ok || !want(ch.nodes) {
			return fmt.Errorf("nodes with a ready endpoint: %v", ch.nodes)
		}
		got = ch
		return nil
	})
	return got, err
}

// torEstablished: the ToR has an Established session with every neighbour.
func torEstablished(ctx context.Context, tor *lab.Router, neighbors []lab.BGPNeighbor) error {
	out, err := tor.Vtysh(ctx, "show bgp ipv4 unicast summary json")
	if err != nil {
		return err
	}
	var sum struct {
		Peers map[string]struct {
			State string `json:"state"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		return fmt.Errorf("ToR summary: %w: %s", err, out)
	}
	for _, nb := range neighbors {
		if st := sum.Peers[nb.Addr.String()].State; st != "Established" {
			return fmt.Errorf("the ToR's session with %s is %q", nb.Addr, st)
		}
	}
	return nil
}

// torPaths are the next hops of the ToR's BGP paths for addr's host route, sorted.
func torPaths(ctx context.Context, tor *lab.Router, addr netip.Addr) ([]string, error) {
	pfx := netip.PrefixFrom(addr, addr.BitLen())
	out, err := tor.Vtysh(ctx, "show ip bgp "+pfx.String()+" json")
	if err != nil {
		return nil, err
	}
	var rib struct {
		Paths []struct {
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &rib); err != nil {
		return nil, fmt.Errorf("ToR RIB for %s: %w: %s", pfx, err, out)
	}
	hops := []string{}
	for _, p := range rib.Paths {
		if len(p.Nexthops) > 0 {
			hops = append(hops, p.Nexthops[0].IP)
		}
	}
	slices.Sort(hops)
	return hops, nil
}

// waitToR waits until the ToR's BGP paths for addr are exactly via want.
func waitToR(ctx context.Context, tor *lab.Router, addr netip.Addr, want []string, timeout time.Duration) (time.Time, error) {
	var at time.Time
	err := lab.Eventually(ctx, timeout, func(ctx context.Context) error {
		got, err := torPaths(ctx, tor, addr)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("the ToR's BGP paths for %s are via %v, want %v", addr, got, want)
		}
		at = time.Now()
		return nil
	})
	return at, err
}

// torKernelNextHops are the gateways of the ToR's kernel route to addr, sorted.
func torKernelNextHops(ctx context.Context, tor *lab.Router, addr netip.Addr) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "-j", "-n", tor.NS, "route", "show", "exact", netip.PrefixFrom(addr, addr.BitLen()).String()).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ip route on the ToR: %w: %s", err, out)
	}
	var rs []struct {
		Gateway  string `json:"gateway"`
		Nexthops []struct {
			Gateway string `json:"gateway"`
		} `json:"nexthops"`
	}
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, fmt.Errorf("ip route on the ToR: %w: %s", err, out)
	}
	gws := []string{}
	for _, r := range rs {
		if r.Gateway != "" {
			gws = append(gws, r.Gateway)
		}
		for _, h := range r.Nexthops {
			gws = append(gws, h.Gateway)
		}
	}
	slices.Sort(gws)
	return gws, nil
}

// httpFromToR GETs path from port 80 of addr, from the router's namespace.
func httpFromToR(ctx context.Context, tor *lab.Router, addr netip.Addr, path string) (string, error) {
	url := "http://" + netip.AddrPortFrom(addr, 80).String() + path
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", tor.NS, "curl", "-sS", "--fail", "--max-time", "3", url).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("GET %s from the ToR: %w: %s", url, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// hostnamesFromToR makes n requests for netexec's /hostname and counts the answers by pod.
func hostnamesFromToR(ctx context.Context, tor *lab.Router, addr netip.Addr, n int) (map[string]int, error) {
	seen := map[string]int{}
	for range n {
		var name string
		// The first requests may go before kube-proxy has the address: retry each a while.
		if err := lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
			var err error
			name, err = httpFromToR(ctx, tor, addr, "/hostname")
			return err
		}); err != nil {
			return seen, err
		}
		seen[name]++
	}
	return seen, nil
}

// clientIPFromToR is the client address netexec saw for a request from the ToR.
func clientIPFromToR(ctx context.Context, tor *lab.Router, addr netip.Addr) (string, error) {
	out, err := httpFromToR(ctx, tor, addr, "/clientip")
	if err != nil {
		return "", err
	}
	ap, err := netip.ParseAddrPort(out)
	if err != nil {
		return "", fmt.Errorf("/clientip answered %q: %w", out, err)
	}
	return ap.Addr().String(), nil
}

func nodeIPs(nodeIP map[string]string, nodes []string) []string {
	ips := []string{}
	for _, n := range nodes {
		ips = append(ips, nodeIP[n])
	}
	slices.Sort(ips)
	return ips
}

// percentile of ds by the nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	i := int(p*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}
