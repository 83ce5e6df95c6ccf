package soak

import (
	"fmt"
	"math"
	"sort"
)

// Series is one metric of one source (a node, a typha replica, the cluster) over the soak, in
// sample order.
type Series struct {
	Source, Metric string
	Values         []float64
}

// Slack is how much a series' last third may exceed its middle third before it counts as
// growth: Rel of the middle third's mean plus Abs (noise of a metric that is small or
// steps, e.g. a few goroutines of a reconnect in flight).
type Slack struct {
	Rel, Abs float64
}

// Slacks are the tolerances by metric; a metric not listed gets DefaultSlack.
var Slacks = map[string]Slack{
	// Sampled at quiet points, goroutines and descriptors return to the same level each time:
	// a slack of a few absorbs a reconnect in flight, and a leak of one per round shows
	// within a few dozen rounds.
	MetricRSS:        {Rel: 0.05, Abs: 3},
	MetricGoroutines: {Rel: 0.02, Abs: 8},
	MetricFDs:        {Rel: 0.02, Abs: 4},
	MetricConntrack:  {Rel: 0.25, Abs: 20},
	// Counts the datastore fixes are compared with the truth at every quiet point; here they
	// must simply not climb.
	MetricIptables: {Rel: 0.02, Abs: 2},
	MetricIPSet:    {Rel: 0.02, Abs: 1},
	MetricRoutes:   {Rel: 0.02, Abs: 1},
	MetricIPAM:     {Rel: 0.02, Abs: 1},
}

// DefaultSlack is the tolerance of a metric Slacks does not list.
var DefaultSlack = Slack{Rel: 0.10, Abs: 1}

// MinSamples is the shortest series the leak check judges: fewer cannot tell a warm-up from a
// trend.
const MinSamples = 6

// Growth is a series whose last third grew past its middle third's slack: a leak, or growth
// that has not levelled off yet.
type Growth struct {
	Source, Metric    string
	Middle, Last, Max float64 // means of the thirds, and the bound the last exceeded
}

func (g Growth) String() string {
	return fmt.Sprintf("%s %s: mean of the last third %.1f > %.1f (middle third %.1f plus slack)", g.Source, g.Metric, g.Last, g.Max, g.Middle)
}

// Leaks judges every series: the first third is warm-up (caches fill, pools grow), the middle
// third is the level, and the last third must stay within the metric's slack of it. A series
// with fewer than MinSamples samples is not judged and is returned in short.
func Leaks(series []Series) (growths []Growth, short []string) {
	for _, s := range series {
		n := len(s.Values)
		if n < MinSamples {
			short = append(short, s.Source+" "+s.Metric)
			continue
		}
		third := n / 3
		mid := mean(s.Values[third : n-third])
		last := mean(s.Values[n-third:])
		sl, ok := Slacks[s.Metric]
		if !ok {
			sl = DefaultSlack
		}
		bound := mid + math.Abs(mid)*sl.Rel + sl.Abs
		if last > bound {
			growths = append(growths, Growth{Source: s.Source, Metric: s.Metric, Middle: mid, Last: last, Max: bound})
		}
	}
	sort.Slice(growths, func(i, j int) bool {
		if growths[i].Source != growths[j].Source {
			return growths[i].Source < growths[j].Source
		}
		return growths[i].Metric < growths[j].Metric
	})
	return growths, short
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
