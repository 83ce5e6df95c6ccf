package ipam_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

// BenchmarkRealAssignRelease: one tabby-node's allocator against a real API server, one ADD then
// one DEL at a time (the CNI path without process start and veth setup).
func BenchmarkRealAssignRelease(b *testing.B) {
	e := sharedEnv(b)
	scenario(b, e, "bench", "10.244.64.0/18", 26, "bench-a")
	ctx := context.Background()
	a := ipam.New(kubeStore(b, e), ipam.Config{})
	// Warm: the node's block is claimed and cached, as on a running node.
	if _, err := a.Assign(ctx, ipam.Request{Handle: "net.bench-warm", Node: "bench-a"}); err != nil {
		b.Fatal(err)
	}
	var as, rs []time.Duration
	b.ResetTimer()
	for i := range b.N {
		h := fmt.Sprintf("net.bench-%d", i)
		t0 := time.Now()
		if _, err := a.Assign(ctx, ipam.Request{Handle: h, Node: "bench-a", Namespace: "default", Pod: h}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := a.ReleaseHandle(ctx, h); err != nil {
			b.Fatal(err)
		}
		as, rs = append(as, t1.Sub(t0)), append(rs, time.Since(t1))
	}
	b.ReportMetric(float64(percentile(as, 0.5).Microseconds())/1000, "assign-p50-ms")
	b.ReportMetric(float64(percentile(as, 0.99).Microseconds())/1000, "assign-p99-ms")
	b.ReportMetric(float64(percentile(rs, 0.5).Microseconds())/1000, "release-p50-ms")
}

// BenchmarkRealAssignConcurrent: 20 concurrent ADDs on one node (a node filling up after a drain).
func BenchmarkRealAssignConcurrent(b *testing.B) {
	e := sharedEnv(b)
	scenario(b, e, "benchc", "10.244.128.0/18", 26, "benchc-a")
	ctx := context.Background()
	a := ipam.New(kubeStore(b, e), ipam.Config{})
	if _, err := a.Assign(ctx, ipam.Request{Handle: "net.benchc-warm", Node: "benchc-a"}); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				h := fmt.Sprintf("net.benchc-%d-%d", b.N, i)
				t0 := time.Now()
				if _, err := a.Assign(ctx, ipam.Request{Handle: h, Node: "benchc-a", Namespace: "default", Pod: h}); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "assigns/s")
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "assign-p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "assign-p99-ms")
	// Give the addresses back so the next round (b.N grows) has room.
	for i := int64(1); i <= int64(b.N); i++ {
		_ = a.ReleaseHandle(ctx, fmt.Sprintf("net.benchc-%d-%d", b.N, i))
	}
}

// BenchmarkFakeAssignRelease is the allocator's own cost, without a datastore.
func BenchmarkFakeAssignRelease(b *testing.B) {
	s := ipamtest.NewStore()
	s.AddNode("n", nil)
	s.AddPool("p", "10.244.0.0/16", 26)
	a := ipam.New(s, ipam.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for i := range b.N {
		h := fmt.Sprint("net.", i)
		if _, err := a.Assign(ctx, ipam.Request{Handle: h, Node: "n"}); err != nil {
			b.Fatal(err)
		}
		if err := a.ReleaseHandle(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}
