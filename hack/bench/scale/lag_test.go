package main

import (
	"math"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	// 100 samples: 50 up to 1 ms, 40 in (1, 10] ms, 9 in (10, 100] ms, 1 over 100 ms.
	b := buckets{0.001: 50, 0.01: 90, 0.1: 99, math.Inf(1): 100}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, time.Millisecond},
		{0.7, 5500 * time.Microsecond}, // 20 of the 40 in (1, 10]
		{0.99, 100 * time.Millisecond},
		{1, 100 * time.Millisecond}, // in +Inf: the largest finite bound
	} {
		if got, ok := b.quantile(tc.q); !ok || got != tc.want {
			t.Errorf("q %v: %v %v, want %v", tc.q, got, ok, tc.want)
		}
	}
	if _, ok := (buckets{0.001: 0, math.Inf(1): 0}).quantile(0.5); ok {
		t.Error("a quantile of no samples")
	}
	if b.total() != 100 || b.above(0.01) != 10 {
		t.Errorf("total %v, above 10 ms %v; want 100 and 10", b.total(), b.above(0.01))
	}
	sum := buckets{}
	sum.add(buckets{0.001: 5, math.Inf(1): 9}, buckets{0.001: 3, math.Inf(1): 4})
	if sum[0.001] != 2 || sum[math.Inf(1)] != 5 {
		t.Errorf("add: %v", sum)
	}
}
