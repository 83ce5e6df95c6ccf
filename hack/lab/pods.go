package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
)

// PodNamespace is the Kubernetes namespace of pods whose spec names none.
const PodNamespace = "default"

// defaultPodLabels are the labels of a pod whose spec sets none.
func defaultPodLabels() map[string]string { return map[string]string{"app": "tabby-lab"} }

// Pod is a network namespace wired by the CNI plugin, with a matching Pod object.
type Pod struct {
	Name        string
	Namespace   string // Kubernetes namespace
	Node        *Node
	NS          string // network namespace
	ContainerID string
	UID         string
	// IP is the pod's IPv4 address, or its IPv6 one in an IPv6-only lab: the address every
	// single-stack check uses. IP6 is its IPv6 address, invalid without one.
	IP     netip.Addr
	IP6    netip.Addr
	Result *types100.Result
	Ports  []corev1.ContainerPort

	mu      sync.Mutex
	labels  map[string]string
	serve   bool     // PodSpec.Serve
	servers *servers // probe servers (PodSpec.Serve), nil without
	obj     *corev1.Pod
}

// PodSpec describes a pod to add.
type PodSpec struct {
	Name string
	Node string
	// Namespace is the pod's Kubernetes namespace, PodNamespace when empty; AddPod creates it
	// (without labels) if it does not exist: EnsureNamespace first to give it labels.
	Namespace   string
	Annotations map[string]string // e.g. tabby.dev/ipv4pools
	// Labels are the Pod object's labels; app=tabby-lab when nil.
	Labels map[string]string
	// Ports are the container's ports in the Pod object (named ports are what a NetworkPolicy
	// port by name resolves to).
	Ports []corev1.ContainerPort
	// Serve starts a probe server (see Probe) on every TCP and UDP port of Ports in the pod's
	// namespace before the CNI ADD, so a probe sees a listener the moment the pod has an
	// address. SCTP ports get none: the lab has no SCTP client or server.
	Serve bool
	// OnAdded, if set, is called the moment the CNI ADD returned, before the Pod's status
	// carries the address (what the kubelet writes next): the start of the window in which
	// the pod is reachable but the API does not show its address yet. It runs on AddPod's
	// goroutine and must return quickly.
	OnAdded func(*Pod)
}

// Addrs are the pod's addresses, one per family it has.
func (p *Pod) Addrs() []netip.Addr {
	if p.IP6.IsValid() && p.IP6 != p.IP {
		return []netip.Addr{p.IP, p.IP6}
	}
	return []netip.Addr{p.IP}
}

// Key names a pod in the lab: its name in PodNamespace, namespace/name elsewhere.
func (p *Pod) Key() string { return podKey(p.Namespace, p.Name) }

func podKey(namespace, name string) string {
	if namespace == PodNamespace {
		return name
	}
	return namespace + "/" + name
}

// Labels are the pod's labels as the lab last wrote them.
func (p *Pod) Labels() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.labels)
}

// Pod returns a pod by key (see Pod.Key), nil if there is none.
func (l *Lab) Pod(key string) *Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pods[key]
}

// AddPod creates the Pod object (spec.nodeName set: no scheduler runs), a network namespace,
// and runs the node's CNI config (ADD) through libcni with the node's namespace as the
// plugin's host namespace, as the container runtime on that node would.
func (l *Lab) AddPod(ctx context.Context, spec PodSpec) (_ *Pod, err error) {
	start := time.Now()
	p, err := l.CreatePod(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = l.DiscardPod(cctx, p)
		}
	}()
	if err := l.CNIAdd(ctx, p); err != nil {
		return nil, err
	}
	if spec.OnAdded != nil {
		spec.OnAdded(p)
	}
	if err := l.ReportPod(ctx, p); err != nil {
		return nil, err
	}
	l.log.Debug("pod added", "pod", p.Key(), "node", p.Node.Name, "ip", p.IP, "took", time.Since(start).Round(time.Millisecond))
	return p, nil
}

// CreatePod is AddPod's first step alone: the Pod object, bound to its node, with nothing
// wired yet (what a kubelet finds before it starts the sandbox). CNIAdd wires it, ReportPod
// writes its status and makes it one of the lab's pods; DiscardPod undoes it.
func (l *Lab) CreatePod(ctx context.Context, spec PodSpec) (*Pod, error) {
	n := l.Node(spec.Node)
	if n == nil {
		return nil, fmt.Errorf("pod %s: no node %q", spec.Name, spec.Node)
	}
	ns := spec.Namespace
	if ns == "" {
		ns = PodNamespace
	}
	key := podKey(ns, spec.Name)
	l.mu.Lock()
	_, dup := l.pods[key]
	l.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("pod %s exists", key)
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = defaultPodLabels()
	}
	if ns != PodNamespace {
		if err := l.EnsureNamespace(ctx, ns, nil); err != nil {
			return nil, fmt.Errorf("pod %s: %w", key, err)
		}
	}
	id, err := containerID()
	if err != nil {
		return nil, err
	}
	role := spec.Name
	if ns != PodNamespace {
		role = ns + "." + spec.Name // '.' cannot be in a namespace name: no two pods share a role
	}
	p := &Pod{Name: spec.Name, Namespace: ns, Node: n, NS: l.NetnsName(role), ContainerID: id, Ports: spec.Ports, labels: labels, serve: spec.Serve}
	if len(p.NS) > 64 {
		return nil, fmt.Errorf("pod %s: name too long", key)
	}
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: ns, Annotations: spec.Annotations, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   n.Name,
			Containers: []corev1.Container{{Name: "app", Image: "tabby-lab.invalid/none", Ports: spec.Ports}},
		},
	}
	created, err := l.Kube.CoreV1().Pods(ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Pod %s: %w", key, err)
	}
	p.UID = string(created.UID)
	p.obj = created
	return p, nil
}

// containerID is a new sandbox's ID, as a runtime makes one.
func containerID() (string, error) {
	id := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return "", err
	}
	return hex.EncodeToString(id), nil
}

// CNIAdd makes the pod's network namespace (if it is not there yet) and runs CNI ADD for it, as
// the runtime on its node would; it needs no API server of its own. On failure the namespace
// stays, for the caller to see what the failed ADD left, until DiscardPod.
func (l *Lab) CNIAdd(ctx context.Context, p *Pod) error {
	key, n := p.Key(), p.Node
	if _, err := os.Stat(NetnsPath(p.NS)); os.IsNotExist(err) {
		if err := addNetns(ctx, p.NS); err != nil {
			return err
		}
	}
	if p.serve && p.servers == nil {
		var err error
		if p.servers, err = startServers(p.NS, p.Ports); err != nil {
			return fmt.Errorf("pod %s: %w", key, err)
		}
		l.onClose(func(context.Context) error { p.closeServers(); return nil })
	}
	cni, list, rt, err := l.cniFor(n, p)
	if err != nil {
		return err
	}
	var res any
	err = inNetns(n.NS, func() error {
		r, err := cni.AddNetworkList(ctx, list, rt)
		res = r
		return err
	})
	if err != nil {
		return fmt.Errorf("CNI ADD of pod %s on %s: %w", key, n.Name, err)
	}
	if p.Result, err = convertResult(res); err != nil {
		return fmt.Errorf("CNI ADD of pod %s: %w", key, err)
	}
	if err := p.takeAddresses(l.Opts.Families); err != nil {
		return fmt.Errorf("CNI ADD of pod %s: %w", key, err)
	}
	return nil
}

// ReportPod writes what the kubelet reports once the sandbox is up (IPAM's checks compare
// against it) and makes the pod one of the lab's (Pods, DeletePod, Close).
func (l *Lab) ReportPod(ctx context.Context, p *Pod) error {
	created := p.obj.DeepCopy()
	created.Status.Phase = corev1.PodRunning
	created.Status.PodIP = p.IP.String()
	created.Status.PodIPs = []corev1.PodIP{{IP: p.IP.String()}}
	if p.IP6.IsValid() && p.IP6 != p.IP {
		created.Status.PodIPs = append(created.Status.PodIPs, corev1.PodIP{IP: p.IP6.String()})
	}
	created.Status.HostIP = p.Node.IP().String()
	if _, err := l.Kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set Pod %s status: %w", p.Key(), err)
	}
	l.mu.Lock()
	l.pods[p.Key()] = p
	l.mu.Unlock()
	return nil
}

// DiscardPod removes a pod that CreatePod made and ReportPod did not take: its namespace
// (without CNI DEL) and its Pod object.
func (l *Lab) DiscardPod(ctx context.Context, p *Pod) error {
	p.closeServers()
	if err := delNetns(ctx, p.NS); err != nil {
		return err
	}
	return l.deletePodObject(ctx, p)
}

// takeAddresses reads the pod's addresses from the CNI result: exactly the families the lab
// gives pods, one address each.
func (p *Pod) takeAddresses(f Families) error {
	var v4, v6 netip.Addr
	for _, c := range p.Result.IPs {
		a, ok := netip.AddrFromSlice(c.Address.IP)
		if !ok {
			return fmt.Errorf("result address %v does not parse", c.Address)
		}
		a = a.Unmap()
		dst := &v4
		if a.Is6() {
			dst = &v6
		}
		if dst.IsValid() {
			return fmt.Errorf("result has two addresses of one family: %s and %s", *dst, a)
		}
		*dst = a
	}
	if v4.IsValid() != f.IPv4Pods() || v6.IsValid() != f.IPv6() {
		return fmt.Errorf("result addresses %v do not match the lab's families (%s)", p.Result.IPs, f)
	}
	p.IP, p.IP6 = v4, v6
	if !v4.IsValid() {
		p.IP = v6
	}
	return nil
}

// DeletePod runs CNI DEL for the pod (by key, see Pod.Key), removes its namespace, and
// deletes the Pod object.
func (l *Lab) DeletePod(ctx context.Context, key string) error {
	p := l.Pod(key)
	if p == nil {
		return fmt.Errorf("no pod %s", key)
	}
	cni, list, rt, err := l.cniFor(p.Node, p)
	if err != nil {
		return err
	}
	if err := inNetns(p.Node.NS, func() error { return cni.DelNetworkList(ctx, list, rt) }); err != nil {
		return fmt.Errorf("CNI DEL of pod %s on %s: %w", p.Key(), p.Node.Name, err)
	}
	return l.dropPod(ctx, p)
}

// dropPod forgets a pod without CNI DEL (its node is going away).
func (l *Lab) dropPod(ctx context.Context, p *Pod) error {
	p.closeServers()
	if err := delNetns(ctx, p.NS); err != nil {
		return err
	}
	if err := l.deletePodObject(ctx, p); err != nil {
		return err
	}
	l.mu.Lock()
	delete(l.pods, p.Key())
	l.mu.Unlock()
	return nil
}

func (l *Lab) deletePodObject(ctx context.Context, p *Pod) error {
	zero := int64(0)
	uid := ktypes.UID(p.UID)
	err := l.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Pod %s: %w", p.Key(), err)
	}
	return nil
}

func (p *Pod) closeServers() {
	p.mu.Lock()
	s := p.servers
	p.servers = nil
	p.mu.Unlock()
	if s != nil {
		s.close()
	}
}

func convertResult(res any) (*types100.Result, error) {
	type versioned interface {
		Version() string
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if v, ok := res.(versioned); ok && !strings.HasPrefix(v.Version(), "1.") {
		return nil, fmt.Errorf("result version %s: the lab's conflist asks for 1.x", v.Version())
	}
	var r types100.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode CNI result: %w", err)
	}
	return &r, nil
}

// cniFor builds the libcni objects for one pod on one node.
func (l *Lab) cniFor(n *Node, p *Pod) (*libcni.CNIConfig, *libcni.NetworkConfigList, *libcni.RuntimeConf, error) {
	raw, err := l.Conflist(n)
	if err != nil {
		return nil, nil, nil, err
	}
	list, err := libcni.NetworkConfFromBytes(raw)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("node %s conflist: %w", n.Name, err)
	}
	cni := libcni.NewCNIConfigWithCacheDir(l.CNIPath, filepath.Join(n.Dir, "cni-cache"), nil)
	rt := &libcni.RuntimeConf{
		ContainerID: p.ContainerID,
		NetNS:       NetnsPath(p.NS),
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.ContainerID},
			{"K8S_POD_UID", p.UID},
		},
	}
	return cni, list, rt, nil
}

// Conflist is the CNI configuration installed on node n: the chart's template with the node's
// values substituted when the chart has one, else the equivalent built here. The tabby
// plugin's nodename, kubeconfig and ipamSocket are always the node's own.
func (l *Lab) Conflist(n *Node) ([]byte, error) {
	if l.Opts.Stub {
		return l.stubConflist(n)
	}
	var conf map[string]any
	if l.chart != nil && l.chart.Conflist != "" {
		s := strings.NewReplacer(
			"__NODENAME__", n.Name, "__KUBECONFIG_FILEPATH__", n.Kubeconfig,
			"__CNI_MTU__", "0", "__IPAM_SOCKET__", n.IPAMSocket(), "__LOG_LEVEL__", "info",
		).Replace(l.chart.Conflist)
		if err := json.Unmarshal([]byte(s), &conf); err != nil {
			return nil, fmt.Errorf("the chart's CNI config does not parse after substituting the node's values: %w\n%s", err, s)
		}
	} else {
		conf = map[string]any{
			"cniVersion": "1.0.0",
			"name":       "k8s-pod-network",
			"plugins": []any{map[string]any{
				"type": "tabby",
				"ipam": map[string]any{"type": "tabby-ipam"},
			}},
		}
	}
	plugins, _ := conf["plugins"].([]any)
	found := false
	for _, pl := range plugins {
		m, ok := pl.(map[string]any)
		if !ok || m["type"] != "tabby" {
			continue
		}
		found = true
		m["nodename"] = n.Name
		m["kubeconfig"] = n.Kubeconfig
		m["ipamSocket"] = n.IPAMSocket()
		m["nodeAddressInterface"] = "eth0"
	}
	if !found {
		return nil, fmt.Errorf("the CNI config has no plugin of type tabby: %v", conf)
	}
	return json.Marshal(conf)
}
