package bird

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkToRWithdrawal cuts a node from an FRR ToR (iptables DROP both ways) b.N times and
// reports, at the ToR, the time from the cut until the ToR has dropped the session (p50, max):
// with BFD 300 ms x 3 (and a 30 s hold time), and with the hold timer alone (FRR's datacenter
// timers: 3 s keepalive, 9 s hold). With BFD the node's block is then withdrawn; with the hold
// timer FRR keeps it as stale for the graceful-restart time the node asked for (120 s), which
// the figure does not wait for. The session is brought back up between cuts, untimed.
//
//	go test ./bird -run '^$' -bench ToRWithdrawal -benchtime 8x
func BenchmarkToRWithdrawal(b *testing.B) {
	for _, c := range []struct {
		name string
		bfd  bool
	}{{"bfd-300msx3", true}, {"hold-9s", false}} {
		b.Run(c.name, func(b *testing.B) {
			r := startBFDToR(b, false, c.bfd)
			var took []time.Duration
			stale := 0
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				restore := cutFrom(b, r.tor)
				var wasStale bool
				took = append(took, waitFor(b, "the ToR drops the cut node's session", start, 30*time.Second, func() bool {
					has, st := frrRoute(r.frr.vtysh, r.nodeBlock)
					wasStale = st
					return !has || st
				}, func() string { return r.frr.vtysh("show bgp summary") }))
				if wasStale {
					stale++
				}
				b.StopTimer()
				restore()
				r.waitUp(b)
				b.StartTimer()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
			b.ReportMetric(float64(stale)/float64(b.N), "kept-stale")
			b.ReportMetric(0, "ns/op")
		})
	}
}
