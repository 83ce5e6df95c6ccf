package syncer

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
)

// The cost of a pass after a pod was replaced on another node (the event a large cluster sends
// every agent most), against the cluster's size: it must not grow with the number of blocks. A
// full Build of the same datastore is beside it. The syncer runs as in tabby-node, over informer
// caches filled directly (no API server: their watch is not what is measured). The pass sends
// the pod's address out and its successor's in, and nothing that moves a route (the block's
// routes did not change).
func BenchmarkStreamPodReplaced(b *testing.B) {
	benchPodReplaced(b, func(b *testing.B, msgs []any) {
		if len(msgs) != 1 {
			b.Fatalf("sent %v, want the pods' addresses only", msgs)
		}
		// A block's first new version is two pods away from the one the syncer started with.
		if d, ok := msgs[0].(felix.PodIPsDelta); !ok || len(d.Removed) == 0 || len(d.Removed) != len(d.Added) {
			b.Fatalf("sent %#v, want the replaced pods' addresses out and their successors' in", msgs[0])
		}
	})
}

func benchPodReplaced(b *testing.B, check func(*testing.B, []any)) {
	for _, n := range []int{100, 1000, 10000} {
		s := newTestSyncer(b, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
		store := s.blocks.GetStore()
		var in Inputs
		for i := range n {
			blk := benchBlock(i, 1)
			if err := store.Add(blk); err != nil {
				b.Fatal(err)
			}
			in.Blocks = append(in.Blocks, blk)
		}
		in.NodeName = "n0"
		rv := 1
		b.Run(fmt.Sprintf("blocks=%d/incremental", n), func(b *testing.B) {
			s.pass()
			// Two versions of other nodes' blocks (b0 is n0's own) a pod apart, applied in turn,
			// made before the clock runs.
			next := make([][2]*v1.IPAMBlock, 500)
			for k := range next {
				rv += 2
				next[k] = [2]*v1.IPAMBlock{benchBlock(1+rv%(n-1), rv), benchBlock(1+rv%(n-1), rv+1)}
			}
			b.ReportAllocs()
			k, msgs := 0, 0
			for b.Loop() {
				blk := *next[k/2%len(next)][k%2] // shallow: the allocations are only read
				k++
				blk.ResourceVersion = "u" + strconv.Itoa(k) // a version the cache has not seen
				if err := store.Update(&blk); err != nil {
					b.Fatal(err)
				}
				s.mu.Lock()
				s.dirty.blocks[blk.Name] = struct{}{}
				s.mu.Unlock()
				m, _ := s.pass()
				check(b, m)
				msgs += len(m)
			}
			b.ReportMetric(float64(msgs)/float64(k), "msgs/op")
		})
		b.Run(fmt.Sprintf("blocks=%d/full", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Build(in, discard)
			}
		})
	}
}

// benchBlock is block i (of node n<i>, 30 pods on it), its pods renamed by version rv: a pod
// replaced, as the CNI plugin's ADD and DEL leave it.
func benchBlock(i, rv int) *v1.IPAMBlock {
	blk := &v1.IPAMBlock{}
	blk.Name, blk.ResourceVersion = fmt.Sprintf("b%d", i), strconv.Itoa(rv)
	blk.Spec = v1.IPAMBlockSpec{CIDR: fmt.Sprintf("10.%d.%d.%d/26", 244+i/1024, i/4%256, i%4*64), Affinity: fmt.Sprintf("host:n%d", i),
		Allocations: map[string]v1.Allocation{}}
	for k := range 30 {
		pod := fmt.Sprintf("p%d-%d", i, k)
		if k == rv%30 {
			pod = fmt.Sprintf("p%d-%d-v%d", i, k, rv)
		}
		blk.Spec.Allocations[strconv.Itoa(k)] = v1.Allocation{Handle: "k8s-pod-network.c" + pod, Namespace: "ns", Pod: pod, Node: fmt.Sprintf("n%d", i)}
	}
	return blk
}

// A Node changed elsewhere in the cluster (a label, an address: the kubelet's status reports are
// filtered out before): the syncer reads that node alone and sends it, and nothing else,
// whatever the cluster's size.
func BenchmarkStreamNodeChanged(b *testing.B) {
	benchNodeChanged(b, func(b *testing.B, msgs []any) {
		if len(msgs) != 1 {
			b.Fatalf("sent %v, want the node", msgs)
		}
		if _, ok := msgs[0].(model.NodeUpdate); !ok {
			b.Fatalf("sent %#v, want the node", msgs[0])
		}
	})
}

func benchNodeChanged(b *testing.B, check func(*testing.B, []any)) {
	for _, n := range []int{100, 1000} {
		s := newTestSyncer(b, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
		ns := s.nodes.GetStore()
		bs := s.blocks.GetStore()
		mk := func(i, rv int) *corev1.Node {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), ResourceVersion: strconv.Itoa(rv),
				Labels:      map[string]string{"rack": fmt.Sprintf("r%d", i/20+rv%2)}, // moved between racks at every version
				Annotations: map[string]string{v1.AnnotationBGPIPv4Address: fmt.Sprintf("198.51.%d.%d/16", 100+i/250, i%250+1)}}}
		}
		for i := range n {
			_ = ns.Add(mk(i, 1))
			_ = bs.Add(benchBlock(i, 1))
		}
		s.pass()
		rv := 1
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rv++
				_ = ns.Update(mk(7, rv))
				s.mu.Lock()
				s.dirty.nodes["n7"] = struct{}{}
				s.mu.Unlock()
				msgs, _ := s.pass()
				check(b, msgs)
			}
		})
	}
}

// EndpointSlices churning across a cluster of 1,000 nodes and 1,000 Services (three slices of 30
// endpoints each): an op is 3,000 slice updates, as the informer hands them to the syncer (its
// store, then the event), and the pass after them. Ten of the updates turn this node's endpoint of
// a Service unready or ready again: the pass sends those ten Services and nothing else; the other
// 2,990 (endpoints on other nodes) mark nothing; pass-ns/op is the pass alone. "first" is the
// first pass over the same objects.
func BenchmarkStreamEndpointSlices(b *testing.B) {
	const services, slicesPer, endpoints, nodes, local = 1000, 3, 30, 1000, 10
	mkSlice := func(svc, k, version int) *discoveryv1.EndpointSlice {
		sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("s%d-%d", svc, k), ResourceVersion: strconv.Itoa(version),
			Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("s%d", svc)}}, AddressType: discoveryv1.AddressTypeIPv4}
		for e := range endpoints {
			// Another node's endpoint moves at every version.
			node := fmt.Sprintf("n%d", 1+(svc*7+k*31+e*13+version)%(nodes-1))
			ready := true
			if svc < local && k == 0 && e == 0 {
				node, ready = "n0", version%2 == 0
			}
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		return sl
	}
	fill := func(b *testing.B) *Syncer {
		s := newTestSyncer(b, Config{NodeName: "n0", Logger: discard, OnUpdate: func([]any) {}})
		for i := range services {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("s%d", i), ResourceVersion: "1"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)},
					ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal},
				Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("203.0.113.%d", i%250+1)}}}}}
			svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
			if err := s.services.GetStore().Add(svc); err != nil {
				b.Fatal(err)
			}
			for k := range slicesPer {
				if err := s.slices.GetStore().Add(mkSlice(i, k, 2)); err != nil {
					b.Fatal(err)
				}
			}
		}
		return s
	}
	b.Run(fmt.Sprintf("services=%d/first", services), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			s := fill(b)
			b.StartTimer()
			msgs, _ := s.pass()
			if len(msgs) < services {
				b.Fatalf("the first pass sent %d messages, want the %d Services among them", len(msgs), services)
			}
		}
	})
	b.Run(fmt.Sprintf("services=%d/slice-updates=%d", services, services*slicesPer), func(b *testing.B) {
		s := fill(b)
		s.pass()
		// Two versions of every slice, applied in turn, made before the clock runs.
		var versions [2][]*discoveryv1.EndpointSlice
		for v := range versions {
			for i := range services {
				for k := range slicesPer {
					versions[v] = append(versions[v], mkSlice(i, k, 3+v))
				}
			}
		}
		store, h := s.slices.GetStore(), s.handlers["endpointslices"]
		b.ReportAllocs()
		op, msgs := 0, 0
		var passes time.Duration
		for b.Loop() {
			for _, sl := range versions[op%2] {
				old, _, _ := store.Get(sl)
				if err := store.Update(sl); err != nil {
					b.Fatal(err)
				}
				h.OnUpdate(old, sl)
			}
			op++
			start := time.Now()
			m, _ := s.pass()
			passes += time.Since(start)
			if len(m) != local {
				b.Fatalf("sent %d messages, want the %d Services whose endpoint on this node changed: %v", len(m), local, m)
			}
			msgs += len(m)
		}
		b.ReportMetric(float64(msgs)/float64(op), "msgs/op")
		b.ReportMetric(float64(passes.Nanoseconds())/float64(op), "pass-ns/op")
	})
}
