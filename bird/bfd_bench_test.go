package bird

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkToRWithdrawal cuts a node from an FRR ToR (iptables DROP both ways) b.N times and
// reports, at the ToR, the time from the cut until the node's block is withdrawn (p50, max):
// with BFD 300 ms x 3 (and a 30 s hold time), and with the hold timer alone (FRR's datacenter
// timers: 3 s keepalive, 9 s hold). The session is brought back up between cuts, untimed.
//
//	go test ./bird -run '^$' -bench ToRWithdrawal -benchtime 10x
func BenchmarkToRWithdrawal(b *testing.B) {
	for _, c := range []struct {
		name string
		bfd  bool
	}{{"bfd-300msx3", true}, {"hold-9s", false}} {
		b.Run(c.name, func(b *testing.B) {
			r := startBFDToR(b, false, c.bfd)
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				restore := cutFrom(b, r.tor)
				took = append(took, waitFor(b, "the ToR withdraws the cut node's block", start, 30*time.Second,
					func() bool { return !frrHas(r.frr.vtysh, r.nodeBlock) }, func() string { return r.frr.vtysh("show bgp summary") }))
				b.StopTimer()
				restore()
				r.waitUp(b)
				b.StartTimer()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
