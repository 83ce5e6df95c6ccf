package netpol

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

// Outcome is what one probe saw.
type Outcome struct {
	OK  bool
	Err string // why not, shortened ("timeout", "refused", …)
}

func (o Outcome) String() string {
	if o.OK {
		return "allowed"
	}
	return "denied (" + o.Err + ")"
}

// Prober runs probes in parallel.
type Prober struct {
	W *World
	// Timeout bounds one probe: a denied probe costs this much, an allowed one a millisecond.
	Timeout time.Duration
	// Parallel is how many probes run at once.
	Parallel int
}

// Run tries every probe once and returns what each saw.
func (pr *Prober) Run(ctx context.Context, probes []Probe) map[Probe]Outcome {
	out := make(map[Probe]Outcome, len(probes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(pr.Parallel, 1))
	for _, p := range probes {
		from, to := pr.W.Pod(p.From), pr.W.Pod(p.To)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := lab.Probe(ctx, from.NS, netip.AddrPortFrom(to.IP, uint16(p.Port)), p.Protocol, pr.Timeout)
			o := Outcome{OK: err == nil}
			if err != nil {
				o.Err = shortErr(err)
			}
			mu.Lock()
			out[p] = o
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// shortErr names the way a probe failed: a policy that drops shows as a timeout, one that
// rejects as refused.
func shortErr(err error) string {
	s := err.Error()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), strings.Contains(s, "i/o timeout"):
		return "timeout"
	case strings.Contains(s, "connection refused"):
		return "refused"
	case strings.Contains(s, "connection reset"):
		return "reset"
	case strings.Contains(s, "no route to host"):
		return "no route"
	case strings.Contains(s, "network is unreachable"):
		return "unreachable"
	}
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// Mismatch is a probe whose outcome is not the oracle's verdict.
type Mismatch struct {
	Probe    Probe
	Expected Verdict
	Got      Outcome
}

// Diff lists the probes whose outcome differs from the verdict, in probe order.
func Diff(probes []Probe, want map[Probe]Verdict, got map[Probe]Outcome) []Mismatch {
	var ms []Mismatch
	for _, p := range probes {
		if g, ok := got[p]; ok && g.OK != want[p].Allowed {
			ms = append(ms, Mismatch{Probe: p, Expected: want[p], Got: g})
		}
	}
	return ms
}

// MismatchTable renders mismatches one per line (at most limit), with the oracle's reason.
func MismatchTable(ms []Mismatch, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %-6s %-9s %-9s %-20s %s\n", "FROM", "TO", "PORT", "EXPECTED", "GOT", "ORACLE")
	for i, m := range ms {
		if i == limit {
			fmt.Fprintf(&b, "… and %d more\n", len(ms)-limit)
			break
		}
		exp := "denied"
		if m.Expected.Allowed {
			exp = "allowed"
		}
		fmt.Fprintf(&b, "%-6s %-6s %-9s %-9s %-20s %s\n", m.Probe.From, m.Probe.To,
			fmt.Sprintf("%d/%s", m.Probe.Port, m.Probe.Protocol), exp, m.Got, m.Expected.Why)
	}
	return b.String()
}

// Grids draw, for every port/protocol with a mismatch, the truth table as the upstream tests
// print it: rows are sources, columns destinations; ✔ allowed and ✘ denied as the oracle says,
// "L" a leak (allowed, the oracle denies), "B" a block (denied, the oracle allows).
func Grids(w *World, probes []Probe, want map[Probe]Verdict, got map[Probe]Outcome) string {
	type pp struct {
		port  int32
		proto corev1.Protocol
	}
	bad := map[pp]bool{}
	for _, m := range Diff(probes, want, got) {
		bad[pp{m.Probe.Port, m.Probe.Protocol}] = true
	}
	var keys []pp
	for k := range bad {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].proto != keys[j].proto {
			return keys[i].proto < keys[j].proto // SCTP, TCP, UDP
		}
		return keys[i].port < keys[j].port
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%d/%s (from \\ to):\n%-5s", k.port, k.proto, "")
		for _, to := range w.Pods {
			fmt.Fprintf(&b, " %-4s", to.Key())
		}
		b.WriteString("\n")
		for _, from := range w.Pods {
			fmt.Fprintf(&b, "%-5s", from.Key())
			for _, to := range w.Pods {
				p := Probe{From: from.Key(), To: to.Key(), Port: k.port, Protocol: k.proto}
				g, ok := got[p]
				mark := "·"
				switch {
				case !ok:
				case g.OK && want[p].Allowed:
					mark = "✔"
				case !g.OK && !want[p].Allowed:
					mark = "✘"
				case g.OK:
					mark = "L"
				default:
					mark = "B"
				}
				fmt.Fprintf(&b, " %-4s", mark)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
