package flowlog

import (
	"log/slog"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/internal/nstest"
)

// A capture that saw nothing stops at once: its readers are blocked in the kernel, and stopping
// must not wait for a message that never comes (felix's loop waits for Stop).
func TestCaptureStopsWhenIdle(t *testing.T) {
	n := nstest.New(t)
	for i := range 3 {
		agg := NewAggregator("n", 100, Counters{})
		c, err := StartCapture(Opener(n.Enter), NewJoiner(agg, fakeResolver{}, 100, Counters{}), agg, time.Second, slog.Default())
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		stopped := make(chan struct{})
		go func() { c.Stop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Stop of an idle capture did not return within 10s", i)
		}
	}
}
