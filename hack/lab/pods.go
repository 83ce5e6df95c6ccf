package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
)

// PodNamespace is the Kubernetes namespace of the lab's pods.
const PodNamespace = "default"

// Pod is a network namespace wired by the CNI plugin, with a matching Pod object.
type Pod struct {
	Name        string
	Node        *Node
	NS          string // network namespace
	ContainerID string
	UID         string
	IP          netip.Addr
	Result      *types100.Result
}

// PodSpec describes a pod to add.
type PodSpec struct {
	Name        string
	Node        string
	Annotations map[string]string // e.g. tabby.dev/ipv4pools
}

// AddPod creates the Pod object (spec.nodeName set: no scheduler runs), a network namespace,
// and runs the node's CNI config (ADD) through libcni with the node's namespace as the
// plugin's host namespace, as the container runtime on that node would.
func (l *Lab) AddPod(ctx context.Context, spec PodSpec) (_ *Pod, err error) {
	n := l.Node(spec.Node)
	if n == nil {
		return nil, fmt.Errorf("pod %s: no node %q", spec.Name, spec.Node)
	}
	l.mu.Lock()
	_, dup := l.pods[spec.Name]
	l.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("pod %s exists", spec.Name)
	}
	start := time.Now()
	id := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	p := &Pod{Name: spec.Name, Node: n, NS: l.NetnsName(spec.Name), ContainerID: hex.EncodeToString(id)}
	if len(p.NS) > 64 {
		return nil, fmt.Errorf("pod %s: name too long", spec.Name)
	}
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: PodNamespace, Annotations: spec.Annotations, Labels: map[string]string{"app": "tabby-lab"}},
		Spec: corev1.PodSpec{
			NodeName:   n.Name,
			Containers: []corev1.Container{{Name: "app", Image: "tabby-lab.invalid/none"}},
		},
	}
	created, err := l.Kube.CoreV1().Pods(PodNamespace).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Pod %s: %w", spec.Name, err)
	}
	p.UID = string(created.UID)
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = delNetns(cctx, p.NS)
			_ = l.deletePodObject(cctx, p.Name, ktypes.UID(p.UID))
		}
	}()
	if err := addNetns(ctx, p.NS); err != nil {
		return nil, err
	}
	cni, list, rt, err := l.cniFor(n, p)
	if err != nil {
		return nil, err
	}
	var res any
	err = inNetns(n.NS, func() error {
		r, err := cni.AddNetworkList(ctx, list, rt)
		res = r
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("CNI ADD of pod %s on %s: %w", p.Name, n.Name, err)
	}
	if p.Result, err = convertResult(res); err != nil {
		return nil, fmt.Errorf("CNI ADD of pod %s: %w", p.Name, err)
	}
	if len(p.Result.IPs) == 0 {
		return nil, fmt.Errorf("CNI ADD of pod %s: result has no address", p.Name)
	}
	a, ok := netip.AddrFromSlice(p.Result.IPs[0].Address.IP.To4())
	if !ok {
		return nil, fmt.Errorf("CNI ADD of pod %s: address %v is not IPv4", p.Name, p.Result.IPs[0].Address)
	}
	p.IP = a
	// What the kubelet reports once the sandbox is up: IPAM's checks compare against it.
	created.Status.Phase = corev1.PodRunning
	created.Status.PodIP = a.String()
	created.Status.PodIPs = []corev1.PodIP{{IP: a.String()}}
	created.Status.HostIP = n.IP().String()
	if _, err := l.Kube.CoreV1().Pods(PodNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("set Pod %s status: %w", p.Name, err)
	}
	l.log.Debug("pod added", "pod", p.Name, "node", n.Name, "ip", p.IP, "took", time.Since(start).Round(time.Millisecond))
	l.mu.Lock()
	l.pods[p.Name] = p
	l.mu.Unlock()
	return p, nil
}

// DeletePod runs CNI DEL for the pod, removes its namespace, and deletes the Pod object.
func (l *Lab) DeletePod(ctx context.Context, name string) error {
	l.mu.Lock()
	p := l.pods[name]
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no pod %s", name)
	}
	cni, list, rt, err := l.cniFor(p.Node, p)
	if err != nil {
		return err
	}
	if err := inNetns(p.Node.NS, func() error { return cni.DelNetworkList(ctx, list, rt) }); err != nil {
		return fmt.Errorf("CNI DEL of pod %s on %s: %w", p.Name, p.Node.Name, err)
	}
	return l.dropPod(ctx, p)
}

// dropPod forgets a pod without CNI DEL (its node is going away).
func (l *Lab) dropPod(ctx context.Context, p *Pod) error {
	if err := delNetns(ctx, p.NS); err != nil {
		return err
	}
	if err := l.deletePodObject(ctx, p.Name, ktypes.UID(p.UID)); err != nil {
		return err
	}
	l.mu.Lock()
	delete(l.pods, p.Name)
	l.mu.Unlock()
	return nil
}

func (l *Lab) deletePodObject(ctx context.Context, name string, uid ktypes.UID) error {
	zero := int64(0)
	err := l.Kube.CoreV1().Pods(PodNamespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Pod %s: %w", name, err)
	}
	return nil
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
			{"K8S_POD_NAMESPACE", PodNamespace},
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
