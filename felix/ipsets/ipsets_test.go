package ipsets

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func newFake(t *testing.T) (*IPSets, *fakekernel.Kernel) {
	t.Helper()
	k := fakekernel.New()
	s, err := New(Options{Runner: k, InUseTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

func run(t *testing.T, k *fakekernel.Kernel, args ...string) {
	t.Helper()
	if _, err := k.Run(context.Background(), "ipset", args, nil); err != nil {
		t.Fatal(err)
	}
}

func updates(t *testing.T, s *IPSets) {
	t.Helper()
	if err := s.ApplyUpdates(context.Background()); err != nil {
		t.Fatalf("ApplyUpdates: %v", err)
	}
}

func deletions(t *testing.T, s *IPSets) {
	t.Helper()
	if err := s.ApplyDeletions(context.Background()); err != nil {
		t.Fatalf("ApplyDeletions: %v", err)
	}
}

func TestUpdatesWriteTheDelta(t *testing.T) {
	s, k := newFake(t)
	s.SetMembers("tabby-pods", "hash:ip", ipfamily.IPv4, []string{"10.244.0.5", "10.244.0.6"})
	s.SetMembers("tabby-pods-v6", "hash:ip", ipfamily.IPv6, []string{"fd00:0:0::5"})
	s.SetMembers("tabby-nets", "hash:net", ipfamily.IPv4, []string{"10.0.0.0/16", "10.0.1.0/24 nomatch", "10.9.9.9/32"})
	s.SetMembers("tabby-ports", "hash:ip,port", ipfamily.IPv4, []string{"10.244.0.5,80", "10.244.0.5,udp:53"})
	updates(t, s)
	calls := k.Calls()
	if len(calls) != 2 || calls[0].Args[0] != "save" || calls[1].Args[0] != "restore" {
		t.Fatalf("first apply: %v, want one save and one restore", calls)
	}
	sets := k.Sets()
	for name, want := range map[string][]string{
		"tabby-pods":    {"10.244.0.5", "10.244.0.6"},
		"tabby-pods-v6": {"fd00::5"},
		"tabby-nets":    {"10.0.0.0/16", "10.0.1.0/24 nomatch", "10.9.9.9"},
		"tabby-ports":   {"10.244.0.5,tcp:80", "10.244.0.5,udp:53"},
	} {
		if got := sets[name].Members; !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if sets["tabby-pods-v6"].Family != "inet6" || sets["tabby-nets"].Type != "hash:net" {
		t.Errorf("sets %+v", sets)
	}

	// The same members, written differently, and a resync that finds the kernel in line:
	// nothing is written.
	k.ResetCalls()
	s.SetMembers("tabby-nets", "hash:net", ipfamily.IPv4, []string{"10.9.9.9", "10.0.1.7/24 nomatch", "10.0.0.0/16"})
	s.SetMembers("tabby-ports", "hash:ip,port", ipfamily.IPv4, []string{"10.244.0.5,UDP:53", "10.244.0.5,tcp:80"})
	updates(t, s)
	deletions(t, s)
	s.QueueResync()
	updates(t, s)
	deletions(t, s)
	if c := k.Calls(); len(c) != 1 || c[0].Args[0] != "save" {
		t.Fatalf("unchanged sets ran %v, want the resync's one save", c)
	}

	// One pod more: one restore with one add line.
	k.ResetCalls()
	s.SetMembers("tabby-pods", "hash:ip", ipfamily.IPv4, []string{"10.244.0.5", "10.244.0.6", "10.244.0.7"})
	updates(t, s)
	deletions(t, s)
	if c := k.Calls(); len(c) != 1 || c[0].Stdin != "add tabby-pods 10.244.0.7\n" {
		t.Fatalf("one new member ran %v", c)
	}
	// One pod less: one del.
	k.ResetCalls()
	s.SetMembers("tabby-pods", "hash:ip", ipfamily.IPv4, []string{"10.244.0.6", "10.244.0.7"})
	updates(t, s)
	if c := k.Calls(); len(c) != 1 || c[0].Stdin != "del tabby-pods 10.244.0.5\n" {
		t.Fatalf("one member gone ran %v", c)
	}
	// A member turning nomatch is removed and added again with the flag.
	k.ResetCalls()
	s.SetMembers("tabby-nets", "hash:net", ipfamily.IPv4, []string{"10.0.0.0/16", "10.0.1.0/24 nomatch", "10.9.9.9 nomatch"})
	updates(t, s)
	if c := k.Calls(); len(c) != 1 || c[0].Stdin != "del tabby-nets 10.9.9.9\nadd tabby-nets 10.9.9.9 nomatch\n" {
		t.Fatalf("flag change ran %v", c)
	}
}

func TestMostlyNewMembersAreSwappedIn(t *testing.T) {
	s, k := newFake(t)
	s.SetMembers("tabby-masq-ipam-pools", "hash:net", ipfamily.IPv4, []string{"10.244.0.0/16"})
	updates(t, s)
	k.ResetCalls()
	s.SetMembers("tabby-masq-ipam-pools", "hash:net", ipfamily.IPv4, []string{"10.245.0.0/16"})
	updates(t, s)
	want := "create tabby-tmp hash:net family inet maxelem 1048576\nadd tabby-tmp 10.245.0.0/16\nswap tabby-tmp tabby-masq-ipam-pools\ndestroy tabby-tmp\n"
	if c := k.Calls(); len(c) != 1 || c[0].Stdin != want {
		t.Fatalf("replacement ran %v, want:\n%s", c, want)
	}
	sets := k.Sets()
	if _, tmp := sets[TempSet]; tmp || !slices.Equal(sets["tabby-masq-ipam-pools"].Members, []string{"10.245.0.0/16"}) {
		t.Fatalf("sets after swap: %v", sets)
	}
}

func TestStaleSetsGoAfterResyncUnlessHeld(t *testing.T) {
	s, k := newFake(t)
	run(t, k, "create", "tabby-stale", "hash:ip")
	run(t, k, "create", "tabby-tmp", "hash:net") // a swap cut short
	run(t, k, "create", "foreign", "hash:ip")
	s.HoldDeletes(true)
	s.SetMembers("tabby-a", "hash:ip", ipfamily.IPv4, nil)
	updates(t, s)
	deletions(t, s)
	sets := k.Sets()
	if _, ok := sets["tabby-stale"]; !ok {
		t.Fatal("stale set destroyed while deletions are held")
	}
	if _, ok := sets["tabby-tmp"]; ok {
		t.Fatal("a leftover temporary set was kept")
	}
	s.HoldDeletes(false)
	deletions(t, s)
	sets = k.Sets()
	if _, ok := sets["tabby-stale"]; ok {
		t.Fatal("stale set kept")
	}
	if _, ok := sets["foreign"]; !ok {
		t.Fatal("foreign set destroyed")
	}
	s.RemoveSet("tabby-a")
	updates(t, s)
	k.ResetCalls()
	deletions(t, s)
	if c := k.Calls(); len(c) != 1 || c[0].Stdin != "destroy tabby-a\n" {
		t.Fatalf("removal ran %v", c)
	}
	k.ResetCalls()
	deletions(t, s)
	if c := k.Calls(); len(c) != 0 {
		t.Fatalf("nothing to delete ran %v", c)
	}
}

func TestDestroyRetriesWhileInUse(t *testing.T) {
	s, k := newFake(t)
	s.SetMembers("tabby-a", "hash:ip", ipfamily.IPv4, nil)
	s.SetMembers("tabby-b", "hash:ip", ipfamily.IPv4, nil)
	s.SetMembers("tabby-c", "hash:ip", ipfamily.IPv4, nil)
	updates(t, s)
	s.RemoveSet("tabby-a")
	s.RemoveSet("tabby-b")
	s.RemoveSet("tabby-c")
	k.SetInUse("tabby-b", 3) // the kernel's grace period after the last rule went
	deletions(t, s)
	if sets := k.Sets(); len(sets) != 0 {
		t.Fatalf("sets left: %v", sets)
	}

	// A set a foreign rule keeps using: reported after the timeout, and a later call does
	// not wait again.
	s.SetMembers("tabby-used", "hash:ip", ipfamily.IPv4, nil)
	updates(t, s)
	if _, err := k.Run(context.Background(), "iptables-nft-restore", []string{"--noflush"}, []byte("*filter\n-A INPUT -m set --match-set tabby-used src -j DROP\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	s.RemoveSet("tabby-used")
	start := time.Now()
	err := s.ApplyDeletions(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ipset tabby-used") || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("set in use: %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("gave up after %s, before the in-use timeout", d)
	}
	start = time.Now()
	if err := s.ApplyDeletions(context.Background()); err == nil {
		t.Fatal("set still in use: no error")
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("a second call waited %s again", d)
	}
}

func TestFailedRestoreIsRetriedAfterARead(t *testing.T) {
	s, k := newFake(t)
	s.SetMembers("tabby-a", "hash:ip", ipfamily.IPv4, []string{"10.0.0.1"})
	updates(t, s)
	// Someone destroys the set behind felix's back; felix's delta fails, it re-reads and
	// creates the set again.
	run(t, k, "destroy", "tabby-a")
	k.ResetCalls()
	s.SetMembers("tabby-a", "hash:ip", ipfamily.IPv4, []string{"10.0.0.1", "10.0.0.2"})
	updates(t, s)
	var ops []string
	for _, c := range k.Calls() {
		ops = append(ops, c.Args[0])
	}
	if !slices.Equal(ops, []string{"restore", "save", "restore"}) {
		t.Fatalf("calls %v", ops)
	}
	if got := k.Sets()["tabby-a"].Members; !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Fatalf("members %v", got)
	}

	k.Fail(fakekernel.Failure{Name: "ipset", Contains: "10.0.0.3", Times: 10, Stderr: "ipset v7.17: Error in line 1: Kernel error received: Out of memory"})
	s.SetMembers("tabby-a", "hash:ip", ipfamily.IPv4, []string{"10.0.0.3"})
	err := s.ApplyUpdates(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ipset tabby-a:") {
		t.Fatalf("persistent failure: %v, want the set named", err)
	}
}

func TestRefusedSets(t *testing.T) {
	s, k := newFake(t)
	s.SetMembers("other", "hash:ip", ipfamily.IPv4, nil)
	s.SetMembers("tabby-mixed", "hash:ip", ipfamily.IPv4, []string{"fd00::1"})
	s.SetMembers("tabby-prefix", "hash:ip", ipfamily.IPv4, []string{"10.0.0.0/24"})
	s.SetMembers("tabby-port", "hash:ip,port", ipfamily.IPv4, []string{"10.0.0.1,tcp:http"})
	s.SetMembers("tabby-ok", "hash:net", ipfamily.IPv4, []string{"10.0.0.0/24"})
	updates(t, s)
	err := s.Refused()
	for _, want := range []string{"ipset other: not tabby's", "ipset tabby-mixed: member", "ipset tabby-prefix:", `ipset tabby-port: member "10.0.0.1,tcp:http"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if sets := k.Sets(); len(sets) != 1 || len(sets["tabby-ok"].Members) != 1 {
		t.Fatalf("sets %v: want only the valid one", sets)
	}
}

func TestTypeChange(t *testing.T) {
	s, k := newFake(t)
	s.SetMembers("tabby-x", "hash:ip", ipfamily.IPv4, []string{"10.0.0.1"})
	updates(t, s)
	s.SetMembers("tabby-x", "hash:net", ipfamily.IPv4, []string{"10.0.0.0/24"})
	updates(t, s)
	if got := k.Sets()["tabby-x"]; got.Type != "hash:net" || !slices.Equal(got.Members, []string{"10.0.0.0/24"}) {
		t.Fatalf("after a type change: %+v", got)
	}
}
