package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/typha/feed"
)

type allowAll struct{}

func (allowAll) Authorize(context.Context, string, schema.GroupVersionResource) error { return nil }

var blocks = v1.SchemeGroupVersion.WithResource(v1.ResourceIPAMBlocks)

func block(rv int) *v1.IPAMBlock {
	b := &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "10-244-0-0-26", ResourceVersion: strconv.Itoa(rv)}, Spec: v1.IPAMBlockSpec{CIDR: "10.244.0.0/26"}}
	b.Spec.Allocations = map[string]v1.Allocation{}
	for i := range 30 { // a node's 30 pods, as in a 1,000-node cluster
		b.Spec.Allocations[strconv.Itoa(i)] = v1.Allocation{Handle: fmt.Sprintf("k8s-pod-network.%064d", i), Namespace: "default", Pod: fmt.Sprintf("web-%d", i), Node: "node-1"}
	}
	return b
}

// BenchmarkFanOut is one IPAMBlock event sent to every watcher, each on a TLS connection of its
// own as every agent has (HTTP/2, or HTTP/1.1); ns/op is per event until every watcher has it,
// cpu-µs/event/watcher the CPU of client and server (both run in this process).
func BenchmarkFanOut(b *testing.B) {
	for _, proto := range []string{"h2", "http/1.1"} {
		for _, watchers := range []int{10, 100} {
			b.Run(fmt.Sprintf("%s/watchers=%d", proto, watchers), func(b *testing.B) { benchFanOut(b, proto, watchers) })
		}
	}
}

func benchFanOut(b *testing.B, proto string, watchers int) {
	f := feed.New(feed.Config{Kind: v1.SchemeGroupVersion.WithKind("IPAMBlock")})
	if err := f.Replace(nil, "1"); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(New(map[schema.GroupVersionResource]*feed.Feed{blocks: f}, allowAll{}, nil, nil))
	srv.EnableHTTP2 = proto == "h2"
	srv.StartTLS()
	defer srv.Close()
	var received atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range watchers {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}}
		tr.ForceAttemptHTTP2 = proto == "h2"
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+Path(blocks)+"?watch=1&resourceVersion=1", nil)
		req.Header.Set("Authorization", "Bearer x")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.ProtoMajor != map[string]int{"h2": 2, "http/1.1": 1}[proto] {
			b.Fatalf("served as %s", resp.Proto)
		}
		wg.Go(func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				received.Add(1)
			}
		})
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		if err := f.Update(block(2 + i)); err != nil {
			b.Fatal(err)
		}
		// Paced as a churn is: each event is sent on its own, not in a batch.
		want := int64(watchers) * int64(i+1)
		for received.Load() < want {
			time.Sleep(20 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N)/float64(watchers), "cpu-µs/event/watcher")
}

// cpuTime is the process's CPU time so far, user and system (client and server).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
