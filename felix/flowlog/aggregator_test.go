package flowlog

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tabbynet/tabby/apis/flow"
)

func counters() Counters {
	return Counters{
		Records:     prometheus.NewCounter(prometheus.CounterOpts{Name: "records"}),
		Dropped:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"reason"}),
		Connections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connections"}, []string{"verdict"}),
	}
}

func podKey(srcPod, dstPod string, port uint16, v flow.Verdict) Key {
	return Key{
		Src:      flow.Endpoint{Namespace: "demo", Pod: srcPod, IP: netip.MustParseAddr("10.244.1.1")},
		Dst:      flow.Endpoint{Namespace: "demo", Pod: dstPod, IP: netip.MustParseAddr("10.244.1.2")},
		Protocol: "TCP", DstPort: port, Verdict: v, Direction: "ingress", Rule: "no policy",
	}
}

func collect(t *testing.T, a *Aggregator, f flow.Filter) []flow.Record {
	t.Helper()
	var out []flow.Record
	if err := a.Flows(context.Background(), f, false, func(r flow.Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAggregatorSumsPerIntervalAndKey(t *testing.T) {
	c := counters()
	a := NewAggregator("node-1", 100, c)
	t0 := time.Unix(1000, 0)
	a.Add(t0, podKey("a", "b", 80, flow.Allow), 1, 3, 300)
	a.Add(t0.Add(time.Second), podKey("a", "b", 80, flow.Allow), 1, 2, 200)
	a.Add(t0.Add(time.Second), podKey("a", "b", 81, flow.Deny), 1, 1, 60)
	if got := collect(t, a, flow.Filter{}); len(got) != 0 {
		t.Fatalf("open interval served: %v", got)
	}
	a.Close(t0.Add(5 * time.Second))
	got := collect(t, a, flow.Filter{})
	if len(got) != 2 {
		t.Fatalf("want 2 records, got %+v", got)
	}
	r := got[0]
	if r.DstPort != 80 || r.Connections != 2 || r.Packets != 5 || r.Bytes != 500 || r.Node != "node-1" ||
		!r.Start.Equal(t0) || !r.End.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("allow record %+v", r)
	}
	if got := collect(t, a, flow.Filter{Verdict: flow.Deny}); len(got) != 1 || got[0].DstPort != 81 {
		t.Fatalf("deny filter: %+v", got)
	}
	if got := collect(t, a, flow.Filter{From: "demo/a", To: "demo/c"}); len(got) != 0 {
		t.Fatalf("to filter: %+v", got)
	}
	if n := testutil.ToFloat64(c.Records); n != 2 {
		t.Fatalf("records counter %v", n)
	}
	// The next interval starts where this one closed.
	a.Add(t0.Add(6*time.Second), podKey("a", "b", 80, flow.Allow), 1, 1, 1)
	a.Close(t0.Add(10 * time.Second))
	got = collect(t, a, flow.Filter{})
	if len(got) != 3 || !got[2].Start.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("second interval: %+v", got)
	}
}

func TestAggregatorCapDropsAndCounts(t *testing.T) {
	c := counters()
	a := NewAggregator("n", 3, c)
	now := time.Unix(1000, 0)
	for port := range uint16(5) {
		a.Add(now, podKey("a", "b", port, flow.Deny), 1, 1, 1)
	}
	// A key already open still counts at the cap.
	a.Add(now, podKey("a", "b", 0, flow.Deny), 1, 1, 1)
	if n := testutil.ToFloat64(c.Dropped.WithLabelValues(DropCap)); n != 2 {
		t.Fatalf("dropped %v, want 2", n)
	}
	a.Close(now.Add(time.Second))
	got := collect(t, a, flow.Filter{})
	if len(got) != 3 || got[0].Connections != 2 {
		t.Fatalf("%+v", got)
	}
	// The ring keeps the newest maxRecords closed records.
	for i := range 2 {
		a.Add(now, podKey("x", "y", uint16(100+i), flow.Allow), 1, 1, 1)
		a.Close(now.Add(time.Duration(i+2) * time.Second))
	}
	got = collect(t, a, flow.Filter{})
	if len(got) != 3 || got[0].DstPort != 2 || got[2].DstPort != 101 {
		t.Fatalf("ring: %+v", got)
	}
	a.SetMaxRecords(2)
	if got = collect(t, a, flow.Filter{}); len(got) != 2 || got[1].DstPort != 101 {
		t.Fatalf("shrunk ring: %+v", got)
	}
}

func TestAggregatorFollowAndSlowSubscriber(t *testing.T) {
	c := counters()
	a := NewAggregator("n", 10000, c)
	now := time.Unix(1000, 0)
	a.Add(now, podKey("a", "b", 1, flow.Deny), 1, 1, 1)
	a.Close(now)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan flow.Record, 10)
	done := make(chan error, 1)
	go func() {
		done <- a.Flows(ctx, flow.Filter{Verdict: flow.Deny}, true, func(r flow.Record) error { got <- r; return nil })
	}()
	if r := <-got; r.DstPort != 1 {
		t.Fatalf("kept record first: %+v", r)
	}
	// A subscriber that never reads: it must not hold up Close.
	slowCtx, stopSlow := context.WithCancel(context.Background())
	block := make(chan struct{})
	slowDone := make(chan error, 1)
	go func() {
		slowDone <- a.Flows(slowCtx, flow.Filter{}, true, func(flow.Record) error { <-block; return nil })
	}()
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.subs) == 2 })
	for i := range subscriberBuffer + 10 {
		a.Add(now, podKey("a", "b", uint16(10+i%50000), flow.Allow), 1, 1, 1)
		if i%100 == 0 {
			a.Add(now, podKey("a", "b", 2, flow.Deny), 1, 1, 1)
		}
		a.Close(now)
	}
	if n := testutil.ToFloat64(c.Dropped.WithLabelValues(DropSubscriber)); n < 9 {
		t.Fatalf("slow subscriber drops %v, want at least 9", n)
	}
	deadline := time.After(10 * time.Second)
	for n := 0; n < (subscriberBuffer+10+99)/100; n++ {
		select {
		case r := <-got:
			if r.Verdict != flow.Deny || r.DstPort != 2 {
				t.Fatalf("follower got %+v", r)
			}
		case <-deadline:
			t.Fatalf("follower got %d deny records", n)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follow ended with %v", err)
	}
	stopSlow()
	close(block)
	if err := <-slowDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("slow follow ended with %v", err)
	}
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.subs) == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
