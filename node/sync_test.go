package node

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/nl"
	"github.com/tabbynet/tabby/felix/sysctl"
	"github.com/tabbynet/tabby/internal/ipfamily"
	"github.com/tabbynet/tabby/node/syncer"
)

type nopSysctl struct{}

func (nopSysctl) Set(...sysctl.Setting) error { return nil }

// TestSnapshotWithOneMorePodWritesOneRoute: tabby-node hands felix its whole snapshot on every
// datastore event. A snapshot that differs from the last by one pod must reach the kernel as
// that pod's route alone: pools, blocks and the node, handed over again unchanged, recompute
// nothing (no other route written, no iptables or ipset command).
func TestSnapshotWithOneMorePodWritesOneRoute(t *testing.T) {
	fk := nl.NewFake()
	fk.AddLink("eth0", 1500)
	fk.AddLink("cali0123456789a", 1500)
	kern := fakekernel.New()
	f, err := felix.New(felix.Config{NodeName: "n1", UplinkInterface: ipfamily.PairOf("eth0", ""), ResyncInterval: time.Hour},
		felix.WithNetlink(fk), felix.WithCommandRunner(kern), felix.WithSysctl(nopSysctl{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	b, err := bird.New(bird.Config{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{felix: f, bgp: b, tunnelKick: make(chan struct{}, 1), firstSnap: make(chan struct{})}

	snap := syncer.Snapshot{
		Changed:  syncer.ChangedAll, // handed over again in full every time: felix must see that nothing changed
		NodeName: "n1",
		Local:    &model.Node{Name: "n1", BGPAddress: ipfamily.PairOf(netip.MustParsePrefix("198.51.100.11/24"), netip.Prefix{})},
		Pools: []model.Pool{
			{Name: "b", CIDR: netip.MustParsePrefix("10.245.0.0/16"), BlockSize: 26, IPIPMode: v1.IPIPModeNever, NATOutgoing: true},
			{Name: "a", CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26, IPIPMode: v1.IPIPModeNever, NATOutgoing: true},
		},
		LocalBlocks: []netip.Prefix{netip.MustParsePrefix("10.244.1.64/26"), netip.MustParsePrefix("10.244.1.0/26")},
	}
	for i := 0; i < 50; i++ {
		snap.Workloads = append(snap.Workloads, syncer.Workload{IP: netip.AddrFrom4([4]byte{10, 244, 1, byte(1 + i)}), Interface: "cali0123456789a"})
	}
	apply := func() {
		t.Helper()
		if err := f.ApplyNow(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	a.onSnapshot(snap)
	apply()
	if n := len(fk.Routes()); n != 52 {
		t.Fatalf("full sync: %d routes, want 50 pods + 2 blackholes", n)
	}
	if got := kern.Sets()["tabby-masq-ipam-pools"].Members; len(got) != 2 {
		t.Fatalf("full sync: NAT set %q, want both pools", got)
	}

	// The next event: the same pools, blocks and node (as new slices, in another order), one pod more.
	next := snap
	next.Local = &model.Node{Name: "n1", BGPAddress: ipfamily.PairOf(netip.MustParsePrefix("198.51.100.11/24"), netip.Prefix{})}
	next.Pools = []model.Pool{snap.Pools[1], snap.Pools[0]}
	next.LocalBlocks = []netip.Prefix{snap.LocalBlocks[1], snap.LocalBlocks[0]}
	next.Workloads = append(append([]syncer.Workload(nil), snap.Workloads...), syncer.Workload{IP: netip.MustParseAddr("10.244.1.60"), Interface: "cali0123456789a"})
	replaces, dels, links := fk.Calls("RouteReplace"), fk.Calls("RouteDel"), fk.Calls("LinkList")
	kern.ResetCalls()
	a.onSnapshot(next)
	apply()
	if got := fk.Calls("RouteReplace") - replaces; got != 1 {
		t.Errorf("one new pod: %d route replaces, want 1", got)
	}
	if got := fk.Calls("RouteDel") - dels; got != 0 {
		t.Errorf("one new pod: %d route deletes, want 0", got)
	}
	if got := fk.Calls("LinkList") - links; got != 0 {
		t.Errorf("one new pod: %d link lists, want 0", got)
	}
	if got := kern.Calls(); len(got) != 0 {
		t.Errorf("one new pod: iptables/ipset commands %v (NAT re-applied), want none", got)
	}
	if _, ok := fk.Route("10.244.1.60/32"); !ok {
		t.Error("the new pod's route is missing")
	}

	// The same snapshot once more: nothing at all.
	replaces = fk.Calls("RouteReplace")
	a.onSnapshot(next)
	apply()
	if fk.Calls("RouteReplace") != replaces || len(kern.Calls()) != 0 {
		t.Error("an unchanged snapshot wrote to the kernel")
	}
}

// TestPolicyUpdatesOnlyWhatChanged: felix's policy manager is handed every pod address and the
// endpoints at first, then only what changed; a snapshot in which only another node's empty
// block came or went hands it nothing (each message wakes felix's loop, on every node).
func TestPolicyUpdatesOnlyWhatChanged(t *testing.T) {
	a := &Agent{}
	pod := syncer.PodKey{Namespace: "default", Name: "web"}
	snap := syncer.Snapshot{Workloads: []syncer.Workload{{IP: netip.MustParseAddr("10.244.1.1"), Interface: "cali0123456789a", Pod: pod}}}
	kinds := func(msgs []any) (out []string) {
		for _, m := range msgs {
			out = append(out, fmt.Sprintf("%T", m))
		}
		return out
	}
	check := func(what string, want ...string) {
		t.Helper()
		if got := kinds(a.policyUpdates(snap)); !slices.Equal(got, want) {
			t.Errorf("%s: messages %v, want %v", what, got, want)
		}
	}
	check("first snapshot", "felix.PodIPsUpdate", "felix.EndpointsUpdate")
	snap.PodIPsChanged = &syncer.PodIPsChange{}
	check("another node's empty block")
	snap.PodIPsChanged = &syncer.PodIPsChange{Added: []syncer.PodAddr{{Pod: syncer.PodKey{Namespace: "default", Name: "db"}, IP: netip.MustParseAddr("10.244.2.1")}}}
	check("a pod elsewhere", "felix.PodIPsDelta")
	snap.PodIPsChanged = &syncer.PodIPsChange{}
	snap.Workloads = append(snap.Workloads, syncer.Workload{IP: netip.MustParseAddr("10.244.1.2"), Interface: "cali0123456789b", Pod: syncer.PodKey{Namespace: "default", Name: "web2"}})
	check("a pod here", "felix.EndpointsUpdate")
}
