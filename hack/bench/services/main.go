// Command services benchmarks Services over BGP on the path the product runs: a lab of three
// tabby-nodes on a real API server, an FRR ToR (zebra, ECMP) peering with each, tabby's
// LoadBalancer IPAM in tabby-node. It measures, at the ToR's kernel (rtnetlink notifications,
// no polling):
//
//   - a Service of type LoadBalancer created → its /32 at the ToR over every node (ECMP), for
//     1,000 Services created 8 at a time, with the share of that spent until tabby's
//     LoadBalancer IPAM wrote the address;
//   - externalTrafficPolicy Local: an EndpointSlice naming a ready endpoint on node-1 written →
//     the ToR's route over node-1 alone, and the endpoint moved to node-2 → over node-2 alone;
//   - beside them the reference on the same path: a pod block claimed (its IPAMBlock written) →
//     its route at the ToR, and 1,000 blocks claimed 8 at a time;
//   - tabby-node CPU for 1,000 Services against 1,000 blocks, and the ToR's table size.
//
// Run as root after `make build` (TABBY_BIN=bin); `make bench` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
)

const (
	namespace = "bench"
	// zebra's protocol number for the routes BGP installs.
	protoBGP = 186
	workers  = 8
)

var (
	podPool = netip.MustParsePrefix("10.244.0.0/17")
	lbPool  = netip.MustParsePrefix("10.244.252.0/22")
)

func main() {
	var flags benchutil.LabFlags
	flags.Register()
	services := flag.Int("services", 1000, "Services of type LoadBalancer (at most 1,000: the pool's size)")
	local := flag.Int("local", 100, "Services switched to externalTrafficPolicy Local, one at a time")
	flag.Parse()
	err := benchutil.NeedRoot("make bench")
	if *services > 1000 || *local > *services {
		err = errors.Join(err, fmt.Errorf("-services at most 1000 and -local at most -services"))
	}
	benchutil.Main("services", err, func(ctx context.Context) error { return run(ctx, flags, *services, *local) })
}

type bench struct {
	l     *lab.Lab
	nodes []*lab.Node
	hops  []netip.Addr // every node's address, sorted: a Cluster Service's route at the ToR
	rw    *benchutil.RouteWatch
}

func run(ctx context.Context, flags benchutil.LabFlags, services, local int) (err error) {
	l, err := lab.New(ctx, flags.Lab(lab.Options{AgentArgs: []string{"--ipam-gc-interval=1h", "--ipam-gc-grace=1h"}}))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			flags.HoldFailed(ctx, l, err.Error())
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = errors.Join(err, l.Close(cctx))
	}()
	b := &bench{l: l}
	if err := b.setUp(ctx); err != nil {
		return err
	}
	defer b.rw.Close()

	fmt.Printf("Services over BGP: %d tabby-nodes, an FRR ToR (zebra, ECMP), routes timed at the ToR's kernel\n\n", len(b.nodes))
	blocks, blockCPU, err := b.claimBlocks(ctx, services)
	if err != nil {
		return err
	}
	svcs, assigned, svcCPU, err := b.createServices(ctx, services)
	if err != nil {
		return err
	}
	appear, move, err := b.followEndpoints(ctx, local)
	if err != nil {
		return err
	}
	single, err := b.claimBlocksOneByOne(ctx, local, services)
	if err != nil {
		return err
	}
	fmt.Printf("%-58s %10s %10s %10s\n", "", "p50", "p99", "max")
	row := func(what string, d []time.Duration) {
		fmt.Printf("%-58s %10s %10s %10s\n", what, benchutil.Ms(benchutil.Pct(d, 50)), benchutil.Ms(benchutil.Pct(d, 99)), benchutil.Ms(slices.Max(d)))
	}
	row(fmt.Sprintf("%d LoadBalancer Services → /32 over every node", services), svcs)
	row("  of which: until LoadBalancer IPAM wrote the address", assigned)
	bgp := make([]time.Duration, len(svcs))
	for i := range svcs {
		bgp[i] = svcs[i] - assigned[i]
	}
	row("  of which: address written → /32 over every node", bgp)
	row(fmt.Sprintf("reference: %d pod blocks claimed → first route at the ToR", services), blocks)
	row("Local: endpoint on node-1 written → ToR over node-1 alone", appear)
	row("Local: endpoint moved to node-2 → ToR over node-2 alone", move)
	row("reference: one pod block claimed → first route at the ToR", single)
	fmt.Printf("\ntabby-node CPU (3 nodes): %d Services %v, %d pod blocks %v (ratio %.2f)\n", services, svcCPU.Round(time.Millisecond), services, blockCPU.Round(time.Millisecond), float64(svcCPU)/float64(blockCPU))
	n, err := b.torRoutes(lbPool)
	if err != nil {
		return err
	}
	fmt.Printf("ToR table: %d Service /32s, each over %d next hops\n", n, len(b.hops))
	return nil
}

// setUp adds the nodes, the ToR and its peering, and replaces the lab's pod pool with a
// smaller one and a LoadBalancer pool beside it (no pod runs here).
func (b *bench) setUp(ctx context.Context) error {
	var err error
	if b.nodes, err = b.l.AddNodes(ctx, lab.NodeSpec{Name: "node-1"}, lab.NodeSpec{Name: "node-2"}, lab.NodeSpec{Name: "node-3"}); err != nil {
		return err
	}
	var nbs []lab.BGPNeighbor
	for _, n := range b.nodes {
		nbs = append(nbs, lab.BGPNeighbor{Addr: n.IP(), ASN: v1.DefaultASNumber})
		b.hops = append(b.hops, n.IP())
	}
	slices.SortFunc(b.hops, netip.Addr.Compare)
	if b.rw, err = benchutil.WatchRoutes(map[string]string{"tor": "/run/netns/" + b.l.Router().NS}, protoBGP, netip.MustParsePrefix("10.244.0.0/16")); err != nil {
		return err
	}
	if err := b.l.Router().StartFRR(ctx, lab.FRROptions{Zebra: true, Neighbors: nbs}); err != nil {
		return err
	}
	c := b.l.Client
	if _, err := c.BGPPeers().Create(ctx, &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Spec: v1.BGPPeerSpec{PeerIP: lab.RouterA.String(), ASNumber: lab.DefaultToRASN}}); err != nil {
		return fmt.Errorf("create BGPPeer: %w", err)
	}
	pools, err := c.IPPools().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list IPPools: %w", err)
	}
	for _, p := range pools.Items {
		if err := c.IPPools().Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete IPPool %s: %w", p.Name, err)
		}
	}
	for _, p := range []*v1.IPPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Spec: v1.IPPoolSpec{CIDR: podPool.String(), BlockSize: 28}},
		{ObjectMeta: metav1.ObjectMeta{Name: "lb"}, Spec: v1.IPPoolSpec{CIDR: lbPool.String(), AllowedUses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}},
	} {
		if _, err := c.IPPools().Create(ctx, p); err != nil {
			return fmt.Errorf("create IPPool %s: %w", p.Name, err)
		}
	}
	if _, err := b.l.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	for _, n := range b.nodes {
		want := []netip.Addr{lab.RouterA}
		for _, o := range b.nodes {
			if o != n {
				want = append(want, o.IP())
			}
		}
		if err := n.WaitPeers(ctx, time.Minute, want...); err != nil {
			return err
		}
	}
	return nil
}

// cpu is the tabby-nodes' CPU time so far.
func (b *bench) cpu() (time.Duration, error) {
	var sum time.Duration
	for _, n := range b.nodes {
		t, err := benchutil.CPUTime(n.PID())
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// parallel runs f(i) for i in [0, count), workers at a time, and returns each one's duration.
func parallel(ctx context.Context, count int, f func(ctx context.Context, i int) (time.Duration, time.Duration, error)) (a, b []time.Duration, err error) {
	a, b = make([]time.Duration, count), make([]time.Duration, count)
	var mu sync.Mutex
	var errs []error
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				x, y, err := f(ctx, i)
				mu.Lock()
				a[i], b[i] = x, y
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	return a, b, errors.Join(errs...)
}

// via waits until the ToR routes p over hop (among others: the other nodes pass a block on
// to the ToR too) and returns when p first arrived.
func (b *bench) via(ctx context.Context, p netip.Prefix, hop netip.Addr) (time.Time, error) {
	var at time.Time
	err := b.rw.WaitFor(ctx, 60*time.Second, fmt.Sprintf("%s via %s at the ToR", p, hop), func(st map[string]map[netip.Prefix]benchutil.SeenRoute) error {
		r, ok := st["tor"][p]
		if !ok || !slices.Contains(r.Hops, hop) {
			return fmt.Errorf("the ToR has %+v", r)
		}
		at = r.First
		return nil
	})
	return at, err
}

// over waits until the ToR routes p over hops and returns since when.
func (b *bench) over(ctx context.Context, p netip.Prefix, hops []netip.Addr) (time.Time, error) {
	var at time.Time
	err := b.rw.WaitFor(ctx, 60*time.Second, fmt.Sprintf("%s over %v at the ToR", p, hops), func(st map[string]map[netip.Prefix]benchutil.SeenRoute) error {
		r, ok := st["tor"][p]
		if !ok || !slices.Equal(r.Hops, hops) {
			return fmt.Errorf("the ToR has %+v", r)
		}
		at = r.At
		return nil
	})
	return at, err
}

// block is the i-th /28 of the pod pool.
func block(i int) netip.Prefix {
	a := podPool.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) + uint32(i)*16
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 28)
}

// claimBlocks claims count pod blocks, spread over the nodes, workers at a time: the
// reference for createServices on the same path (datastore → syncer → bird → ToR).
func (b *bench) claimBlocks(ctx context.Context, count int) ([]time.Duration, time.Duration, error) {
	cpu0, err := b.cpu()
	if err != nil {
		return nil, 0, err
	}
	lat, _, err := parallel(ctx, count, func(ctx context.Context, i int) (time.Duration, time.Duration, error) {
		n := b.nodes[i%len(b.nodes)]
		t0, _, err := benchutil.ClaimBlock(ctx, b.l, n.Name, block(i))
		if err != nil {
			return 0, 0, err
		}
		at, err := b.via(ctx, block(i), n.IP())
		return at.Sub(t0), 0, err
	})
	if err != nil {
		return nil, 0, err
	}
	cpu1, err := b.cpu()
	return lat, cpu1 - cpu0, err
}

// claimBlocksOneByOne claims count more blocks one at a time, after the first first blocks.
func (b *bench) claimBlocksOneByOne(ctx context.Context, count, first int) ([]time.Duration, error) {
	var lat []time.Duration
	for i := first; i < first+count; i++ {
		t0, _, err := benchutil.ClaimBlock(ctx, b.l, b.nodes[0].Name, block(i))
		if err != nil {
			return nil, err
		}
		at, err := b.via(ctx, block(i), b.nodes[0].IP())
		if err != nil {
			return nil, err
		}
		lat = append(lat, at.Sub(t0))
	}
	return lat, nil
}

func svcName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// createServices creates count Services of type LoadBalancer, workers at a time, and times
// each until the ToR routes its address over every node; assigned is the part until tabby's
// LoadBalancer IPAM wrote the address (seen by a watch of the Services).
func (b *bench) createServices(ctx context.Context, count int) (total, assigned []time.Duration, cpu time.Duration, err error) {
	cpu0, err := b.cpu()
	if err != nil {
		return nil, nil, 0, err
	}
	svcs := b.l.Kube.CoreV1().Services(namespace)
	addrs, err := watchAddresses(ctx, svcs)
	if err != nil {
		return nil, nil, 0, err
	}
	defer addrs.stop()
	total, assigned, err = parallel(ctx, count, func(ctx context.Context, i int) (time.Duration, time.Duration, error) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName(i)}, Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": svcName(i)},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		}}
		t0 := time.Now()
		if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return 0, 0, fmt.Errorf("create Service %s: %w", svc.Name, err)
		}
		a, err := addrs.wait(ctx, svc.Name)
		if err != nil {
			return 0, 0, err
		}
		ip, got := a.ip, a.at
		at, err := b.over(ctx, netip.PrefixFrom(ip, 32), b.hops)
		return at.Sub(t0), got.Sub(t0), err
	})
	if err != nil {
		return nil, nil, 0, err
	}
	cpu1, err := b.cpu()
	return total, assigned, cpu1 - cpu0, err
}

// followEndpoints switches count Services to externalTrafficPolicy Local, one at a time, and
// times an endpoint appearing on node-1 and moving to node-2 until the ToR follows.
func (b *bench) followEndpoints(ctx context.Context, count int) (appear, move []time.Duration, err error) {
	svcs := b.l.Kube.CoreV1().Services(namespace)
	slices := b.l.Kube.DiscoveryV1().EndpointSlices(namespace)
	for i := range count {
		s, err := svcs.Get(ctx, svcName(i), metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		ip, err := netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		if err != nil {
			return nil, nil, err
		}
		p := netip.PrefixFrom(ip, 32)
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("switch Service %s to Local: %w", s.Name, err)
		}
		if _, err := b.rw.Withdrawn(ctx, 60*time.Second, p, []string{"tor"}); err != nil {
			return nil, nil, err
		}
		ready := true
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: s.Name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{block(i).Addr().Next().String()}, NodeName: &b.nodes[0].Name,
				Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}
		t0 := time.Now()
		created, err := slices.Create(ctx, slice, metav1.CreateOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("create EndpointSlice: %w", err)
		}
		at, err := b.over(ctx, p, []netip.Addr{b.nodes[0].IP()})
		if err != nil {
			return nil, nil, err
		}
		appear = append(appear, at.Sub(t0))
		created.Endpoints[0].NodeName = &b.nodes[1].Name
		t0 = time.Now()
		if _, err := slices.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("update EndpointSlice: %w", err)
		}
		if at, err = b.over(ctx, p, []netip.Addr{b.nodes[1].IP()}); err != nil {
			return nil, nil, err
		}
		move = append(move, at.Sub(t0))
	}
	return appear, move, nil
}

// torRoutes counts the ToR's BGP routes inside p.
func (b *bench) torRoutes(p netip.Prefix) (int, error) {
	routes, err := lab.Routes(context.Background(), b.l.Router().NS, protoBGP)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range routes {
		// ip -j writes a host route without its /32.
		if a, err := netip.ParseAddr(r.Dst); err == nil && p.Contains(a) {
			n++
		}
	}
	return n, nil
}

// addresses records when each Service of a watch first had an address.
type addresses struct {
	mu   sync.Mutex
	seen map[string]assignment
	wake chan struct{}
	stop func()
}

type assignment struct {
	ip netip.Addr
	at time.Time
}

func watchAddresses(ctx context.Context, svcs typedcorev1.ServiceInterface) (*addresses, error) {
	w, err := svcs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("watch Services: %w", err)
	}
	a := &addresses{seen: map[string]assignment{}, wake: make(chan struct{}), stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			now := time.Now()
			s, ok := ev.Object.(*corev1.Service)
			if !ok {
				continue
			}
			for _, in := range s.Status.LoadBalancer.Ingress {
				ip, err := netip.ParseAddr(in.IP)
				if err != nil {
					continue
				}
				a.mu.Lock()
				if _, ok := a.seen[s.Name]; !ok {
					a.seen[s.Name] = assignment{ip: ip, at: now}
					close(a.wake)
					a.wake = make(chan struct{})
				}
				a.mu.Unlock()
				break
			}
		}
	}()
	return a, nil
}

// wait returns the Service's first address and when the watch saw it.
func (a *addresses) wait(ctx context.Context, name string) (assignment, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		a.mu.Lock()
		got, ok := a.seen[name]
		wake := a.wake
		a.mu.Unlock()
		if ok {
			return got, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return assignment{}, fmt.Errorf("service %s has no address after 60s", name)
		}
	}
}
