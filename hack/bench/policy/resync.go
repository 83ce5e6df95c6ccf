package main

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/felix/netnsrun"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/node/syncer"
)

const resyncMetric = "tabby_felix_resync_duration_seconds"

// resyncVsFloor returns the median of felix's full resyncs in tabby-node on node-1 (after its
// policy chains and sets were emptied) and of the floor (see floorRestore).
func (w *world) resyncVsFloor(ctx context.Context) (resync, floor time.Duration, err error) {
	run1, close1, err := netnsrun.At(lab.NetnsPath(w.n1.NS))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = close1() }()
	n1 := cmdrun.InNamespace(run1)
	backend := iptables.DetectBackend(ctx, n1)

	var floors []time.Duration
	for i := range resyncRounds {
		d, err := w.floorRestore(ctx, backend, i)
		if err != nil {
			return 0, 0, fmt.Errorf("floor: %w", err)
		}
		floors = append(floors, d)
	}

	// A resync every few seconds from now on (restarting tabby-node keeps the rules in place).
	w.l.Opts.AgentArgs = append(w.l.Opts.AgentArgs, "--resync-interval="+resyncEvery.String())
	if err := w.n1.Restart(ctx); err != nil {
		return 0, 0, err
	}
	if err := w.waitEnforced(ctx); err != nil {
		return 0, 0, err
	}
	var resyncs []time.Duration
	for range resyncRounds {
		before, err := benchutil.ReadHistogram(ctx, w.n1, resyncMetric)
		if err != nil {
			return 0, 0, err
		}
		if err := emptyPolicyState(ctx, n1, backend); err != nil {
			return 0, 0, err
		}
		d, err := w.waitRestored(ctx, n1, backend, before)
		if err != nil {
			return 0, 0, err
		}
		resyncs = append(resyncs, d)
	}
	return benchutil.Pct(resyncs, 50), benchutil.Pct(floors, 50), nil
}

// emptyPolicyState flushes tabby's filter chains, takes the FORWARD jump out and flushes the
// policy sets, behind felix's back: only a resync (a fresh read of the kernel) notices.
func emptyPolicyState(ctx context.Context, r cmdrun.Runner, b iptables.Backend) error {
	for _, fam := range ipfamily.All {
		snap, err := iptables.Read(ctx, r, fam, b, "filter")
		if err != nil {
			return err
		}
		script := "*filter\n"
		for range snap.Jumps[policy.ParentChain] {
			script += "-D " + policy.ParentChain + " " + policy.JumpRule + "\n"
		}
		for name := range snap.Chains {
			script += "-F " + name + "\n"
		}
		script += "COMMIT\n"
		if _, err := r.Run(ctx, iptables.Command(fam, b, "-restore"), []string{"--noflush"}, []byte(script)); err != nil {
			return err
		}
	}
	out, err := r.Run(ctx, "ipset", []string{"list", "-n"}, nil)
	if err != nil {
		return err
	}
	var script strings.Builder
	for _, name := range strings.Fields(string(out)) {
		if policy.IsSetName(name) {
			script.WriteString("flush " + name + "\n")
		}
	}
	_, err = r.Run(ctx, "ipset", []string{"restore"}, []byte(script.String()))
	return err
}

// waitRestored waits for the resync that writes the policy state back and returns its
// duration as felix measured it. A resync that had read the kernel before it was emptied
// writes nothing; the one after it does.
func (w *world) waitRestored(ctx context.Context, r cmdrun.Runner, b iptables.Backend, prev benchutil.Histogram) (time.Duration, error) {
	deadline := time.Now().Add(4 * resyncEvery)
	for time.Now().Before(deadline) {
		h, err := benchutil.ReadHistogram(ctx, w.n1, resyncMetric)
		if err != nil {
			return 0, err
		}
		if h.Count > prev.Count {
			snap, err := iptables.Read(ctx, r, ipfamily.IPv4, b, "filter")
			if err != nil {
				return 0, err
			}
			if len(snap.Jumps[policy.ParentChain]) > 0 && len(snap.Chains[policy.ChainToWorkload]) > 0 {
				if h.Count != prev.Count+1 {
					return 0, fmt.Errorf("%v resyncs between two readings: cannot tell which one restored", h.Count-prev.Count)
				}
				return prev.Mean(h), nil
			}
			prev = h
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("policy state not restored within %s", 4*resyncEvery)
}

// floorRestore times the least any writer could do: node-1's policy state, rendered offline by
// felix's calculator from the API objects, written by one `ipset restore` and one
// iptables-restore per family into an empty namespace.
func (w *world) floorRestore(ctx context.Context, b iptables.Backend, round int) (time.Duration, error) {
	in, err := w.policyInput(ctx)
	if err != nil {
		return 0, err
	}
	calc := policy.NewCalculator(in)
	var sets strings.Builder
	tables := map[ipfamily.Family]string{}
	w.floor.chains, w.floor.sets = 0, 0
	for _, fam := range ipfamily.All {
		r := calc.Render(fam)
		for _, name := range slices.Sorted(maps.Keys(r.IPSets)) {
			s := r.IPSets[name]
			fmt.Fprintf(&sets, "create %s %s family %s maxelem 1048576\n", name, s.Type, fam.IPSetFamily())
			for _, m := range s.Members {
				fmt.Fprintf(&sets, "add %s %s\n", name, m)
			}
			w.floor.sets++
		}
		var t strings.Builder
		t.WriteString("*filter\n")
		names := slices.Sorted(maps.Keys(r.Chains))
		for _, name := range names {
			t.WriteString(":" + name + " - [0:0]\n")
		}
		for _, name := range names {
			for _, rule := range r.Chains[name] {
				t.WriteString("-A " + name + " " + rule + "\n")
			}
		}
		t.WriteString("-I " + policy.ParentChain + " 1 " + policy.JumpRule + "\nCOMMIT\n")
		tables[fam] = t.String()
		w.floor.chains += len(names)
	}

	ns := fmt.Sprintf("tabby-floor-%s-%d", w.l.ID, round)
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("ip netns add %s: %v: %s", ns, err, out)
	}
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
	run, closeNS, err := netnsrun.At(lab.NetnsPath(ns))
	if err != nil {
		return 0, err
	}
	defer func() { _ = closeNS() }()
	r := cmdrun.InNamespace(run)
	start := time.Now()
	if _, err := r.Run(ctx, "ipset", []string{"restore"}, []byte(sets.String())); err != nil {
		return 0, err
	}
	for _, fam := range ipfamily.All {
		if _, err := r.Run(ctx, iptables.Command(fam, b, "-restore"), []string{"--noflush"}, []byte(tables[fam])); err != nil {
			return 0, err
		}
	}
	d := time.Since(start)
	// The sets live in the kernel's namespace of the netns; they go with it, but destroy them
	// explicitly so a slow namespace teardown leaves nothing behind.
	_, _ = r.Run(ctx, iptables.Command(ipfamily.IPv4, b, "-restore"), nil, []byte("*filter\nCOMMIT\n"))
	_, _ = r.Run(ctx, iptables.Command(ipfamily.IPv6, b, "-restore"), nil, []byte("*filter\nCOMMIT\n"))
	_, _ = r.Run(ctx, "ipset", []string{"destroy"}, nil)
	return d, nil
}

// policyInput is node-1's calculator input from the API objects, as tabby-node derives it.
func (w *world) policyInput(ctx context.Context) (policy.Input, error) {
	return syncer.ReadPolicyInput(ctx, w.l.Client, w.n1.Name)
}
