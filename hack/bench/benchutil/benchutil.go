// Package benchutil holds what every benchmark under hack/bench measures with: percentiles of
// latencies, a process's CPU time and tabby-node's histograms.
package benchutil

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// Pct is the p-th percentile (nearest rank) of d, rounded to 10 µs; 0 for no samples.
func Pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return s[max(i, 0)].Round(10 * time.Microsecond)
}

// CPUTicks is a process's user + system CPU time in clock ticks (USER_HZ, 100 a second).
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// Fields after the command name's closing paren: state is field 3, utime 14, stime 15.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return u + st, nil
}

// CPUTime is CPUTicks as a duration.
func CPUTime(pid int) (time.Duration, error) {
	t, err := CPUTicks(pid)
	return time.Duration(t) * time.Second / 100, err
}

// Histogram is a Prometheus histogram's count and sum.
type Histogram struct{ Count, Sum float64 }

// Mean is the mean of what was observed between h and a later reading of the same histogram.
func (h Histogram) Mean(later Histogram) time.Duration {
	if later.Count <= h.Count {
		return 0
	}
	return time.Duration((later.Sum - h.Sum) / (later.Count - h.Count) * float64(time.Second))
}

// ReadHistogram reads histogram name (tabby_felix_apply_duration_seconds) from the node's
// tabby-node metrics.
func ReadHistogram(ctx context.Context, n *lab.Node, name string) (Histogram, error) {
	text, err := n.Metrics(ctx)
	if err != nil {
		return Histogram{}, err
	}
	var h Histogram
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case name + "_count":
			h.Count = v
		case name + "_sum":
			h.Sum = v
		}
	}
	return h, sc.Err()
}
