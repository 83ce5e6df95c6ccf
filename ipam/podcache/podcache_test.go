package podcache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/podcache"
)

// countingStore counts the pod GETs the allocator makes.
type countingStore struct {
	ipam.Store
	gets atomic.Int32
}

func (s *countingStore) GetPod(ctx context.Context, ns, name string) (*ipam.Pod, error) {
	s.gets.Add(1)
	return s.Store.GetPod(ctx, ns, name)
}

// The pool choice reads a cached pod's annotation without a GET, and asks the API server about a
// pod the cache has not seen (here: one bound to another node).
func TestPoolChoiceFromCache(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server")
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const node = "podcache-node"
	if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, cidr := range map[string]string{"default-pool": "10.244.0.0/24", "annotated-pool": "10.244.1.0/24"} {
		if _, err := env.Client.IPPools().Create(ctx, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.IPPoolSpec{CIDR: cidr, BlockSize: 26}}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, nodeName string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{v1.AnnotationIPv4Pools: `["annotated-pool"]`}},
			Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "none"}}},
		}
		if _, err := env.Kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("here", node)
	pod("elsewhere", "another-node")

	c := podcache.New(env.Client, node)
	go c.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := c.Annotations("default", "here"); ok && c.HasSynced() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache did not see the node's pod within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := c.Annotations("default", "elsewhere"); ok {
		t.Fatal("the cache holds a pod of another node")
	}

	store := &countingStore{Store: ipam.NewKubeStore(env.Client)}
	a := ipam.New(store, ipam.Config{PodAnnotations: c.Annotations})
	as, err := a.Assign(ctx, ipam.Request{Handle: "net.here", Node: node, Namespace: "default", Pod: "here"})
	if err != nil {
		t.Fatal(err)
	}
	if as.Pool != "annotated-pool" || store.gets.Load() != 0 {
		t.Fatalf("cached pod: pool %q after %d pod GETs, want annotated-pool after none", as.Pool, store.gets.Load())
	}
	as, err = a.Assign(ctx, ipam.Request{Handle: "net.elsewhere", Node: node, Namespace: "default", Pod: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if as.Pool != "annotated-pool" || store.gets.Load() != 1 {
		t.Fatalf("uncached pod: pool %q after %d pod GETs, want annotated-pool after one", as.Pool, store.gets.Load())
	}
}
