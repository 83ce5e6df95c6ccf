// Package podcache keeps the annotations of one node's pods in memory (an informer on the pods
// bound to the node), so that choosing a pod's pool (tabby.dev/ipv4pools) costs no API round trip
// on the CNI ADD's path: the scheduler binds a pod, and tabby-node's watch hears of it at about
// the moment the kubelet does, long before the kubelet has set up the sandbox and called the
// plugin. A pod the cache has not seen is read from the API server (ipam.Config.PodAnnotations).
//
// It watches metadata only (PartialObjectMetadata): a pod's spec and status are most of its size
// and none of the use, and decoding full pods would cost tabby-node their code and memory.
package podcache

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Cache is an informer of the metadata of the pods bound to one node.
type Cache struct {
	factory  metadatainformer.SharedInformerFactory
	informer cache.SharedIndexInformer
}

// New builds the cache; Run starts it.
func New(cfg *rest.Config, node string) (*Cache, error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("pod cache: %w", err)
	}
	f := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	})
	inf := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Informer()
	_ = inf.SetTransform(trim)
	return &Cache{factory: f, informer: inf}, nil
}

// trim keeps what the pool choice reads.
func trim(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ManagedFields = nil
		m.Labels = nil
		m.OwnerReferences = nil
	}
	return obj, nil
}

// Run runs the informer until ctx ends. Until its first list is in (HasSynced), and for a pod
// it has not heard of yet, Annotations says so and the allocator asks the API server.
func (c *Cache) Run(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	<-ctx.Done()
	c.factory.Shutdown()
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
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, false
	}
	return m.Annotations, true
}
