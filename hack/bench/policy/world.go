package main

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/netpol"
)

const (
	namespaces = 5
	// localFake of the made-up pods sit on node-1 (host veths there), the rest on node-3, a
	// node without an agent: they are policy peers only.
	localFake = 60
	// webPolicies of the 500 select the connection-rate server and allow the client.
	webPolicies = 25
)

// world is the bench's cluster: the real pods that probe and serve, the made-up ones, and
// node-1, whose enforcement is measured.
type world struct {
	l                *lab.Lab
	n1               *lab.Node
	web, api, client *lab.Pod
	real             []*lab.Pod
	joinerBlock      netip.Prefix
	joinerOrd        int
	floor            struct{ chains, sets int }
	probeNS          string // the namespace of the made-up pods every joiner resembles
}

func nsName(i int) string { return "bench-" + strconv.Itoa(i%namespaces) }

func newWorld(ctx context.Context, l *lab.Lab) (*world, error) {
	w := &world{l: l, n1: l.Node("node-1"), joinerBlock: netip.MustParsePrefix("10.244.140.0/26"), probeNS: nsName(3)}
	for i := range namespaces {
		if err := l.EnsureNamespace(ctx, nsName(i), map[string]string{"team": "t" + strconv.Itoa(i)}); err != nil {
			return nil, err
		}
	}
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
	pods, err := l.AddPods(ctx,
		lab.PodSpec{Name: "web", Namespace: nsName(0), Node: "node-1", Labels: map[string]string{"app": "web"}, Ports: ports, Serve: true},
		lab.PodSpec{Name: "api", Namespace: nsName(0), Node: "node-1", Labels: map[string]string{"app": "api"}, Ports: ports, Serve: true},
		lab.PodSpec{Name: "client", Namespace: nsName(1), Node: "node-2", Labels: map[string]string{"app": "client", "tier": "client"}, Ports: ports, Serve: true})
	if err != nil {
		return nil, err
	}
	w.web, w.api, w.client, w.real = pods[0], pods[1], pods[2], pods
	err = lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		return lab.Probe(ctx, w.client.NS, netip.AddrPortFrom(w.web.IP, 80), corev1.ProtocolTCP, 200*time.Millisecond)
	})
	if err != nil {
		return nil, fmt.Errorf("client cannot reach web before any policy: %w", err)
	}
	return w, nil
}

// fakePod i: namespace, name and labels of a made-up pod. One in fifty has probe=yes, the
// label the joiners of podToIPSet carry.
func fakePod(i int) (ns, name string, labels map[string]string) {
	labels = map[string]string{"app": "app-" + strconv.Itoa(i%20), "tier": []string{"web", "db", "cache"}[i%3]}
	if i%50 == 3 {
		labels["probe"] = "yes"
	}
	return nsName(i), "fake-" + strconv.Itoa(i), labels
}

// populate writes the made-up pods (Pod objects, IPAM allocations, node-1's host veths) and the
// 500 NetworkPolicies.
func (w *world) populate(ctx context.Context) error {
	blocks := map[netip.Prefix]*v1.IPAMBlock{}
	block := func(cidr netip.Prefix, node string) *v1.IPAMBlock {
		b, ok := blocks[cidr]
		if !ok {
			b = &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(cidr)},
				Spec: v1.IPAMBlockSpec{CIDR: cidr.String(), Affinity: v1.AffinityPrefixHost + node, Allocations: map[string]v1.Allocation{}}}
			blocks[cidr] = b
		}
		return b
	}
	var objs []func(context.Context) error
	var veths []string
	for i := range fakePods {
		ns, name, labels := fakePod(i)
		node, base, k := "node-3", netip.MustParseAddr("10.244.128.0"), i-localFake
		if i < localFake {
			node, base, k = "node-1", netip.MustParseAddr("10.244.64.0"), i
			veths = append(veths, names.HostVethName(ns, name, ""))
		}
		b4 := base.As4()
		b4[2] += byte(k / 256)
		b4[3] = byte(k % 256 / 64 * 64)
		b := block(netip.PrefixFrom(netip.AddrFrom4(b4), 26), node)
		b.Spec.Allocations[strconv.Itoa(k%64)] = v1.Allocation{Handle: "bench.f" + strconv.Itoa(i), Namespace: ns, Pod: name, Node: node}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "bench.invalid/none",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}}}
		objs = append(objs, func(ctx context.Context) error {
			_, err := w.l.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
	}
	block(w.joinerBlock, "node-3")
	for _, b := range blocks {
		objs = append(objs, func(ctx context.Context) error {
			_, err := w.l.Client.IPAMBlocks().Create(ctx, b)
			return err
		})
	}
	if err := benchutil.AddHostVeths(w.n1.NS, veths); err != nil {
		return err
	}
	for _, np := range benchPolicies() {
		objs = append(objs, func(ctx context.Context) error {
			_, err := w.l.Kube.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{})
			return err
		})
	}
	return parallel(ctx, 8, objs)
}

// benchPolicies are the 500: one isolates api, 25 select web and allow the client (on 80 and
// on other ports), the rest select made-up pods by app label with peers of every kind.
func benchPolicies() []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	out = append(out, netpol.Policy(nsName(0), "api-isolate", netpol.Labels("app", "api")).Ingress().P())
	client := netpol.PodsIn(netpol.Labels("team", "t1"), netpol.Labels("tier", "client"))
	for k := range webPolicies {
		out = append(out, netpol.Policy(nsName(0), "web-"+strconv.Itoa(k), netpol.Labels("app", "web")).
			Ingress(netpol.From(client).On(netpol.TCP(80), netpol.TCP(int32(1000+k)))).P())
	}
	for i := len(out); i < policies; i++ {
		ns := nsName(i)
		var rule netpol.Rule
		switch i % 4 {
		case 0:
			rule = netpol.From(netpol.Pods(netpol.Labels("tier", []string{"web", "db", "cache"}[i%3]))).On(netpol.TCP(int32(80 + i%7)))
		case 1:
			rule = netpol.From(netpol.NamespacesOf(netpol.Labels("team", "t"+strconv.Itoa((i+1)%namespaces)))).
				On(networkingv1.NetworkPolicyPort{Port: &intstr.IntOrString{Type: intstr.String, StrVal: "http"}})
		case 2:
			rule = netpol.From(netpol.CIDR(fmt.Sprintf("198.18.%d.0/24", i%250), fmt.Sprintf("198.18.%d.128/25", i%250))).On(netpol.Range(8000, 8100, corev1.ProtocolTCP))
		case 3:
			rule = netpol.From(netpol.Pods(netpol.Labels("probe", "yes"))).On(netpol.TCP(443))
		}
		p := netpol.Policy(ns, "p-"+strconv.Itoa(i), netpol.Labels("app", "app-"+strconv.Itoa(i%20))).Ingress(rule)
		if i%3 == 0 {
			p = p.Egress(netpol.To(netpol.Pods(netpol.Labels("tier", "db"))).On(netpol.Named("http")))
		}
		out = append(out, p.P())
	}
	return out
}

// parallel runs fns, n at a time, and returns the first error.
func parallel(ctx context.Context, n int, fns []func(context.Context) error) error {
	errs := make(chan error, len(fns))
	sem := make(chan struct{}, n)
	for _, fn := range fns {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- fn(ctx)
		}()
	}
	var first error
	for range fns {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
