package syncer

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/internal/testenv"
)

// An event that arrives while the agents are still busy with the previous pass's messages waits
// for them, and the lag metric says so: it runs from the event's arrival, not from the pass's
// start (which tabby_datastore_snapshot_seconds times).
func TestSyncerLagCountsTheWait(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control plane")
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var hold atomic.Bool
	gate, held := make(chan struct{}), make(chan struct{}, 1)
	passes := make(chan []any, 100)
	m := NewMetrics(prometheus.NewRegistry())
	s := New(env.Client, Config{NodeName: "lag-n0", Metrics: m, OnUpdate: func(msgs []any) {
		if hold.Load() {
			held <- struct{}{}
			<-gate
		}
		passes <- msgs
	}})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() { stop(); <-done }()
	wait := func(what string, cond func([]any) bool) {
		t.Helper()
		for {
			select {
			case msgs := <-passes:
				if cond(msgs) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no pass sent %s", what)
			}
		}
	}
	block := func(cidr string) func([]any) bool {
		return func(msgs []any) bool {
			return slices.ContainsFunc(msgs, func(m any) bool {
				u, ok := m.(model.BlockUpdate)
				return ok && u.Block.CIDR == netip.MustParsePrefix(cidr)
			})
		}
	}
	create := func(i int) {
		t.Helper()
		b := testBlock(i, "", 1)
		b.Name = "lag-" + b.Name
		if _, err := env.Client.IPAMBlocks().Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.IPAMBlocks().Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
	}
	wait("the first", func([]any) bool { return true })
	n0, slow0 := lagSamples(t, m)

	// The agents take the first block's pass and are slow with it.
	hold.Store(true)
	create(201)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the first block's pass never came")
	}
	hold.Store(false)
	// The second block's event arrives meanwhile, and waits.
	seen := testutil.ToFloat64(m.events.WithLabelValues("ipamblocks"))
	create(202)
	for testutil.ToFloat64(m.events.WithLabelValues("ipamblocks")) == seen {
		if ctx.Err() != nil {
			t.Fatal("the second block's event never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(busy)
	close(gate)
	wait("the second block", block("10.244.202.0/26"))

	// Both passes waited: the first in the agents' hands, the second for them. Timed from the
	// pass's start, the second would be much less.
	for {
		n, slow := lagSamples(t, m)
		if n-n0 >= 2 {
			if slow-slow0 < 2 {
				t.Fatalf("%d passes, %d of them %v or more after their oldest event; want both blocks' (the second waited %v for the agents)", n-n0, slow-slow0, busy/2, busy)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d passes' lag observed, want 2", n-n0)
		}
		time.Sleep(time.Millisecond)
	}
}

// busy is how long the test's agents hold a pass's messages.
const busy = 50 * time.Millisecond

// lagSamples counts the lag's samples, and those over busy/2.
func lagSamples(t *testing.T, m *Metrics) (all, slow uint64) {
	t.Helper()
	var d dto.Metric
	if err := m.lag.Write(&d); err != nil {
		t.Fatal(err)
	}
	all = d.Histogram.GetSampleCount()
	for _, b := range d.Histogram.GetBucket() {
		if b.GetUpperBound() == (busy / 2).Seconds() {
			return all, all - b.GetCumulativeCount()
		}
	}
	t.Fatalf("the lag has no bucket at %v", busy/2)
	return 0, 0
}
