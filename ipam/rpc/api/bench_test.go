package api_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

var benchReq = &api.AssignRequest{Handle: "k8s-pod-network.0123456789abcdef0123456789abcdef", Node: "node-a", Namespace: "bench", Pod: "pod-001", MultiFamily: true, AssignIPv6: "false"}

// The transport's own cost per call over a real unix socket (the service answers at once).
// cpu-ns/op is the CPU time of client and server together (both are in this process): on a
// loaded machine it moves less than the wall time.
func BenchmarkSocketCall(b *testing.B) {
	sock := serve(b, fake(nil))
	b.Run("reuse", func(b *testing.B) {
		c, err := api.Dial(sock)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		cpu := cpuTime()
		for b.Loop() {
			if _, err := c.Assign(ctx, benchReq); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
	// As the CNI plugin calls: a new process, so a new connection per call.
	b.Run("fresh", func(b *testing.B) {
		ctx := context.Background()
		cpu := cpuTime()
		for b.Loop() {
			c, err := api.Dial(sock)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Assign(ctx, benchReq); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
