package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// The simulated cluster: nodes that exist only in the datastore, each with one block of its own
// holding its pods' allocations, its pods, and explicit BGP peers per rack. Their addresses are
// data, never traffic: no session is made to them (their peers select racks no real node is in,
// and the node-to-node mesh is off).
const (
	simNamespaces = 50
	nodesPerRack  = 40
	// firstSimBlock leaves the pool's first 4 /24s to the real agents and the latency probe.
	firstSimBlock = 16
	network       = "k8s-pod-network"
)

// simNode is one made-up node and the bench's own copy of its block, which only the churn writes
// after the world is built (so an update needs no read first).
type simNode struct {
	name  string
	index int
	block netip.Prefix
	mu    sync.Mutex
	obj   *v1.IPAMBlock
	next  int // the next pod's number
	live  []simPod
}

type simPod struct {
	ns, name string
	ordinal  int
	noObject bool // its address only: a churn of IPAMBlock updates alone made no Pod object
}

type world struct {
	kube   kubernetes.Interface
	client *client.Client
	nodes  []*simNode
	// spare are nodes past the simulated ones, with blocks of their own, that the node churn
	// has join and leave.
	spare []*simNode
}

// spareNodes is how many nodes the node churn cycles through (as many as blocks are left).
const spareNodes = 4

// clients are the bench's own, without the lab's 200 QPS limit: building the world is tens of
// thousands of writes. They have a connection of their own: client-go shares one HTTP/2
// connection between clients of the same config, and the probe's writes (on the lab's client)
// must not queue behind the churn's, which in a cluster come from a thousand nodes.
func newWorld(cfg *rest.Config) (*world, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5000, 10000
	c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil } // a function: not shared
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(c)
	if err != nil {
		return nil, err
	}
	return &world{kube: kube, client: cl}, nil
}

func simNodeName(i int) string { return fmt.Sprintf("sim-%04d", i) }
func simNS(i int) string       { return fmt.Sprintf("sim-%02d", i%simNamespaces) }
func rack(i int) string        { return fmt.Sprintf("r%02d", i/nodesPerRack) }

// simBlock is the i-th /26 of 10.244.0.0/16 after the ones left to the agents.
func simBlock(i int) netip.Prefix {
	k := firstSimBlock + i
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(k / 4), byte(k % 4 * 64)}), 26)
}

// build writes nodes × podsPerNode of everything, with `parallel` writers.
func (w *world) build(ctx context.Context, nodes, podsPerNode, peers, parallel int) error {
	if nodes+firstSimBlock > 1024 {
		return fmt.Errorf("-nodes=%d: at most %d fit one /26 each in 10.244.0.0/16", nodes, 1024-firstSimBlock)
	}
	for i := range simNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: simNS(i), Labels: map[string]string{"team": "t" + strconv.Itoa(i%5)}}}
		if _, err := w.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	w.nodes = make([]*simNode, nodes)
	for i := range nodes {
		w.nodes[i] = &simNode{name: simNodeName(i), index: i, block: simBlock(i)}
	}
	for i := nodes; i < min(nodes+spareNodes, 1024-firstSimBlock); i++ {
		w.spare = append(w.spare, &simNode{name: simNodeName(i), index: i, block: simBlock(i)})
	}
	if err := forEach(ctx, nodes, parallel, func(i int) error { return w.addNode(ctx, w.nodes[i], i, rack(i), podsPerNode) }); err != nil {
		return err
	}
	return forEach(ctx, peers, parallel, func(i int) error {
		racks := max(1, (nodes+nodesPerRack-1)/nodesPerRack)
		p := &v1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tor-%03d", i)}, Spec: v1.BGPPeerSpec{
			NodeSelector: fmt.Sprintf("rack == '%s'", rack(i%racks*nodesPerRack)),
			PeerIP:       fmt.Sprintf("2001:db8:5d::%x", i+1),
			ASNumber:     uint32(65100 + i%racks),
		}}
		if _, err := w.client.BGPPeers().Create(ctx, p); err != nil {
			return fmt.Errorf("BGPPeer %s: %w", p.Name, err)
		}
		return nil
	})
}

// addNode writes node sn, the i-th, as a 1,000-node cluster holds it: the Node with tabby's
// annotations and what a kubelet reports (images, conditions, capacity), its block and affinity,
// and its pods.
func (w *world) addNode(ctx context.Context, sn *simNode, i int, rack string, pods int) error {
	addr := fmt.Sprintf("2001:db8:5c::%x", i+1)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: sn.name,
			Labels: map[string]string{"kubernetes.io/hostname": sn.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"rack": rack, "topology.kubernetes.io/zone": "z" + strconv.Itoa(i%3)},
			Annotations: map[string]string{v1.AnnotationBGPIPv6Address: addr + "/64"},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}, {Type: corev1.NodeHostName, Address: sn.name}},
			Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110")},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.36.3", ContainerRuntimeVersion: "containerd://2.1.4", OSImage: "Debian GNU/Linux 12", KernelVersion: "6.1.0-56-amd64"},
		},
	}
	for k := range 20 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example/app-%02d@sha256:%064x", k, k)}, SizeBytes: int64(k+1) << 24})
	}
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficient", Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	}
	created, err := w.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", sn.name, err)
	}
	created.Status = node.Status
	if _, err := w.kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", sn.name, err)
	}
	aff := &v1.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: names.AffinityName(sn.name, sn.block)},
		Spec: v1.BlockAffinitySpec{Node: sn.name, CIDR: sn.block.String(), State: v1.AffinityConfirmed}}
	if _, err := w.client.BlockAffinities().Create(ctx, aff); err != nil {
		return fmt.Errorf("affinity of %s: %w", sn.name, err)
	}
	blk := &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(sn.block)},
		Spec: v1.IPAMBlockSpec{CIDR: sn.block.String(), Affinity: v1.AffinityPrefixHost + sn.name, Allocations: map[string]v1.Allocation{}}}
	for range pods {
		p := sn.newPod()
		if err := w.createPod(ctx, sn, p); err != nil {
			return err
		}
		blk.Spec.Allocations[strconv.Itoa(p.ordinal)] = sn.allocation(p)
		sn.live = append(sn.live, p)
	}
	if sn.obj, err = w.client.IPAMBlocks().Create(ctx, blk); err != nil {
		return fmt.Errorf("block of %s: %w", sn.name, err)
	}
	return nil
}

// removeNode is a drained node leaving: its block, its affinity, then the Node.
// What is already gone (a join that failed half way) is skipped.
func (w *world) removeNode(ctx context.Context, sn *simNode) error {
	if err := w.client.IPAMBlocks().Delete(ctx, names.BlockName(sn.block), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("block of %s: %w", sn.name, err)
	}
	if err := w.client.BlockAffinities().Delete(ctx, names.AffinityName(sn.name, sn.block), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("affinity of %s: %w", sn.name, err)
	}
	if err := w.kube.CoreV1().Nodes().Delete(ctx, sn.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s: %w", sn.name, err)
	}
	sn.obj = nil
	return nil
}

// newPod names the node's next pod and gives it the lowest free ordinal of its block.
func (sn *simNode) newPod() simPod {
	used := map[int]bool{}
	for _, p := range sn.live {
		used[p.ordinal] = true
	}
	o := 0
	for used[o] {
		o++
	}
	sn.next++
	return simPod{ns: simNS(sn.next + len(sn.name)), name: fmt.Sprintf("%s-p%05d", sn.name, sn.next), ordinal: o}
}

func (sn *simNode) allocation(p simPod) v1.Allocation {
	return v1.Allocation{Handle: network + "." + p.name, Namespace: p.ns, Pod: p.name, Node: sn.name}
}

// createPod writes a pod object as a controller makes it: labels that policies select, a named
// port, bound to its node.
func (w *world) createPod(ctx context.Context, sn *simNode, p simPod) error {
	n := len(p.name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns,
			Labels: map[string]string{"app": "a" + strconv.Itoa(n%10+p.ordinal%10), "tier": []string{"web", "api", "db"}[p.ordinal%3]}},
		Spec: corev1.PodSpec{NodeName: sn.name, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
	}
	if _, err := w.kube.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("pod %s/%s: %w", p.ns, p.name, err)
	}
	return nil
}

// addPolicy makes a NetworkPolicy on the real agents' pods that admits app=a1 pods of every
// namespace: every agent then keeps those pods' addresses, cluster-wide, in an ipset, and the
// churn of such pods anywhere changes it.
func (w *world) addPolicy(ctx context.Context, namespace string) error {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "from-a1", Namespace: namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a1"}},
			}}}},
		}}
	if _, err := w.kube.NetworkingV1().NetworkPolicies(namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("NetworkPolicy %s/%s: %w", namespace, np.Name, err)
	}
	return nil
}

// forEach runs f(0..n-1) with at most parallel at a time; the first error stops the rest.
func forEach(ctx context.Context, n, parallel int, f func(i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}

// counts says what the datastore holds, read back from the API server.
func (w *world) counts(ctx context.Context) (string, error) {
	start := time.Now()
	nodes, err := w.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return "", err
	}
	pods, err := w.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return "", err
	}
	blocks, err := w.client.IPAMBlocks().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return "", err
	}
	affs, err := w.client.BlockAffinities().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return "", err
	}
	peers, err := w.client.BGPPeers().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return "", err
	}
	allocs := 0
	for _, b := range blocks.Items {
		allocs += len(b.Spec.Allocations)
	}
	return fmt.Sprintf("%d Nodes, %d Pods, %d IPAMBlocks (%d allocations), %d BlockAffinities, %d BGPPeers (listed in %v)",
		len(nodes.Items), len(pods.Items), len(blocks.Items), allocs, len(affs.Items), len(peers.Items), time.Since(start).Round(time.Millisecond)), nil
}
