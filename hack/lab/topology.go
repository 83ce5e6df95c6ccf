package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/netnsfwd"
	"github.com/tabbynet/tabby/internal/testenv"
)

// Subnet names a lab subnet.
type Subnet int

const (
	A Subnet = iota // 198.51.100.0/25, router .1
	B               // 198.51.100.128/25, router .129
)

func (s Subnet) String() string { return [...]string{"a", "b"}[s] }

// Prefix is the subnet's address range.
func (s Subnet) Prefix() netip.Prefix { return [...]netip.Prefix{SubnetA, SubnetB}[s] }

// Gateway is the router's address on the subnet.
func (s Subnet) Gateway() netip.Addr { return [...]netip.Addr{RouterA, RouterB}[s] }

// buildUnderlay makes the switch (one bridge per subnet), the router (every node's default
// gateway) and "the internet" behind the router.
func (l *Lab) buildUnderlay(ctx context.Context) error {
	sw, rt, inet := l.NetnsName("sw"), l.NetnsName("rt"), l.NetnsName("inet")
	for _, n := range []string{sw, rt, inet} {
		l.onClose(func(ctx context.Context) error { return delNetns(ctx, n) })
		if err := addNetns(ctx, n); err != nil {
			return err
		}
	}
	subnets := []Subnet{A}
	if l.Opts.TwoSubnets {
		subnets = append(subnets, B)
	}
	r := &Router{lab: l, NS: rt, Subnets: subnets}
	for _, s := range subnets {
		br := "br-" + s.String()
		if err := l.veth(ctx, rt, "eth-"+s.String(), sw, "rt-"+s.String()); err != nil {
			return err
		}
		steps := [][]string{
			{"-n", sw, "link", "add", br, "type", "bridge"},
			{"-n", sw, "link", "set", br, "up"},
			{"-n", sw, "link", "set", "rt-" + s.String(), "master", br, "up"},
			{"-n", rt, "addr", "add", netip.PrefixFrom(s.Gateway(), s.Prefix().Bits()).String(), "dev", "eth-" + s.String()},
			{"-n", rt, "link", "set", "eth-" + s.String(), "up"},
		}
		if l.Opts.Families.IPv6() {
			steps = append(steps, []string{"-n", rt, "addr", "add", netip.PrefixFrom(s.Gateway6(), s.Prefix6().Bits()).String(), "dev", "eth-" + s.String(), "nodad"})
		}
		for _, st := range steps {
			if _, err := ip(ctx, st...); err != nil {
				return err
			}
		}
	}
	if err := l.veth(ctx, rt, "inet", inet, "eth0"); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", rt, "addr", "add", netip.PrefixFrom(RouterInet, InternetNet.Bits()).String(), "dev", "inet"},
		{"-n", rt, "link", "set", "inet", "up"},
		{"-n", inet, "addr", "add", netip.PrefixFrom(InternetHost, InternetNet.Bits()).String(), "dev", "eth0"},
		{"-n", inet, "link", "set", "eth0", "up"},
		{"-n", inet, "route", "add", "default", "via", RouterInet.String()},
	}
	if l.Opts.Families.IPv6() {
		steps = append(steps,
			[]string{"-n", rt, "addr", "add", netip.PrefixFrom(RouterInet6, InternetNet6.Bits()).String(), "dev", "inet", "nodad"},
			[]string{"-n", inet, "addr", "add", netip.PrefixFrom(InternetHost6, InternetNet6.Bits()).String(), "dev", "eth0", "nodad"},
			[]string{"-n", inet, "-6", "route", "add", "default", "via", RouterInet6.String()},
		)
	}
	for _, st := range steps {
		if _, err := ip(ctx, st...); err != nil {
			return err
		}
	}
	// No reverse-path filter: the router has no route back to pods (unless a ToR learns them),
	// yet must forward their unmasqueraded traffic (natOutgoing off).
	if err := sysctl(rt, "net.ipv4.ip_forward", "1", "net.ipv4.conf.all.rp_filter", "0", "net.ipv4.conf.default.rp_filter", "0"); err != nil {
		return err
	}
	if l.Opts.Families.IPv6() {
		if err := sysctl(rt, "net.ipv6.conf.all.forwarding", "1"); err != nil {
			return err
		}
	}
	l.router = r
	if l.Opts.HostLink {
		// The switch end joins bridge A; deleting the switch namespace removes the pair.
		for _, st := range [][]string{
			{"link", "set", l.hostPeer(), "netns", sw},
			{"-n", sw, "link", "set", l.hostPeer(), "master", "br-" + A.String(), "up"},
		} {
			if _, err := ip(ctx, st...); err != nil {
				return err
			}
		}
	}
	return nil
}

// HostLinkName is the root namespace's end of the host link (Options.HostLink).
func (l *Lab) HostLinkName() string { return netnsPrefix + l.ID + "-h" }

func (l *Lab) hostPeer() string { return "tl" + l.ID + "hp" }

// addHostLink makes the root namespace's link to subnet A, before the control plane binds its
// address; the switch end waits in the root namespace until the switch exists.
func (l *Lab) addHostLink(ctx context.Context) error {
	links, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, li := range links {
		if strings.HasPrefix(li.Name, netnsPrefix) && strings.HasSuffix(li.Name, "-h") {
			return fmt.Errorf("another lab's host link %s is up: one lab with a host link at a time", li.Name)
		}
	}
	name := l.HostLinkName()
	l.onClose(func(ctx context.Context) error {
		if _, err := net.InterfaceByName(name); err != nil {
			return nil // gone with the switch namespace
		}
		_, err := ip(ctx, "link", "del", name)
		return err
	})
	for _, st := range [][]string{
		{"link", "add", name, "type", "veth", "peer", "name", l.hostPeer()},
		{"addr", "add", HostAddr.String(), "dev", name},
		{"link", "set", name, "up"},
	} {
		if _, err := ip(ctx, st...); err != nil {
			return err
		}
	}
	return nil
}

// NodeSpec describes a node to add.
type NodeSpec struct {
	Name   string
	Subnet Subnet
	// Labels and Annotations go on the Kubernetes Node (on top of kubernetes.io/hostname).
	Labels      map[string]string
	Annotations map[string]string
	// RouteReflectorClusterID makes the node a route reflector: the cluster ID annotation and the
	// label tabby.dev/route-reflector=true.
	RouteReflectorClusterID string
	// NoAgent leaves tabby-node stopped (start it with Node.Start).
	NoAgent bool
	// Shutdown is tabby-node's --shutdown (restart when empty).
	Shutdown string
	// NoBGP runs this node's tabby-node without BGP (--bgp=none), as Options.NoBGP does every
	// node's: a mixed cluster.
	NoBGP bool
}

// RouteReflectorLabel marks route-reflector nodes (BGPPeer selectors use it).
const RouteReflectorLabel = "tabby.dev/route-reflector"

// AddNode makes a node namespace on its subnet, registers the Kubernetes Node, gives it a
// kubeconfig that reaches the API server from inside its namespace, and starts tabby-node
// (unless NoAgent or the stub). It returns when the agent is ready.
func (l *Lab) AddNode(ctx context.Context, spec NodeSpec) (*Node, error) {
	n, err := l.reserveNode(spec)
	if err != nil {
		return nil, err
	}
	return l.addNode(ctx, n)
}

// reserveNode checks a spec and picks the node's address and switch port.
func (l *Lab) reserveNode(spec NodeSpec) (*Node, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("node spec: name is empty")
	}
	if spec.Subnet == B && !l.Opts.TwoSubnets {
		return nil, fmt.Errorf("node %s: subnet b needs a lab with TwoSubnets", spec.Name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.nodes[spec.Name]; dup {
		return nil, fmt.Errorf("node %s exists", spec.Name)
	}
	if _, dup := l.reserved[spec.Name]; dup {
		return nil, fmt.Errorf("node %s is being added", spec.Name)
	}
	l.nextIdx[spec.Subnet]++
	l.portSeq++
	host := firstNodeHost + l.nextIdx[spec.Subnet]
	pfx := spec.Subnet.Prefix()
	addr := pfx.Addr()
	for range host {
		addr = addr.Next()
	}
	n := &Node{
		lab: l, Name: spec.Name, Spec: spec, NS: l.NetnsName(spec.Name), Subnet: spec.Subnet,
		Addr: netip.PrefixFrom(addr, pfx.Bits()), Port: fmt.Sprintf("p%d", l.portSeq),
		Dir: filepath.Join(l.Dir, "nodes", spec.Name),
	}
	if l.Opts.Families.IPv6() {
		n.Addr6 = netip.PrefixFrom(spec.Subnet.hostAddr6(host), spec.Subnet.Prefix6().Bits())
	}
	if l.reserved == nil {
		l.reserved = map[string]bool{}
	}
	l.reserved[spec.Name] = true
	return n, nil
}

func (l *Lab) addNode(ctx context.Context, n *Node) (_ *Node, err error) {
	start := time.Now()
	spec, port := n.Spec, n.Port
	defer func() {
		l.mu.Lock()
		delete(l.reserved, n.Name)
		l.mu.Unlock()
	}()
	if len(n.NS) > 64 {
		return nil, fmt.Errorf("node %s: name too long for a namespace name", spec.Name)
	}
	n.RunDir = filepath.Join(n.Dir, "run")
	n.Kubeconfig = filepath.Join(n.Dir, "kubeconfig")
	n.LogPath = filepath.Join(n.Dir, "tabby-node.log")
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			n.teardown(cctx)
			l.mu.Lock()
			if l.nodes[n.Name] == n {
				delete(l.nodes, n.Name)
			}
			l.mu.Unlock()
		}
	}()
	if err := os.MkdirAll(n.RunDir, 0o755); err != nil {
		return nil, err
	}
	if err := addNetns(ctx, n.NS); err != nil {
		return nil, err
	}
	sw := l.NetnsName("sw")
	if err := l.veth(ctx, n.NS, "eth0", sw, port); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"-n", sw, "link", "set", port, "master", "br-" + spec.Subnet.String(), "up"},
		{"-n", n.NS, "addr", "add", n.Addr.String(), "dev", "eth0"},
		{"-n", n.NS, "link", "set", "eth0", "up"},
		{"-n", n.NS, "route", "add", "default", "via", spec.Subnet.Gateway().String()},
	}
	if n.Addr6.IsValid() {
		// nodad: the switch is the lab's own, and a tentative address would hold back BGP.
		steps = append(steps,
			[]string{"-n", n.NS, "addr", "add", n.Addr6.String(), "dev", "eth0", "nodad"},
			[]string{"-n", n.NS, "-6", "route", "add", "default", "via", spec.Subnet.Gateway6().String()},
		)
	}
	for _, st := range steps {
		if _, err := ip(ctx, st...); err != nil {
			return nil, err
		}
	}
	// Loose reverse-path filtering: with several subnets and IPIP a pod's source can arrive on
	// another interface than the route back to it.
	if err := sysctl(n.NS, "net.ipv4.conf.all.rp_filter", "2", "net.ipv4.conf.default.rp_filter", "2"); err != nil {
		return nil, err
	}
	if l.Opts.HostLink {
		// The API server is on the underlay, as in a real cluster.
		err = testenv.WriteKubeconfig(n.Kubeconfig, l.Env.URL, l.token)
	} else {
		if n.fwd, err = startForwarder(n.NS, APIPort, l.apiAddr); err != nil {
			return nil, fmt.Errorf("node %s: api forwarder: %w", n.Name, err)
		}
		err = testenv.WriteKubeconfig(n.Kubeconfig, "https://127.0.0.1:"+APIPort, l.token)
	}
	if err != nil {
		return nil, err
	}
	if err := n.forwardObserve(); err != nil {
		return nil, err
	}
	n.typhaFwd = make([]*netnsfwd.Forwarder, len(l.Typhas))
	for _, ty := range l.Typhas {
		if err := ty.forward(n); err != nil {
			return nil, err
		}
	}
	if l.Opts.KubeletNodes {
		l.mu.Lock()
		l.nodes[n.Name] = n
		l.mu.Unlock()
		return n, nil // its kubelet registers the Node
	}
	if err := l.registerNode(ctx, n); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.nodes[n.Name] = n
	l.mu.Unlock()
	if l.Opts.Stub {
		if err := l.stubNodeAdded(ctx, n); err != nil {
			return nil, err
		}
		return n, nil
	}
	if !spec.NoAgent {
		if err := n.Start(ctx); err != nil {
			return nil, err
		}
	}
	l.log.Debug("node added", "node", n.Name, "addr", n.Addr, "took", time.Since(start).Round(time.Millisecond))
	return n, nil
}

func (l *Lab) registerNode(ctx context.Context, n *Node) error {
	labels := map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux"}
	for k, v := range n.Spec.Labels {
		labels[k] = v
	}
	ann := map[string]string{}
	for k, v := range n.Spec.Annotations {
		ann[k] = v
	}
	if id := n.Spec.RouteReflectorClusterID; id != "" {
		ann[v1.AnnotationRRClusterID] = id
		labels[RouteReflectorLabel] = "true"
	}
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels, Annotations: ann}}
	created, err := l.Kube.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Node %s: %w", n.Name, err)
	}
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}}
	if l.Opts.Families != IPv6Only {
		created.Status.Addresses = append(created.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.Addr.Addr().String()})
	}
	if n.Addr6.IsValid() {
		created.Status.Addresses = append(created.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.Addr6.Addr().String()})
	}
	created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "TabbyLab"}}
	if _, err := l.Kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set Node %s status: %w", n.Name, err)
	}
	return nil
}

// RemoveNode takes a node out of the cluster the way an operator would: stop its agent
// (final shutdown unless kill), delete its pods' namespaces and Pod objects, delete the Node
// object, remove the namespace.
func (l *Lab) RemoveNode(ctx context.Context, name string) error {
	n := l.Node(name)
	if n == nil {
		return fmt.Errorf("no node %s", name)
	}
	if err := n.Stop(ctx); err != nil {
		return err
	}
	for _, p := range l.Pods() {
		if p.Node == n {
			if err := l.dropPod(ctx, p); err != nil {
				return err
			}
		}
	}
	if err := l.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Node %s: %w", name, err)
	}
	l.mu.Lock()
	delete(l.nodes, name)
	l.mu.Unlock()
	n.teardown(ctx)
	if l.Opts.Stub {
		return l.stubResync(ctx)
	}
	return nil
}

// CutLink takes the node's switch port down: a pulled cable. The node's API connection (not on
// the lab network) stays.
func (n *Node) CutLink(ctx context.Context) error {
	_, err := ip(ctx, "-n", n.lab.NetnsName("sw"), "link", "set", n.Port, "down")
	return err
}

// RestoreLink brings the switch port back up.
func (n *Node) RestoreLink(ctx context.Context) error {
	_, err := ip(ctx, "-n", n.lab.NetnsName("sw"), "link", "set", n.Port, "up")
	return err
}

// veth makes a veth pair with end nameA in nsA and nameB in nsB. The ends are created under
// names unique to the lab and renamed inside their namespaces: the kernel checks a new link's
// name in the creating namespace too, where "eth0" may well exist (the qemu guest's NIC).
func (l *Lab) veth(ctx context.Context, nsA, nameA, nsB, nameB string) error {
	l.mu.Lock()
	l.linkSeq++
	seq := l.linkSeq
	l.mu.Unlock()
	tmpA, tmpB := fmt.Sprintf("tl%sa%d", l.ID, seq), fmt.Sprintf("tl%sb%d", l.ID, seq)
	steps := [][]string{
		{"link", "add", tmpA, "netns", nsA, "type", "veth", "peer", "name", tmpB, "netns", nsB},
		{"-n", nsA, "link", "set", tmpA, "name", nameA},
		{"-n", nsB, "link", "set", tmpB, "name", nameB},
	}
	for _, st := range steps {
		if _, err := ip(ctx, st...); err != nil {
			return err
		}
	}
	return nil
}
