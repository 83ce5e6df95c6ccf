package iptables

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

func newFakeTable(t *testing.T, k cmdrun.Runner, name string) *Table {
	t.Helper()
	tb, err := New(Options{Family: ipfamily.IPv4, Table: name, Backend: BackendNFT, Runner: k, RetryPause: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func mustApply(t *testing.T, tb *Table) {
	t.Helper()
	if err := tb.Apply(context.Background()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// seed runs a restore script on the fake kernel as another program would.
func seed(t *testing.T, k *fakekernel.Kernel, script string) {
	t.Helper()
	if _, err := k.Run(context.Background(), "iptables-nft-restore", []string{"--noflush"}, []byte(script)); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

func restores(k *fakekernel.Kernel) []fakekernel.Call { return k.CallsTo("iptables-nft-restore") }

func TestApplyWritesOnlyWhatDiffers(t *testing.T) {
	k := fakekernel.New()
	seed(t, k, "*filter\n:FOREIGN - [0:0]\n-A FORWARD -j FOREIGN\n-A FOREIGN -j ACCEPT\nCOMMIT\n")
	k.ResetCalls()
	tb := newFakeTable(t, k, "filter")
	tb.UpdateChain("tabby-FORWARD", []string{"-j tabby-a", "-j tabby-b"})
	tb.UpdateChain("tabby-a", []string{"-s 10.0.0.1/32 -j ACCEPT"})
	tb.UpdateChain("tabby-b", []string{`-m comment --comment "two words" -j DROP`})
	tb.SetBaseJumps("FORWARD", []string{"-j tabby-FORWARD"})
	mustApply(t, tb)

	calls := k.Calls()
	if len(calls) != 2 || calls[0].Name != "iptables-nft-save" || !slices.Equal(calls[0].Args, []string{"-t", "filter"}) || calls[1].Name != "iptables-nft-restore" {
		t.Fatalf("first apply: want one save and one restore, got %v", calls)
	}
	if !slices.Contains(calls[1].Args, "--noflush") || !slices.Contains(calls[1].Args, "-w") {
		t.Fatalf("restore args %v lack --noflush -w", calls[1].Args)
	}
	chains := k.Chains("iptables-nft", "filter")
	if got := chains["FORWARD"]; !slices.Equal(got, []string{"-j tabby-FORWARD", "-j FOREIGN"}) {
		t.Fatalf("FORWARD = %q: want tabby's jump first and the foreign one kept", got)
	}
	if got := chains["FOREIGN"]; !slices.Equal(got, []string{"-j ACCEPT"}) {
		t.Fatalf("foreign chain touched: %q", got)
	}
	if got := chains["tabby-b"]; !slices.Equal(got, []string{`-m comment --comment "two words" -j DROP`}) {
		t.Fatalf("tabby-b = %q", got)
	}

	k.ResetCalls()
	mustApply(t, tb)
	tb.UpdateChain("tabby-a", []string{"-s  10.0.0.1/32   -j ACCEPT"}) // blanks only
	mustApply(t, tb)
	if c := k.Calls(); len(c) != 0 {
		t.Fatalf("applies without a change ran %v", c)
	}

	tb.UpdateChain("tabby-b", []string{"-j ACCEPT"})
	mustApply(t, tb)
	r := restores(k)
	if len(r) != 1 {
		t.Fatalf("one changed chain: %d restores", len(r))
	}
	want := "*filter\n:tabby-b - [0:0]\n-A tabby-b -j ACCEPT\nCOMMIT\n"
	if r[0].Stdin != want {
		t.Fatalf("one changed chain wrote:\n%s\nwant:\n%s", r[0].Stdin, want)
	}
	if len(k.Calls()) != 1 {
		t.Fatalf("a change re-read the kernel: %v", k.Calls())
	}
}

func TestStaleChainsAndJumpsAfterResync(t *testing.T) {
	k := fakekernel.New()
	// What an older felix left: two chains jumping to each other, a duplicate base jump, a
	// jump from POSTROUTING that is no longer wanted, and someone else's rule in between.
	seed(t, k, `*nat
:tabby-old - [0:0]
:tabby-older - [0:0]
:tabby-POSTROUTING - [0:0]
-A POSTROUTING -j tabby-POSTROUTING
-A POSTROUTING -d 203.0.113.99/32 -j RETURN
-A POSTROUTING -j tabby-POSTROUTING
-A POSTROUTING -j tabby-old
-A tabby-old -j tabby-older
-A tabby-older -j MASQUERADE
-A tabby-POSTROUTING -j RETURN
COMMIT
`)
	tb := newFakeTable(t, k, "nat")
	tb.HoldDeletes(true)
	tb.UpdateChain("tabby-POSTROUTING", []string{"-j RETURN"})
	tb.SetBaseJumps("POSTROUTING", []string{"-j tabby-POSTROUTING"})
	mustApply(t, tb)
	chains := k.Chains("iptables-nft", "nat")
	if _, ok := chains["tabby-old"]; !ok {
		t.Fatal("stale chain deleted while deletions are held")
	}
	if got := chains["POSTROUTING"]; !slices.Equal(got, []string{"-j tabby-POSTROUTING", "-d 203.0.113.99/32 -j RETURN", "-j tabby-old"}) {
		t.Fatalf("held: POSTROUTING = %q, want the duplicate gone and the stale jump kept", got)
	}
	k.ResetCalls()
	mustApply(t, tb)
	if c := k.Calls(); len(c) != 0 {
		t.Fatalf("held deletions are re-planned into commands: %v", c)
	}

	tb.HoldDeletes(false)
	mustApply(t, tb)
	chains = k.Chains("iptables-nft", "nat")
	for _, stale := range []string{"tabby-old", "tabby-older"} {
		if _, ok := chains[stale]; ok {
			t.Errorf("stale chain %s kept", stale)
		}
	}
	if got := chains["POSTROUTING"]; !slices.Equal(got, []string{"-j tabby-POSTROUTING", "-d 203.0.113.99/32 -j RETURN"}) {
		t.Fatalf("POSTROUTING = %q", got)
	}

	// Removing everything leaves the foreign rule alone.
	tb.RemoveChain("tabby-POSTROUTING")
	tb.SetBaseJumps("POSTROUTING", nil)
	mustApply(t, tb)
	chains = k.Chains("iptables-nft", "nat")
	if got := chains["POSTROUTING"]; !slices.Equal(got, []string{"-d 203.0.113.99/32 -j RETURN"}) {
		t.Fatalf("after removal POSTROUTING = %q", got)
	}
	if _, ok := chains["tabby-POSTROUTING"]; ok {
		t.Fatal("removed chain kept")
	}
}

func TestBaseJumpsBackOnTop(t *testing.T) {
	k := fakekernel.New()
	tb := newFakeTable(t, k, "filter")
	tb.UpdateChain("tabby-FORWARD", []string{"-j ACCEPT"})
	tb.UpdateChain("tabby-second", nil)
	tb.SetBaseJumps("FORWARD", []string{"-j tabby-FORWARD", "-j tabby-second"})
	mustApply(t, tb)
	// Someone inserts above tabby's jumps; a resync puts them back on top without moving it.
	seed(t, k, "*filter\n-I FORWARD 1 -s 192.0.2.1/32 -j DROP\n-A FORWARD -j RETURN\nCOMMIT\n")
	tb.QueueResync()
	mustApply(t, tb)
	want := []string{"-j tabby-FORWARD", "-j tabby-second", "-s 192.0.2.1/32 -j DROP", "-j RETURN"}
	if got := k.Chains("iptables-nft", "filter")["FORWARD"]; !slices.Equal(got, want) {
		t.Fatalf("FORWARD = %q, want %q", got, want)
	}
	k.ResetCalls()
	tb.QueueResync()
	mustApply(t, tb)
	if r := restores(k); len(r) != 0 {
		t.Fatalf("resync of an unchanged kernel restored %v", r)
	}
}

func TestRetryAfterFailedRestore(t *testing.T) {
	k := fakekernel.New()
	tb := newFakeTable(t, k, "filter")
	tb.UpdateChain("tabby-a", []string{"-j ACCEPT"})
	mustApply(t, tb)

	// Another program changes the table between felix's read and its write, and the commit
	// fails once: felix re-reads, sees the other program's change and writes again.
	seed(t, k, "*filter\n:tabby-a - [0:0]\n-A tabby-a -j DROP\nCOMMIT\n")
	k.ResetCalls()
	tb.UpdateChain("tabby-b", []string{"-j tabby-a"})
	k.Fail(fakekernel.Failure{Name: "iptables-nft-restore", Stderr: "iptables-nft-restore: line 3: RULE_APPEND failed (Resource temporarily unavailable)"})
	mustApply(t, tb)
	names := []string{}
	for _, c := range k.Calls() {
		names = append(names, c.Name)
	}
	if want := []string{"iptables-nft-restore", "iptables-nft-save", "iptables-nft-restore"}; !slices.Equal(names, want) {
		t.Fatalf("calls %v, want %v", names, want)
	}
	chains := k.Chains("iptables-nft", "filter")
	if !slices.Equal(chains["tabby-a"], []string{"-j ACCEPT"}) || !slices.Equal(chains["tabby-b"], []string{"-j tabby-a"}) {
		t.Fatalf("after retry: %v", chains)
	}

	// A restore that keeps failing: bounded attempts, then the error names the line.
	tb.UpdateChain("tabby-c", []string{"-j DROP"})
	k.Fail(fakekernel.Failure{Name: "iptables-nft-restore", Times: 100, Stderr: "iptables-nft-restore: line 2 failed"})
	k.ResetCalls()
	err := tb.Apply(context.Background())
	if err == nil || !strings.Contains(err.Error(), `":tabby-c - [0:0]"`) {
		t.Fatalf("persistent failure: %v, want the refused line named", err)
	}
	if n := len(restores(k)); n != defaultAttempts {
		t.Fatalf("%d restores, want %d attempts", n, defaultAttempts)
	}
}

func TestRefusedUpdatesAreReportedAndSkipped(t *testing.T) {
	k := fakekernel.New()
	tb := newFakeTable(t, k, "filter")
	tb.UpdateChain("FORWARD", []string{"-j ACCEPT"})
	tb.UpdateChain("tabby-ok", []string{"-j ACCEPT"})
	tb.UpdateChain("tabby-quote", []string{`-m comment --comment "open`})
	tb.SetBaseJumps("FORWARD", []string{"-j ACCEPT"})
	if err := tb.Apply(context.Background()); err != nil {
		t.Fatalf("refused updates failed the apply: %v", err)
	}
	err := tb.Refused()
	for _, want := range []string{"chain FORWARD: not tabby's", "unterminated quote", "does not jump to a tabby- chain"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	chains := k.Chains("iptables-nft", "filter")
	if !slices.Equal(chains["tabby-ok"], []string{"-j ACCEPT"}) || len(chains["FORWARD"]) != 0 {
		t.Fatalf("chains %v", chains)
	}
	tb.RemoveChain("FORWARD")
	tb.RemoveChain("tabby-quote")
	tb.SetBaseJumps("FORWARD", nil)
	if err := tb.Refused(); err != nil {
		t.Fatalf("after removing the refused updates: %v", err)
	}
}

func TestStaleChainStillJumpedToIsKept(t *testing.T) {
	k := fakekernel.New()
	seed(t, k, "*filter\n:tabby-gone - [0:0]\nCOMMIT\n")
	tb := newFakeTable(t, k, "filter")
	tb.UpdateChain("tabby-a", []string{"-j tabby-gone"}) // a caller's mistake
	tb.UpdateChain("tabby-b", []string{"-j ACCEPT"})
	mustApply(t, tb)
	chains := k.Chains("iptables-nft", "filter")
	if _, ok := chains["tabby-gone"]; !ok || len(chains["tabby-b"]) != 1 {
		t.Fatalf("chains %v: want the referenced stale chain kept and the rest written", chains)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		`-m comment --comment "a b"  -j  ACCEPT`: `-m comment --comment "a b" -j ACCEPT`,
		`-m comment --comment plain -j ACCEPT`:   `-m comment --comment plain -j ACCEPT`,
		`-m comment --comment "plain" -j ACCEPT`: `-m comment --comment plain -j ACCEPT`,
		`-m comment --comment "q\"x" -j ACCEPT`:  `-m comment --comment "q\"x" -j ACCEPT`,
	} {
		got, err := normalize(in)
		if err != nil || got != want {
			t.Errorf("normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
