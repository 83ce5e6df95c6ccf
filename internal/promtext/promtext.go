// Package promtext reads Prometheus text expositions (a component's /metrics) for tests and
// benchmarks: the samples of the metrics asked for, with their labels.
package promtext

import (
	"bufio"
	"slices"
	"strconv"
	"strings"
)

// Sample is one sample of a metric.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Parse reads the samples of the named metrics, by name.
func Parse(text string, want ...string) map[string][]Sample {
	out := map[string][]Sample{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		labels := map[string]string{}
		var value string
		if rest == "" {
			name, value, _ = strings.Cut(line, " ")
		} else {
			ls, v, _ := strings.Cut(rest, "} ")
			value = v
			for _, kv := range strings.Split(ls, ",") {
				k, val, ok := strings.Cut(kv, "=")
				if ok {
					labels[k] = strings.Trim(val, `"`)
				}
			}
		}
		if !slices.Contains(want, name) {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		f, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] = append(out[name], Sample{Labels: labels, Value: f})
	}
	return out
}

// Sum adds the samples keep accepts (all of them when keep is nil).
func Sum(ss []Sample, keep func(labels map[string]string) bool) float64 {
	var s float64
	for _, m := range ss {
		if keep == nil || keep(m.Labels) {
			s += m.Value
		}
	}
	return s
}

// ByLabel adds the samples by the value of one label.
func ByLabel(ss []Sample, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ss {
		out[m.Labels[label]] += m.Value
	}
	return out
}
