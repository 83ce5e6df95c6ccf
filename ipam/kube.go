package ipam

import (
	"context"
	"encoding/json"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
)

// KubeStore is the Store over the Kubernetes API (tabby's CRDs, Nodes, Pods, Namespaces).
type KubeStore struct {
	c *client.Client
	// listRV is the resourceVersion of the lists of pools and IPAM objects: "" (consistent),
	// or "0" (ListsFromCache).
	listRV string
}

var _ Store = (*KubeStore)(nil)

// NewKubeStore wraps a tabby client.
func NewKubeStore(c *client.Client) *KubeStore { return &KubeStore{c: c} }

// ListsFromCache has the API server answer the lists of pools, blocks, affinities and handles
// from its watch cache (resourceVersion "0") instead of with a consistent read. A consistent list
// waits until the watch cache has caught up with etcd, which after writes to other resources
// takes up to the cache's 100 ms progress tick, on every CNI call of the direct path (a fresh
// process whose first list that is). The allocator does not rely on
// fresh lists: every write is a compare-and-swap or a create, and a stale view only costs a
// retry; the repairs it makes when it loads a node are checked with a GET first.
func (s *KubeStore) ListsFromCache() *KubeStore {
	s.listRV = "0"
	return s
}

func (s *KubeStore) listOpts() metav1.ListOptions {
	return metav1.ListOptions{ResourceVersion: s.listRV}
}

func deleteOpts(rv string) metav1.DeleteOptions {
	if rv == "" {
		return metav1.DeleteOptions{}
	}
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}
}

func (s *KubeStore) ListPools(ctx context.Context) ([]v1.IPPool, error) {
	l, err := s.c.IPPools().List(ctx, s.listOpts())
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (s *KubeStore) GetBlock(ctx context.Context, name string) (*v1.IPAMBlock, error) {
	return s.c.IPAMBlocks().Get(ctx, name)
}

func (s *KubeStore) ListBlocks(ctx context.Context) ([]v1.IPAMBlock, error) {
	l, err := s.c.IPAMBlocks().List(ctx, s.listOpts())
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (s *KubeStore) CreateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error) {
	return s.c.IPAMBlocks().Create(ctx, b)
}

func (s *KubeStore) UpdateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error) {
	return s.c.IPAMBlocks().Update(ctx, b)
}

func (s *KubeStore) DeleteBlock(ctx context.Context, name, rv string) error {
	return s.c.IPAMBlocks().Delete(ctx, name, deleteOpts(rv))
}

func (s *KubeStore) ListAffinities(ctx context.Context) ([]v1.BlockAffinity, error) {
	l, err := s.c.BlockAffinities().List(ctx, s.listOpts())
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (s *KubeStore) CreateAffinity(ctx context.Context, a *v1.BlockAffinity) (*v1.BlockAffinity, error) {
	return s.c.BlockAffinities().Create(ctx, a)
}

func (s *KubeStore) DeleteAffinity(ctx context.Context, name, rv string) error {
	return s.c.BlockAffinities().Delete(ctx, name, deleteOpts(rv))
}

func (s *KubeStore) GetHandle(ctx context.Context, name string) (*v1.IPAMHandle, error) {
	return s.c.IPAMHandles().Get(ctx, name)
}

func (s *KubeStore) ListHandles(ctx context.Context) ([]v1.IPAMHandle, error) {
	l, err := s.c.IPAMHandles().List(ctx, s.listOpts())
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (s *KubeStore) CreateHandle(ctx context.Context, h *v1.IPAMHandle) (*v1.IPAMHandle, error) {
	return s.c.IPAMHandles().Create(ctx, h)
}

func (s *KubeStore) UpdateHandle(ctx context.Context, h *v1.IPAMHandle) (*v1.IPAMHandle, error) {
	return s.c.IPAMHandles().Update(ctx, h)
}

func (s *KubeStore) DeleteHandle(ctx context.Context, name, rv string) error {
	return s.c.IPAMHandles().Delete(ctx, name, deleteOpts(rv))
}

// The Nodes' annotation errors are not IPAM's to report: tabby-node's syncer reads the same
// Nodes and logs them.

func (s *KubeStore) GetNode(ctx context.Context, name string) (*model.Node, error) {
	n, err := s.c.Nodes().Get(ctx, name)
	if err != nil {
		return nil, err
	}
	out, _ := validation.ParseNode(n)
	return &out, nil
}

func (s *KubeStore) ListNodes(ctx context.Context) ([]model.Node, error) {
	l, err := s.c.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]model.Node, 0, len(l.Items))
	for i := range l.Items {
		n, _ := validation.ParseNode(&l.Items[i])
		out = append(out, n)
	}
	return out, nil
}

func (s *KubeStore) SetNodeAnnotation(ctx context.Context, node, key, value string) error {
	var v any = value
	if value == "" {
		v = nil // JSON merge patch: null deletes
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	if err != nil {
		return err
	}
	_, err = s.c.Nodes().Patch(ctx, node, types.MergePatchType, patch)
	return err
}

func podOf(p *corev1.Pod) Pod {
	out := Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), NodeName: p.Spec.NodeName, Annotations: p.Annotations,
		HostNetwork: p.Spec.HostNetwork, Deleting: p.DeletionTimestamp != nil,
		Terminated: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed}
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out.IPs = append(out.IPs, a)
		}
	}
	if len(out.IPs) == 0 && p.Status.PodIP != "" {
		// Older writers set only the singular field.
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out.IPs = append(out.IPs, a)
		}
	}
	return out
}

func (s *KubeStore) GetPod(ctx context.Context, namespace, name string) (*Pod, error) {
	p, err := s.c.Pods(namespace).Get(ctx, name)
	if err != nil {
		return nil, err
	}
	out := podOf(p)
	return &out, nil
}

func (s *KubeStore) ListPods(ctx context.Context, node string) ([]Pod, error) {
	opts := metav1.ListOptions{}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	l, err := s.c.Pods("").List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]Pod, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, podOf(&l.Items[i]))
	}
	return out, nil
}

func (s *KubeStore) GetNamespaceAnnotations(ctx context.Context, name string) (map[string]string, error) {
	ns, err := s.c.Namespaces().Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return ns.Annotations, nil
}
