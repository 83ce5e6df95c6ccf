package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/hack/netpol"
)

// NetworkPolicy tests judge enforcement against the oracle (hack/netpol): an implementation of
// the semantics that shares no code with tabby. Knobs, all optional:
//
//	TABBY_NETPOL_SEED        seed of the random cases (default 1)
//	TABBY_NETPOL_RANDOM      how many random cases (default 10)
//	TABBY_NETPOL_DEADLINE    per step, from the API writes to agreement (default 15s)
//	TABBY_NETPOL_MAX_FAILED  cases allowed to fail before the rest are skipped (default 3, 0: never)
//
// One case: go test -C hack ./e2e -run 'TestNetworkPolicy$/default-deny-ingress' -v
const (
	// A denied probe costs this much; an allowed one a millisecond on the lab's veths.
	probeTimeout = 400 * time.Millisecond
	// Probes in flight at once: a round of 288 probes takes well under two seconds even when
	// every one is denied.
	probeParallel = 96
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// netpolWorld starts a lab of n nodes with the truth-table pods (x, y, z × a, b, c) and the
// oracle, and waits until every pod reaches every other (routes converged), so that what the
// cases measure is policy, not BGP.
func netpolWorld(t *testing.T, ctx context.Context, n int) (*lab.Lab, *netpol.World, *netpol.Oracle) {
	t.Helper()
	l := startLab(t, lab.Options{})
	start := time.Now()
	o, err := netpol.BuildOracle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("oracle %s ready in %s", o.Path, time.Since(start).Round(time.Millisecond))
	nodes := addNodes(t, ctx, l, nodeSpecs(n)...)
	start = time.Now()
	w, err := netpol.NewWorld(ctx, l, nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pods in namespaces %v with probe servers in %s", len(w.Pods), netpol.Namespaces, time.Since(start).Round(time.Millisecond))
	eps := podEndpoints(w.Pods)
	requireReach(t, ctx, "pod to pod", eps, eps, 30*time.Second)
	if w.SCTPSkipped != "" {
		t.Logf("SCTP not probed: %s (SCTP policies are still applied)", w.SCTPSkipped)
	}
	return l, w, o
}

// TestNetworkPolicy is the truth table: for every case (the upstream Kubernetes NetworkPolicy
// e2e scenarios, more that upstream leaves out, every peer kind with every port kind, and a
// seeded random set) it creates, updates and deletes NetworkPolicies and relabels pods and
// namespaces through the API, then probes all 9×8 pod pairs on 80 and 81 over TCP and UDP
// until the matrix agrees with the oracle twice in a row or the deadline passes. A
// disagreement fails the case with the probes that differ and the truth tables.
//
// The first case has no policy: it passes without any enforcement and proves the harness.
func TestNetworkPolicy(t *testing.T) {
	ctx := testCtx(t, 20*time.Minute)
	began := time.Now()
	_, w, o := netpolWorld(t, ctx, 3)

	seed := uint64(envInt(t, "TABBY_NETPOL_SEED", 1))
	random := envInt(t, "TABBY_NETPOL_RANDOM", 10)
	maxFailed := envInt(t, "TABBY_NETPOL_MAX_FAILED", 3)
	deadline := envDuration(t, "TABBY_NETPOL_DEADLINE", 15*time.Second)
	prober := &netpol.Prober{W: w, Timeout: probeTimeout, Parallel: probeParallel}
	r := netpol.NewRunner(w, o, prober, deadline, t.Logf)

	cases := []netpol.Case{netpol.Baseline()}
	cases = append(cases, netpol.UpstreamCases(w)...)
	cases = append(cases, netpol.MoreCases(w)...)
	cases = append(cases, netpol.GridCases(w)...)
	cases = append(cases, netpol.RandomCases(w, seed, random)...)
	t.Logf("%d cases (random seed %d), %d probes a round, step deadline %s", len(cases), seed, len(r.Probes()), deadline)

	failed, skipped, ran := 0, 0, 0
	var harness error
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if harness != nil {
				t.Skipf("the harness failed earlier: %v", harness)
			}
			if maxFailed > 0 && failed >= maxFailed {
				skipped++
				t.Skipf("%d cases failed already (TABBY_NETPOL_MAX_FAILED=0 runs them all)", failed)
			}
			ran++
			res, err := r.RunCase(ctx, c)
			for _, s := range res {
				reportStep(t, w, r, s)
			}
			if err != nil {
				harness = err
				t.Fatal(err)
			}
			if t.Failed() {
				failed++
			}
		})
	}
	st := r.Stats
	t.Logf("summary: %d cases run (%d failed, %d skipped), %d steps, %d fences, %d rounds, %d probes; %s in all",
		ran, failed, skipped, st.Steps, st.Fences, st.Rounds, st.Probes, time.Since(began).Round(time.Second))
	if w.SCTPSkipped != "" {
		t.Logf("summary: SCTP not probed: %s", w.SCTPSkipped)
	}
}

func reportStep(t *testing.T, w *netpol.World, r *netpol.Runner, s netpol.StepResult) {
	t.Helper()
	what := s.Case
	if s.Step >= 0 {
		what = fmt.Sprintf("%s step %d", s.Case, s.Step)
	}
	if s.Note != "" {
		what += " (" + s.Note + ")"
	}
	if s.OK() {
		note := ""
		if s.Unchanged {
			note = "; the matrix was already this before the step"
		}
		t.Logf("%s: agrees with the oracle after %s, %d rounds%s", what, s.Took.Round(time.Millisecond), s.Rounds, note)
		return
	}
	t.Errorf("%s: %d of %d probes disagree with the oracle %s after the API writes (%d rounds):\n%s\n%s",
		what, len(s.Mismatches), len(r.Probes()), s.Took.Round(time.Millisecond), s.Rounds,
		netpol.MismatchTable(s.Mismatches, 20), netpol.Grids(w, r.Probes(), s.Expected, s.Got))
}
