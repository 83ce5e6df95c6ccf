package felix

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/internal/testwait"
)

// counters are the fake kernel's netlink calls and iptables/ipset commands, to see what one
// apply touched.
type counters struct{ replace, del, linkByName, linkList, commands int }

func count(fk *nl.Fake, kern *fakekernel.Kernel) counters {
	return counters{fk.Calls("RouteReplace"), fk.Calls("RouteDel"), fk.Calls("LinkByName"), fk.Calls("LinkList"), len(kern.Calls())}
}

func (c counters) minus(o counters) counters {
	return counters{c.replace - o.replace, c.del - o.del, c.linkByName - o.linkByName, c.linkList - o.linkList, c.commands - o.commands}
}

// podVeth is pod i's host veth.
func podVeth(i int) string { return fmt.Sprintf("cali%011d", i) }

// pods are n pods, each on its own veth.
func pods(n int) []any {
	msgs := make([]any, n)
	for i := range msgs {
		msgs[i] = workload(podVeth(i), netip.AddrFrom4([4]byte{10, 244, byte(2 + i/200), byte(1 + i%200)}).String())
	}
	return msgs
}

func fullSyncedFelix(t *testing.T, cfg func(*Config), pods int) (*Felix, *nl.Fake, *fakekernel.Kernel) {
	return fullSyncedFelixOn(t, fakekernel.New(), cfg, pods)
}

func fullSyncedFelixOn(t *testing.T, kern *fakekernel.Kernel, cfg func(*Config), n int) (*Felix, *nl.Fake, *fakekernel.Kernel) {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	for i := 0; i < n; i++ {
		fk.AddLink(podVeth(i), 1500)
	}
	fk.AddLink("calibbbbbbbbbbb", 1500)
	fk.AddLink("caliccccccccccc", 1500)
	fs := &fakeSysctl{set: map[string]string{}}
	c := Config{NodeName: "n1", UplinkInterface: uplink("eth0"), ResyncInterval: time.Hour}
	if cfg != nil {
		cfg(&c)
	}
	f, err := New(c, WithNetlink(fk), WithCommandRunner(kern), WithSysctl(fs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	f.send(
		thisNode("198.51.100.11/24", ""),
		pool("default", "10.244.0.0/16", v1.IPIPModeNever, true),
		localBlock("10.244.1.0/26"),
		learned("10.244.9.0/26", "198.51.100.12"),
		// Another node's pod borrowed an address out of our block.
		learned("10.244.1.60/32", "198.51.100.12"),
	)
	f.send(pods(n)...)
	if err := f.ApplyNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(fk.Routes()); got != n+3 {
		t.Fatalf("full sync made %d routes, want %d", got, n+3)
	}
	return f, fk, kern
}

func (f *Felix) mustApply(t *testing.T) {
	t.Helper()
	if err := f.ApplyNow(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A pod coming or going writes its route and nothing else: no other route, no tunl0 lookups,
// no iptables or ipset command, however many pods the node has.
func TestWorkloadChangeWritesOnlyItsRoute(t *testing.T) {
	const pods0 = 500
	f, fk, kern := fullSyncedFelix(t, nil, pods0)
	want := func(what string, before counters, replace, del int) {
		t.Helper()
		got := count(fk, kern).minus(before)
		if got != (counters{replace: replace, del: del}) {
			t.Fatalf("%s: calls %+v, want %d replace and %d delete only", what, got, replace, del)
		}
	}

	before := count(fk, kern)
	f.send(workload("calibbbbbbbbbbb", "10.244.1.10"))
	f.mustApply(t)
	want("new pod", before, 1, 0)
	if r, ok := fk.Route("10.244.1.10/32"); !ok || r.Protocol != v1.RouteProtocol {
		t.Fatalf("new pod's route %+v %v", r, ok)
	}

	before = count(fk, kern)
	f.send(model.WorkloadRemove{Interface: "calibbbbbbbbbbb"}, workload("caliccccccccccc", "10.244.1.10"))
	f.mustApply(t)
	want("address on another veth", before, 1, 0)

	before = count(fk, kern)
	f.send(model.WorkloadRemove{Interface: "caliccccccccccc"})
	f.mustApply(t)
	want("pod deleted", before, 0, 1)
	if _, ok := fk.Route("10.244.1.10/32"); ok {
		t.Fatal("deleted pod's route kept")
	}

	before = count(fk, kern)
	f.send(pods(pods0)...)
	f.mustApply(t)
	want("same pods", before, 0, 0)

	// A pod on the borrowed address: its route wins over the BGP one, and the BGP route
	// comes back when the pod goes.
	borrowed := netip.MustParsePrefix("10.244.1.60/32")
	f.send(workload("calibbbbbbbbbbb", borrowed.Addr().String()))
	f.mustApply(t)
	if r, _ := fk.Route(borrowed.String()); r.Gw != nil {
		t.Fatalf("pod on a borrowed address routed via %v", r.Gw)
	}
	f.send(model.WorkloadRemove{Interface: "calibbbbbbbbbbb"})
	f.mustApply(t)
	if r, _ := fk.Route(borrowed.String()); r.Gw.String() != "198.51.100.12" {
		t.Fatalf("borrowed /32 not routed back to its node: %+v", r)
	}
	if n := len(fk.Routes()); n != pods0+3 {
		t.Fatalf("%d routes, want %d", n, pods0+3)
	}

	// A pool change re-applies NAT: natOutgoing off is one iptables-restore and one ipset
	// restore (the sets destroyed after the rules that used them), no route written.
	kern.ResetCalls()
	before = count(fk, kern)
	f.send(pool("default", "10.244.0.0/16", v1.IPIPModeNever, false))
	f.mustApply(t)
	if got := count(fk, kern).minus(before); got.replace+got.del != 0 {
		t.Fatalf("pool change: %+v, want no route writes", got)
	}
	var names []string
	for _, c := range kern.Calls() {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"iptables-nft-restore", "ipset"}) || !strings.Contains(kern.Calls()[1].Stdin, "destroy tabby-masq-ipam-pools") {
		t.Fatalf("natOutgoing off ran %v", kern.Calls())
	}
}

// With WaitForInSync, a pod deleted before felix is in sync keeps its route (deletes are held),
// and the iptables chains and ipsets a previous felix left stay; model.InSync removes them.
func TestWorkloadRemovalHeldUntilInSync(t *testing.T) {
	kern := fakekernel.New()
	ctx := context.Background()
	if _, err := kern.Run(ctx, "ipset", []string{"create", "tabby-stale", "hash:ip"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := kern.Run(ctx, "iptables-nft-restore", []string{"--noflush"}, []byte("*filter\n:tabby-stale - [0:0]\n-A FORWARD -j tabby-stale\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	f, fk, _ := fullSyncedFelixOn(t, kern, func(c *Config) { c.WaitForInSync = true }, 20)
	if _, ok := kern.Sets()["tabby-masq-ipam-pools"]; !ok {
		t.Fatal("NAT not programmed before in sync: only deletions wait")
	}
	f.send(model.WorkloadRemove{Interface: podVeth(0)})
	f.mustApply(t)
	gone := "10.244.2.1/32"
	if _, ok := fk.Route(gone); !ok {
		t.Fatal("route removed before in sync")
	}
	if _, ok := kern.Sets()["tabby-stale"]; !ok {
		t.Fatal("stale set removed before in sync")
	}
	if _, ok := kern.Chains("iptables-nft", "filter")["tabby-stale"]; !ok {
		t.Fatal("stale chain removed before in sync")
	}
	f.send(model.InSync{})
	f.mustApply(t)
	if _, ok := fk.Route(gone); ok {
		t.Fatal("route of the deleted pod kept after in sync")
	}
	if _, ok := kern.Sets()["tabby-stale"]; ok {
		t.Fatal("stale set kept after in sync")
	}
	chains := kern.Chains("iptables-nft", "filter")
	if _, ok := chains["tabby-stale"]; ok || len(chains["FORWARD"]) != 0 {
		t.Fatalf("stale chain or its jump kept after in sync: %v", chains)
	}
}

// A failed write is counted and retried about a second later by the loop, not before.
func TestWriteFailureRetried(t *testing.T) {
	kern := fakekernel.New()
	f, _, _ := fullSyncedFelixOn(t, kern, nil, 1)
	kern.Fail(fakekernel.Failure{Name: "ipset", Contains: "10.245.0.0/16", Times: 3, Stderr: "ipset v7.17: Error in line 1: Kernel error received: Out of memory"})
	f.send(pool("other", "10.245.0.0/16", v1.IPIPModeNever, false))
	err := f.ApplyNow(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ipset tabby-all-ipam-pools") {
		t.Fatalf("apply with a failing ipset restore: %v", err)
	}
	if v := value(f.metrics.WriteErrors); v != 1 {
		t.Fatalf("write errors metric %v, want 1", v)
	}
	// An event before the retry is due does not hammer the kernel.
	kern.ResetCalls()
	f.send(workload("calibbbbbbbbbbb", "10.244.1.10"))
	f.mustApply(t)
	if c := kern.Calls(); len(c) != 0 {
		t.Fatalf("an event before the retry ran %v", c)
	}
	// The loop's first pass is a resync, which retries at once.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testwait.Until(t, "the set written by the resync", 5*time.Second, func() bool {
		return slices.Contains(kern.Sets()["tabby-all-ipam-pools"].Members, "10.245.0.0/16")
	})
	// A failure inside the loop: retried by the loop about a second later.
	kern.Fail(fakekernel.Failure{Name: "ipset", Contains: "10.246.0.0/16", Times: 3, Stderr: "ipset v7.17: Error in line 1: Kernel error received: Out of memory"})
	f.send(pool("third", "10.246.0.0/16", v1.IPIPModeNever, false))
	testwait.Until(t, "the second failure counted", 5*time.Second, func() bool { return value(f.metrics.WriteErrors) == 2 })
	failedAt := time.Now()
	testwait.Until(t, "the set written by the retry", 5*time.Second, func() bool {
		return slices.Contains(kern.Sets()["tabby-all-ipam-pools"].Members, "10.246.0.0/16")
	})
	if d := time.Since(failedAt); d < writeRetryInterval/2 {
		t.Fatalf("retried after %s, want about %s", d, writeRetryInterval)
	}
}
