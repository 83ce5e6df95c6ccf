package ipsets_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/internal/nstest"
	"github.com/tabbynet/tabby/felix/ipsets"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func newSets(t *testing.T, n *nstest.NS) (*ipsets.IPSets, *nstest.Recorder) {
	t.Helper()
	rec := &nstest.Recorder{Runner: n.Runner}
	s, err := ipsets.New(ipsets.Options{Runner: rec, InUseTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

func names(t *testing.T, n *nstest.NS) []string {
	t.Helper()
	out := strings.Fields(n.Exec(t, "ipset", "list", "-n"))
	slices.Sort(out)
	return out
}

func members(t *testing.T, n *nstest.NS, set string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(n.Exec(t, "ipset", "save", set), "\n") {
		if rest, ok := strings.CutPrefix(l, "add "+set+" "); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out
}

func TestIPSetsInNetns(t *testing.T) {
	n := nstest.New(t)
	ctx := context.Background()
	n.Exec(t, "ipset", "create", "foreign", "hash:ip")
	n.Exec(t, "ipset", "create", "tabby-stale", "hash:net")
	s, rec := newSets(t, n)
	s.HoldDeletes(true)
	s.SetMembers("tabby-pods", "hash:ip", ipfamily.IPv4, []string{"10.244.0.5", "10.244.0.6/32"})
	s.SetMembers("tabby-pods-v6", "hash:ip", ipfamily.IPv6, []string{"fd00:0::5"})
	s.SetMembers("tabby-nets", "hash:net", ipfamily.IPv4, []string{"10.0.0.0/16", "10.0.1.0/24 nomatch", "10.9.9.9/32"})
	s.SetMembers("tabby-ports", "hash:ip,port", ipfamily.IPv4, []string{"10.244.0.5,80", "10.244.0.5,udp:53"})
	if err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyDeletions(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, n), []string{"foreign", "tabby-nets", "tabby-pods", "tabby-pods-v6", "tabby-ports", "tabby-stale"}; !slices.Equal(got, want) {
		t.Fatalf("sets %q, want %q", got, want)
	}
	if got, want := members(t, n, "tabby-nets"), []string{"10.0.0.0/16", "10.0.1.0/24 nomatch", "10.9.9.9"}; !slices.Equal(got, want) {
		t.Fatalf("tabby-nets %q, want %q", got, want)
	}
	if got, want := members(t, n, "tabby-ports"), []string{"10.244.0.5,tcp:80", "10.244.0.5,udp:53"}; !slices.Equal(got, want) {
		t.Fatalf("tabby-ports %q, want %q", got, want)
	}

	// The kernel's listing compares equal with what was asked for, however it was written.
	rec.Take()
	s.QueueResync()
	if err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if calls, _ := rec.Take(); len(calls) != 1 || calls[0] != "ipset save" {
		t.Fatalf("resync of sets in line ran %q", calls)
	}

	// One member more: one restore, one add line.
	s.SetMembers("tabby-pods", "hash:ip", ipfamily.IPv4, []string{"10.244.0.5", "10.244.0.6", "10.244.0.7"})
	if err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if calls, stdin := rec.Take(); len(calls) != 1 || stdin[0] != "add tabby-pods 10.244.0.7\n" {
		t.Fatalf("one new member ran %q %q", calls, stdin)
	}
	// Mostly new members: swapped in.
	s.SetMembers("tabby-pods-v6", "hash:ip", ipfamily.IPv6, []string{"fd00::6"})
	if err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if _, stdin := rec.Take(); len(stdin) != 1 || !strings.Contains(stdin[0], "swap tabby-tmp tabby-pods-v6") {
		t.Fatalf("replacement wrote %q", stdin)
	}
	if got := members(t, n, "tabby-pods-v6"); !slices.Equal(got, []string{"fd00::6"}) {
		t.Fatalf("tabby-pods-v6 %q", got)
	}

	s.HoldDeletes(false)
	if err := s.ApplyDeletions(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, n), []string{"foreign", "tabby-nets", "tabby-pods", "tabby-pods-v6", "tabby-ports"}; !slices.Equal(got, want) {
		t.Fatalf("after in sync: sets %q, want %q", got, want)
	}
}

// A set is destroyed only once no rule uses it: felix's order is sets, then rules, then the
// destruction of sets.
func TestSetInUseIsDestroyedAfterItsRule(t *testing.T) {
	ctx := context.Background()
	for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		t.Run(string(b), func(t *testing.T) {
			n := nstest.New(t)
			s, _ := newSets(t, n)
			tb, err := iptables.New(iptables.Options{Family: ipfamily.IPv4, Table: "filter", Backend: b, Runner: n.Runner})
			if err != nil {
				t.Fatal(err)
			}
			s.SetMembers("tabby-used", "hash:ip", ipfamily.IPv4, []string{"192.0.2.1"})
			tb.UpdateChain("tabby-in", []string{"-m set --match-set tabby-used src -j DROP"})
			tb.SetBaseJumps("INPUT", []string{"-j tabby-in"})
			if err := s.ApplyUpdates(ctx); err != nil {
				t.Fatal(err)
			}
			if err := tb.Apply(ctx); err != nil {
				t.Fatal(err)
			}

			s.RemoveSet("tabby-used")
			tb.RemoveChain("tabby-in")
			tb.SetBaseJumps("INPUT", nil)
			// Out of order, the kernel refuses: the set stays, and the error says why.
			err = s.ApplyDeletions(ctx)
			if err == nil || !strings.Contains(err.Error(), "ipset tabby-used") || !strings.Contains(err.Error(), "in use") {
				t.Fatalf("destroy while a rule uses the set: %v", err)
			}
			if !slices.Contains(names(t, n), "tabby-used") {
				t.Fatal("set gone while a rule uses it")
			}
			// In felix's order it goes.
			if err := tb.Apply(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.ApplyDeletions(ctx); err != nil {
				t.Fatalf("destroy after the rule went: %v", err)
			}
			if got := names(t, n); len(got) != 0 {
				t.Fatalf("sets left: %q", got)
			}
		})
	}
}

// hash:net with nomatch: a packet to the nomatch subnet is not in the set, one elsewhere in
// the enclosing net is. The rule drops locally generated packets to members, which the
// sender sees as EPERM.
func TestNomatchPackets(t *testing.T) {
	ctx := context.Background()
	n := nstest.New(t)
	n.Exec(t, "ip", "addr", "add", "10.0.0.5/32", "dev", "lo")
	n.Exec(t, "ip", "addr", "add", "10.0.1.5/32", "dev", "lo")
	s, _ := newSets(t, n)
	s.SetMembers("tabby-nets", "hash:net", ipfamily.IPv4, []string{"10.0.0.0/16", "10.0.1.0/24 nomatch"})
	if err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	tb, err := iptables.New(iptables.Options{Family: ipfamily.IPv4, Table: "filter", Backend: iptables.BackendNFT, Runner: n.Runner})
	if err != nil {
		t.Fatal(err)
	}
	tb.UpdateChain("tabby-out", []string{"-p udp -m set --match-set tabby-nets dst -j DROP"})
	tb.SetBaseJumps("OUTPUT", []string{"-j tabby-out"})
	if err := tb.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	send := func(dst string) error {
		return n.Enter(func() error {
			c, err := net.Dial("udp4", dst+":9")
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("x"))
			return err
		})
	}
	if err := send("10.0.0.5"); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("to 10.0.0.5 (in 10.0.0.0/16): %v, want EPERM (dropped)", err)
	}
	if err := send("10.0.1.5"); err != nil {
		t.Fatalf("to 10.0.1.5 (in the nomatch 10.0.1.0/24): %v, want sent", err)
	}
}
