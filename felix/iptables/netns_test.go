package iptables_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/internal/nstest"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func newTable(t *testing.T, n *nstest.NS, fam ipfamily.Family, b iptables.Backend, name string) (*iptables.Table, *nstest.Recorder) {
	t.Helper()
	rec := &nstest.Recorder{Runner: n.Runner}
	tb, err := iptables.New(iptables.Options{Family: fam, Table: name, Backend: b, Runner: rec})
	if err != nil {
		t.Fatal(err)
	}
	return tb, rec
}

func apply(t *testing.T, tb *iptables.Table) {
	t.Helper()
	if err := tb.Apply(context.Background()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// rules returns the -A lines of table as the kernel lists them.
func rules(t *testing.T, n *nstest.NS, fam ipfamily.Family, b iptables.Backend, table string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(n.Exec(t, iptables.Command(fam, b, "-save"), "-t", table), "\n") {
		if strings.HasPrefix(l, "-A ") || strings.HasPrefix(l, ":") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

func chainLines(lines []string, chain string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			out = append(out, strings.TrimPrefix(l, "-A "+chain+" "))
		}
	}
	return out
}

func hasChain(lines []string, chain string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, ":"+chain+" ") {
			return true
		}
	}
	return false
}

func TestTableInNetns(t *testing.T) {
	nstest.Require(t)
	for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		for _, fam := range ipfamily.All {
			t.Run(string(b)+"/"+fam.String(), func(t *testing.T) { testTable(t, b, fam) })
		}
	}
}

func testTable(t *testing.T, b iptables.Backend, fam ipfamily.Family) {
	n := nstest.New(t)
	ipt := iptables.Command(fam, b, "")
	src := map[ipfamily.Family]string{ipfamily.IPv4: "192.0.2.1/32", ipfamily.IPv6: "2001:db8::1/128"}[fam]
	// Someone else's chain and rules in FORWARD, and a stale tabby chain with two jumps to it
	// left by an older felix.
	n.Exec(t, ipt, "-w", "-N", "FOREIGN")
	n.Exec(t, ipt, "-w", "-A", "FOREIGN", "-s", src, "-j", "DROP")
	n.Exec(t, ipt, "-w", "-A", "FORWARD", "-j", "FOREIGN")
	n.Exec(t, ipt, "-w", "-N", "tabby-stale")
	n.Exec(t, ipt, "-w", "-A", "tabby-stale", "-j", "RETURN")
	n.Exec(t, ipt, "-w", "-N", "tabby-FORWARD")
	n.Exec(t, ipt, "-w", "-A", "FORWARD", "-j", "tabby-FORWARD")
	n.Exec(t, ipt, "-w", "-A", "FORWARD", "-j", "tabby-FORWARD")
	n.Exec(t, ipt, "-w", "-A", "FORWARD", "-j", "tabby-stale")
	foreign := chainLines(rules(t, n, fam, b, "filter"), "FOREIGN")

	tb, rec := newTable(t, n, fam, b, "filter")
	tb.HoldDeletes(true)
	tb.UpdateChain("tabby-FORWARD", []string{"-j tabby-fw", "-m comment --comment \"to pods\" -j tabby-tw"})
	tb.UpdateChain("tabby-fw", []string{"-s " + src + " -j DROP"})
	tb.UpdateChain("tabby-tw", []string{"-p tcp -m tcp --dport 80 -j ACCEPT"})
	tb.SetBaseJumps("FORWARD", []string{"-j tabby-FORWARD"})
	apply(t, tb)
	got := rules(t, n, fam, b, "filter")
	if fwd := chainLines(got, "FORWARD"); !slices.Equal(fwd, []string{"-j tabby-FORWARD", "-j FOREIGN", "-j tabby-stale"}) {
		t.Fatalf("FORWARD while holding deletions = %q: want one tabby jump on top, the foreign and the stale one kept", fwd)
	}
	if !hasChain(got, "tabby-stale") {
		t.Fatal("stale chain deleted while deletions are held")
	}
	if tw := chainLines(got, "tabby-tw"); !slices.Equal(tw, []string{"-p tcp -m tcp --dport 80 -j ACCEPT"}) {
		t.Fatalf("tabby-tw = %q", tw)
	}

	// Nothing changed: nothing runs, not even a read.
	rec.Take()
	apply(t, tb)
	if calls, _ := rec.Take(); len(calls) != 0 {
		t.Fatalf("an apply without changes ran %q", calls)
	}
	// A resync of a kernel in line writes nothing (the rules compare as iptables-save prints them).
	tb.QueueResync()
	apply(t, tb)
	if calls, _ := rec.Take(); len(calls) != 1 || !strings.Contains(calls[0], "-save -t filter") {
		t.Fatalf("resync of an unchanged table ran %q, want one save", calls)
	}

	// One chain changes: one restore, writing that chain only.
	tb.UpdateChain("tabby-tw", []string{"-p tcp -m tcp --dport 443 -j ACCEPT"})
	apply(t, tb)
	calls, stdin := rec.Take()
	if len(calls) != 1 || !strings.Contains(calls[0], "-restore --noflush -w") {
		t.Fatalf("one changed chain ran %q", calls)
	}
	if want := "*filter\n:tabby-tw - [0:0]\n-A tabby-tw -p tcp -m tcp --dport 443 -j ACCEPT\nCOMMIT\n"; stdin[0] != want {
		t.Fatalf("one changed chain wrote:\n%s\nwant:\n%s", stdin[0], want)
	}

	// In sync: the stale chain and its jump go, the foreign ones stay.
	tb.HoldDeletes(false)
	apply(t, tb)
	got = rules(t, n, fam, b, "filter")
	if hasChain(got, "tabby-stale") {
		t.Fatal("stale chain kept once deletions are allowed")
	}
	if fwd := chainLines(got, "FORWARD"); !slices.Equal(fwd, []string{"-j tabby-FORWARD", "-j FOREIGN"}) {
		t.Fatalf("FORWARD = %q", fwd)
	}

	// Drift: someone inserts above tabby's jump and deletes a tabby chain's rule.
	n.Exec(t, ipt, "-w", "-I", "FORWARD", "1", "-j", "FOREIGN")
	n.Exec(t, ipt, "-w", "-F", "tabby-fw")
	tb.QueueResync()
	apply(t, tb)
	got = rules(t, n, fam, b, "filter")
	if fwd := chainLines(got, "FORWARD"); !slices.Equal(fwd, []string{"-j tabby-FORWARD", "-j FOREIGN", "-j FOREIGN"}) {
		t.Fatalf("after drift FORWARD = %q", fwd)
	}
	if fw := chainLines(got, "tabby-fw"); len(fw) != 1 {
		t.Fatalf("after drift tabby-fw = %q", fw)
	}

	// Everything removed: only the foreign state is left.
	for _, c := range []string{"tabby-FORWARD", "tabby-fw", "tabby-tw"} {
		tb.RemoveChain(c)
	}
	tb.SetBaseJumps("FORWARD", nil)
	apply(t, tb)
	got = rules(t, n, fam, b, "filter")
	for _, l := range got {
		if strings.Contains(l, "tabby") {
			t.Fatalf("tabby state left: %q", got)
		}
	}
	if fwd := chainLines(got, "FORWARD"); !slices.Equal(fwd, []string{"-j FOREIGN", "-j FOREIGN"}) {
		t.Fatalf("foreign jumps = %q", fwd)
	}
	if f := chainLines(got, "FOREIGN"); !slices.Equal(f, foreign) {
		t.Fatalf("foreign chain = %q, was %q", f, foreign)
	}
}
