package soak

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/promtext"
)

// The metrics a sample holds.
const (
	MetricRSS        = "rss_mib"
	MetricGoroutines = "goroutines"
	MetricFDs        = "open_fds"
	MetricIptables   = "iptables_rules"
	MetricIPSet      = "ipset_members"
	MetricRoutes     = "routes"
	MetricConntrack  = "conntrack"
	MetricIPAM       = "ipam_in_use"
)

// Metrics is the order of the plot's panels.
var Metrics = []string{MetricRSS, MetricGoroutines, MetricFDs, MetricIptables, MetricIPSet, MetricRoutes, MetricConntrack, MetricIPAM}

// SourceCluster is the source of cluster-wide counts (IPAM).
const SourceCluster = "cluster"

// Point is one value of one metric of one source at one time.
type Point struct {
	At             time.Duration // since the soak started
	Source, Metric string
	Value          float64
}

// ProcStats are a process's resident memory and open file descriptors.
type ProcStats struct {
	RSSBytes int64
	FDs      int
}

// ReadProc reads pid's RSS from /proc/PID/status and counts /proc/PID/fd.
func ReadProc(pid int) (ProcStats, error) {
	if pid <= 0 {
		return ProcStats{}, fmt.Errorf("process %d does not run", pid)
	}
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return ProcStats{}, err
	}
	defer f.Close()
	rss, err := ParseVmRSS(f)
	if err != nil {
		return ProcStats{}, fmt.Errorf("process %d: %w", pid, err)
	}
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return ProcStats{}, err
	}
	return ProcStats{RSSBytes: rss, FDs: len(fds)}, nil
}

// ParseVmRSS reads the VmRSS line of a /proc/PID/status ("VmRSS:     51234 kB"), in bytes.
func ParseVmRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q: want \"<n> kB\"", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS %q: %w", f[0], err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line (a kernel thread, or a zombie)")
}

// CountRules counts the rules (-A lines) of an iptables-save dump.
func CountRules(dump string) int {
	n := 0
	for _, line := range strings.Split(dump, "\n") {
		if strings.HasPrefix(line, "-A ") {
			n++
		}
	}
	return n
}

// CountSetMembers counts the members of the sets whose names start with prefix in `ipset list`
// output.
func CountSetMembers(list, prefix string) int {
	n := 0
	ours, members := false, false
	for _, line := range strings.Split(list, "\n") {
		switch {
		case strings.HasPrefix(line, "Name: "):
			ours = strings.HasPrefix(strings.TrimPrefix(line, "Name: "), prefix)
			members = false
		case line == "Members:":
			members = true
		case strings.TrimSpace(line) == "":
			members = false
		case members && ours:
			n++
		}
	}
	return n
}

// ipsetPrefix marks tabby's ipsets (felix/ipsets.Prefix).
const ipsetPrefix = "tabby-"

// sampleNode reads the node's agent process and dataplane counts.
func sampleNode(ctx context.Context, n *lab.Node) (map[string]float64, error) {
	out := map[string]float64{}
	ps, err := ReadProc(n.PID())
	if err != nil {
		return nil, fmt.Errorf("node %s tabby-node: %w", n.Name, err)
	}
	out[MetricRSS] = float64(ps.RSSBytes) / (1 << 20)
	out[MetricFDs] = float64(ps.FDs)
	text, err := n.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	g, err := goroutines(text)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	out[MetricGoroutines] = g
	dump, err := n.Exec(ctx, "iptables-save")
	if err != nil {
		return nil, fmt.Errorf("node %s iptables-save: %w", n.Name, err)
	}
	out[MetricIptables] = float64(CountRules(dump))
	sets, err := n.Exec(ctx, "ipset", "list")
	if err != nil {
		return nil, fmt.Errorf("node %s ipset list: %w", n.Name, err)
	}
	out[MetricIPSet] = float64(CountSetMembers(sets, ipsetPrefix))
	rs, err := n.TabbyRoutes(ctx)
	if err != nil {
		return nil, fmt.Errorf("node %s routes: %w", n.Name, err)
	}
	out[MetricRoutes] = float64(len(rs))
	ct, err := n.Exec(ctx, "cat", "/proc/sys/net/netfilter/nf_conntrack_count")
	if err != nil {
		return nil, fmt.Errorf("node %s conntrack count: %w", n.Name, err)
	}
	c, err := strconv.ParseFloat(strings.TrimSpace(ct), 64)
	if err != nil {
		return nil, fmt.Errorf("node %s conntrack count %q: %w", n.Name, ct, err)
	}
	out[MetricConntrack] = c
	return out, nil
}

// sampleTypha reads a tabby-typha replica's process.
func sampleTypha(ctx context.Context, t *lab.Typha) (map[string]float64, error) {
	ps, err := ReadProc(t.Pid())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	text, err := httpGet(ctx, "http://"+t.Metrics+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s metrics: %w", t.Name, err)
	}
	g, err := goroutines(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	return map[string]float64{MetricRSS: float64(ps.RSSBytes) / (1 << 20), MetricFDs: float64(ps.FDs), MetricGoroutines: g}, nil
}

func goroutines(text string) (float64, error) {
	const name = "go_goroutines"
	ss := promtext.Parse(text, name)[name]
	if len(ss) != 1 {
		return 0, fmt.Errorf("metrics: %d samples of %s, want 1", len(ss), name)
	}
	return ss[0].Value, nil
}

// ipamInUse counts the allocated addresses of every IPAM block.
func ipamInUse(ctx context.Context, l *lab.Lab) (int, error) {
	list, err := l.Client.IPAMBlocks().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list IPAMBlocks: %w", err)
	}
	n := 0
	for _, b := range list.Items {
		n += len(b.Spec.Allocations)
	}
	return n, nil
}

// takeSample reads every source once.
func takeSample(ctx context.Context, l *lab.Lab, at time.Duration) ([]Point, error) {
	var pts []Point
	add := func(source string, m map[string]float64) {
		for _, metric := range Metrics {
			if v, ok := m[metric]; ok {
				pts = append(pts, Point{At: at, Source: source, Metric: metric, Value: v})
			}
		}
	}
	for _, n := range l.Nodes() {
		m, err := sampleNode(ctx, n)
		if err != nil {
			return nil, err
		}
		add(n.Name, m)
	}
	for _, t := range l.Typhas {
		m, err := sampleTypha(ctx, t)
		if err != nil {
			return nil, err
		}
		add(t.Name, m)
	}
	used, err := ipamInUse(ctx, l)
	if err != nil {
		return nil, err
	}
	add(SourceCluster, map[string]float64{MetricIPAM: float64(used)})
	return pts, nil
}

// ToSeries groups points by source and metric, sorted by source then metric.
func ToSeries(pts []Point) []Series {
	idx := map[[2]string]int{}
	var out []Series
	for _, p := range pts {
		k := [2]string{p.Source, p.Metric}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Series{Source: p.Source, Metric: p.Metric})
		}
		out[i].Values = append(out[i].Values, p.Value)
	}
	slices.SortFunc(out, func(a, b Series) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		return strings.Compare(a.Metric, b.Metric)
	})
	return out
}

// WriteCSV writes the points as elapsed_s,source,metric,value rows.
func WriteCSV(w io.Writer, pts []Point) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"elapsed_s", "source", "metric", "value"}); err != nil {
		return err
	}
	for _, p := range pts {
		rec := []string{strconv.FormatFloat(p.At.Seconds(), 'f', 1, 64), p.Source, p.Metric, strconv.FormatFloat(p.Value, 'f', -1, 64)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
