// Command policy benchmarks NetworkPolicy enforcement through the real tabby-node, with 1,000
// pods and 500 NetworkPolicies in the datastore (the targets each figure is held to are in docs/benchmarks.md):
//
//   - NetworkPolicy create → enforced: from the API write returning to the first TCP connection
//     from a pod on node-2 that the new policy lets into a pod on node-1, which another policy
//     isolates;
//   - pod added to a selected set → its address in the ipset on node-1: from the writes of a new
//     Pod object and of its IPAM allocation to `ipset test` finding it;
//   - full resync: felix's periodic resync in tabby-node after tabby's chains and policy sets
//     were emptied behind its back (so it reads, computes and rewrites everything), beside the
//     floor: one `ipset restore` and one `iptables-restore` of the same state, generated offline
//     by felix's calculator, into an empty namespace;
//   - packet path: TCP connections a second between two pods on different nodes with no policy
//     and with the 500, some of which select the server; then with the 500, window by window in
//     turn, with the FelixConfiguration's flow logs on and off (both nodes log and follow every
//     connection).
//
// Then 100 AdminNetworkPolicies join the 500 (10 select the server, their rules walked before
// a Pass hands its client to NetworkPolicy), beside the NetworkPolicy figures:
//
//   - AdminNetworkPolicy create → enforced: as above, for a policy whose subject is all 1,000
//     pods and which allows the client's namespace in, over api's isolation;
//   - packet path with the 100 and the 500, against no policy, and window by window in turn
//     against the same with the 13 that select server or client out (the 500's path).
//
// The 100 are deleted again before the resync part, which measures the NetworkPolicy state.
//
// Run as root after `make build` (TABBY_BIN=bin); `make bench` runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tabbynet/tabby/hack/bench/benchutil"
	"github.com/tabbynet/tabby/hack/lab"
)

const (
	fakePods     = 997 // datastore-only pods; with the three real ones, 1,000
	policies     = 500
	createRounds = 30
	joinRounds   = 30
	resyncRounds = 3
	connWindow   = time.Second
	connWindows  = 5
	// resyncEvery is tabby-node's --resync-interval in the resync part.
	resyncEvery = 4 * time.Second
)

func main() { benchutil.MainWithDatastoreLab("policy", run) }

func run(ctx context.Context, l *lab.Lab) (err error) {
	if _, err := l.AddNodes(ctx, lab.NodeSpec{Name: "node-1"}, lab.NodeSpec{Name: "node-2"}); err != nil {
		return err
	}
	w, err := newWorld(ctx, l)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, w.diagnose(ctx))
		}
	}()

	none, err := w.connectionRate(ctx)
	if err != nil {
		return fmt.Errorf("connection rate without policy: %w", err)
	}
	start := time.Now()
	if err := w.populate(ctx); err != nil {
		return err
	}
	if err := w.waitEnforced(ctx); err != nil {
		return err
	}
	fmt.Printf("datastore: %d pods (%d on node-1's veths), %d NetworkPolicies in %d namespaces; node-1 enforces them %s after the first write\n",
		fakePods+len(w.real), localFake+2, policies, namespaces, time.Since(start).Round(100*time.Millisecond))
	with, err := w.connectionRate(ctx)
	if err != nil {
		return fmt.Errorf("connection rate with policies: %w", err)
	}
	flowOn, flowOff, flowCounts, err := w.flowLogRates(ctx)
	if err != nil {
		return fmt.Errorf("connection rate with flow logs: %w", err)
	}

	created, err := w.createToEnforced(ctx, w.createAPIAllowNP)
	if err != nil {
		return err
	}
	joined, err := w.podToIPSet(ctx)
	if err != nil {
		return err
	}

	took, err := w.addAdmins(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("datastore: + %d AdminNetworkPolicies (%d select web, %d all pods of its and the client's namespaces); node-1 enforces them %s after the first write\n",
		adminPolicies, webAdmins, wideAdmins, took.Round(100*time.Millisecond))
	withAdmin, pathOut, err := w.adminPathRates(ctx)
	if err != nil {
		return fmt.Errorf("connection rate with admin policies: %w", err)
	}
	adminCreated, err := w.createToEnforced(ctx, w.createAPIAllowANP)
	if err != nil {
		return err
	}
	if err := w.deleteAdmins(ctx); err != nil {
		return err
	}
	resync, floor, err := w.resyncVsFloor(ctx)
	if err != nil {
		return err
	}

	fmt.Printf("NetworkPolicy create → enforced (API write returned → first connection it allows), %d samples: p50 %s p99 %s   [target p99 < 100ms]\n",
		len(created), pct(created, 50), pct(created, 99))
	fmt.Printf("AdminNetworkPolicy selecting all %d pods create → enforced (the same, %d others in place), %d samples: p50 %s p99 %s\n",
		fakePods+len(w.real), adminPolicies, len(adminCreated), pct(adminCreated, 50), pct(adminCreated, 99))
	fmt.Printf("pod added to a selected set → its address in node-1's ipset, %d samples:            p50 %s p99 %s\n",
		len(joined), pct(joined, 50), pct(joined, 99))
	fmt.Printf("full resync in tabby-node (read, compute, rewrite %d chains and %d sets): %s; floor (one ipset restore + one iptables-restore of the same): %s; ratio %.2f   [target ≤ 1.5]\n",
		w.floor.chains, w.floor.sets, resync.Round(time.Millisecond), floor.Round(time.Millisecond), float64(resync)/float64(floor))
	fmt.Printf("packet path, pod on node-2 → pod on node-1, new TCP connections a second (best of %d windows): no policy %.0f, %d policies %.0f; ratio %.3f   [target ≥ 0.90]\n",
		connWindows, none, policies, with, with/none)
	fmt.Printf("packet path, the same pods and %d policies, window by window in turn: flow logs on %.0f, off %.0f; ratio %.3f   [target ≥ 0.90]\n",
		policies, flowOn, flowOff, flowOn/flowOff)
	fmt.Printf("flow logs counted (%s)\n", flowCounts)
	fmt.Printf("packet path, the same pods, %d AdminNetworkPolicies + %d policies %.0f; ratio to no policy %.3f; window by window in turn with the %d of them that select server or client out (the %d's path) %.0f: ratio %.3f\n",
		adminPolicies, policies, withAdmin, withAdmin/none, webAdmins+wideAdmins, policies, pathOut, withAdmin/pathOut)
	return nil
}
