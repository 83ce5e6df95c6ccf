package benchutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

// Usage is one process's resident memory and CPU share over the idle window.
type Usage struct {
	Node  string
	RSSKB int
	// AnonKB is the agent's own memory (RssAnon): RSS also counts the binary's pages, which every
	// tabby-node on a host shares.
	AnonKB int
	CPU    float64 // percent of one core
}

// AgentPID finds tabby-node among the processes of the node's namespace (`ip netns exec`
// execs it in place, so it is the process the lab started).
func AgentPID(ctx context.Context, n *lab.Node) (int, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "pids", n.NS).Output()
	if err != nil {
		return 0, fmt.Errorf("ip netns pids %s: %w", n.NS, err)
	}
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(comm)) == "tabby-node" {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("node %s: no tabby-node process in %s", n.Name, n.NS)
}

// RSSKB is VmRSS from /proc/<pid>/status.
func RSSKB(pid int) (int, error) { return StatusKB(pid, "VmRSS:") }

// StatusKB reads one "<field> N kB" line of /proc/<pid>/status.
func StatusKB(pid int, field string) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// MeasureUsage samples every agent's CPU ticks at the start and end of the same window, and its
// RSS at the end.
func MeasureUsage(ctx context.Context, nodes []*lab.Node, window time.Duration) ([]Usage, error) {
	pids := make([]int, len(nodes))
	before := make([]int64, len(nodes))
	for i, n := range nodes {
		var err error
		if pids[i], err = AgentPID(ctx, n); err != nil {
			return nil, err
		}
		if before[i], err = CPUTicks(pids[i]); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window):
	}
	elapsed := time.Since(start).Seconds()
	out := make([]Usage, len(nodes))
	for i, n := range nodes {
		after, err := CPUTicks(pids[i])
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		rss, err := RSSKB(pids[i])
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		anon, err := StatusKB(pids[i], "RssAnon:")
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		out[i] = Usage{Node: n.Name, RSSKB: rss, AnonKB: anon, CPU: float64(after-before[i]) / clockTicks / elapsed * 100}
	}
	return out, nil
}

// MedianMax of a non-empty list.
func MedianMax[T int | float64](xs []T) (T, T) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}

// AgentsCPU is the CPU time (user + system) the nodes' agents have used so far, summed.
func AgentsCPU(ctx context.Context, nodes []*lab.Node) (time.Duration, error) {
	var sum time.Duration
	for _, n := range nodes {
		pid, err := AgentPID(ctx, n)
		if err != nil {
			return 0, err
		}
		d, err := CPUTime(pid)
		if err != nil {
			return 0, fmt.Errorf("node %s: %w", n.Name, err)
		}
		sum += d
	}
	return sum, nil
}

// ProfileAgents starts a CPU profile of every node's agent for d, and returns a function that
// waits for them and writes <dir>/<label>-<node>.cpu (`go tool pprof` takes them all at once:
// the cluster's cost of what ran meanwhile).
func ProfileAgents(ctx context.Context, nodes []*lab.Node, dir, label string, d time.Duration) func() error {
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			b, err := n.MetricsPath(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(d.Seconds()))))
			if err == nil {
				err = os.MkdirAll(dir, 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, label+"-"+n.Name+".cpu"), b, 0o644)
			}
			errs <- err
		}()
	}
	return func() error {
		var all []error
		for range nodes {
			all = append(all, <-errs)
		}
		return errors.Join(all...)
	}
}
