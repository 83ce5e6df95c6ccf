// Package podcache keeps the annotations of one node's pods in memory (an informer on the pods
// bound to the node), so that choosing a pod's pool (tabby.dev/ipv4pools) costs no API round trip
// on the CNI ADD's path: the scheduler binds a pod, and tabby-node's watch hears of it at about
// the moment the kubelet does, long before the kubelet has set up the sandbox and called the
// plugin. A pod the cache has not seen is read from the API server (ipam.Config.PodAnnotations).
//
// It is a typed informer over tabby's own client (a metadata-only informer would link client-go's
// metadata client into every agent); each pod is cut down to its metadata as it arrives.
package podcache

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	watchpkg "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/client"
)

// Cache is an informer of the pods bound to one node, trimmed to their metadata.
type Cache struct {
	informer cache.SharedIndexInformer
}

// New builds the cache; Run starts it.
func New(c *client.Client, node string) *Cache {
	lw := c.Pods(metav1.NamespaceAll).ListWatch()
	onNode := fields.OneTermEqualSelector("spec.nodeName", node).String()
	list, watch := lw.ListWithContextFunc, lw.WatchFuncWithContext
	lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = onNode
		return list(ctx, o)
	}
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watchpkg.Interface, error) {
		o.FieldSelector = onNode
		return watch(ctx, o)
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	_ = inf.SetTransform(trim) // fails only on a started informer
	return &Cache{informer: inf}
}

// trim keeps what the pool choice reads: a pod's spec and status are most of its size and none
// of the use.
func trim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Annotations: p.Annotations,
	}}, nil
}

// Run runs the informer until ctx ends. Until its first list is in (HasSynced), and for a pod
// it has not heard of yet, Annotations says so and the allocator asks the API server.
func (c *Cache) Run(ctx context.Context) error {
	c.informer.RunWithContext(ctx)
	return nil
}

// HasSynced tells whether the first list of the node's pods is in.
func (c *Cache) HasSynced() bool { return c.informer.HasSynced() }

// Annotations returns the pod's annotations if the cache holds the pod (for
// ipam.Config.PodAnnotations).
func (c *Cache) Annotations(namespace, name string) (map[string]string, bool) {
	obj, ok, err := c.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.Pod).Annotations, true
}
