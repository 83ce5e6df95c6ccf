package main

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tabbynet/tabby/internal/promtext"
)

// buckets are a Prometheus histogram's cumulative counts by upper bound, in seconds (+Inf
// last): the agents' lag metrics, which see every event of the churn where the probe sees
// one block per probeEvery.
type buckets map[float64]float64

const (
	// slowApply is where an apply or a lag counts as slow: a bucket bound of felix's histograms
	// (slowApplyLe, as Prometheus writes it).
	slowApply   = 50 * time.Millisecond
	slowApplyLe = "0.05"
	// probeEvery is how often the probe claims a block and times its way to the agents.
	probeEvery = 500 * time.Millisecond
)

func readBuckets(ms []promtext.Sample) buckets {
	b := buckets{}
	for _, m := range ms {
		le, err := strconv.ParseFloat(m.Labels["le"], 64) // "+Inf" parses
		if err == nil {
			b[le] += m.Value
		}
	}
	return b
}

// add adds o's counts to b, minus those of sub (a reading from before).
func (b buckets) add(o, sub buckets) {
	for le, n := range o {
		b[le] += n - sub[le]
	}
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile does: linear within the
// bucket that holds it; the largest finite bound when it falls in +Inf. ok is false without
// samples.
func (b buckets) quantile(q float64) (d time.Duration, ok bool) {
	les := slices.Sorted(func(yield func(float64) bool) {
		for le := range b {
			if !yield(le) {
				return
			}
		}
	})
	if len(les) == 0 || b[les[len(les)-1]] == 0 {
		return 0, false
	}
	rank := q * b[les[len(les)-1]]
	lower, below := 0.0, 0.0
	for _, le := range les {
		if b[le] >= rank {
			if math.IsInf(le, 1) {
				return time.Duration(lower * float64(time.Second)), true
			}
			frac := 0.0
			if n := b[le] - below; n > 0 {
				frac = (rank - below) / n
			}
			return time.Duration((lower + (le-lower)*frac) * float64(time.Second)), true
		}
		lower, below = le, b[le]
	}
	return 0, false
}

// total is the number of samples.
func (b buckets) total() float64 { return b[math.Inf(1)] }

// above is the number of samples over le, which must be one of the bounds.
func (b buckets) above(le float64) float64 { return b.total() - b[le] }
