package nat

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/internal/nstest"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// An upgraded felix finds the NAT state the previous version wrote (same names, same rule)
// and adopts it: no rule or set is rewritten, and only the previous version's leftover
// temporary sets go. This also proves the rule is rendered as iptables-save prints it.
func TestUpgradeAdoptsExistingState(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		t.Run(string(b), func(t *testing.T) {
			n := nstest.New(t)
			ipt := iptables.Command(ipfamily.IPv4, b, "")
			for _, args := range [][]string{
				{"ipset", "create", MasqPoolsSet, "hash:net", "family", "inet"},
				{"ipset", "add", MasqPoolsSet, "10.244.0.0/16"},
				{"ipset", "create", AllPoolsSet, "hash:net", "family", "inet"},
				{"ipset", "add", AllPoolsSet, "10.244.0.0/16"},
				{"ipset", "add", AllPoolsSet, "10.245.0.0/16"},
				{"ipset", "create", MasqPoolsSet + "-tmp", "hash:net", "family", "inet"},
				{ipt, "-w", "-t", "nat", "-N", NATOutgoing},
				{ipt, "-w", "-t", "nat", "-A", NATOutgoing, "-m", "set", "--match-set", MasqPoolsSet, "src", "-m", "set", "!", "--match-set", AllPoolsSet, "dst", "-j", "MASQUERADE", "--random-fully"},
				{ipt, "-w", "-t", "nat", "-N", PostRouting},
				{ipt, "-w", "-t", "nat", "-A", PostRouting, "-j", NATOutgoing},
				{ipt, "-w", "-t", "nat", "-A", ParentChain, "-d", "203.0.113.99/32", "-j", "RETURN"},
				{ipt, "-w", "-t", "nat", "-I", ParentChain, "1", "-j", PostRouting},
			} {
				n.Exec(t, args[0], args[1:]...)
			}
			feat, err := iptables.DetectFeatures(context.Background(), n.Runner, ipfamily.IPv4, b)
			if err != nil || !feat.RandomFully {
				t.Fatalf("features %+v, %v: iptables 1.8 has --random-fully", feat, err)
			}
			rec := &nstest.Recorder{Runner: n.Runner}
			w := newWriters(t, rec, b)
			m := New(w.tables, w.sets, Options{RandomFully: feat.RandomFully})
			send(m, pool("a", "10.244.0.0/16", true), pool("b", "10.245.0.0/16", false))
			w.apply(t, m, false)
			calls, stdin := rec.Take()
			want := []string{"ipset save", iptables.Command(ipfamily.IPv4, b, "-save") + " -t nat", iptables.Command(ipfamily.IPv6, b, "-save") + " -t nat", "ipset restore"}
			if !slices.Equal(calls, want) || stdin[3] != "destroy "+MasqPoolsSet+"-tmp\n" {
				t.Fatalf("adopting the old state ran %q %q, want %q and only the old temporary set destroyed", calls, stdin, want)
			}

			// natOutgoing off: everything of tabby's goes, the foreign rule stays.
			send(m, pool("a", "10.244.0.0/16", false))
			w.apply(t, m, false)
			save := n.Exec(t, iptables.Command(ipfamily.IPv4, b, "-save"), "-t", "nat")
			if strings.Contains(save, "tabby") || !strings.Contains(save, "-A POSTROUTING -d 203.0.113.99/32 -j RETURN") {
				t.Fatalf("after natOutgoing off:\n%s", save)
			}
			if sets := n.Exec(t, "ipset", "list", "-n"); strings.TrimSpace(sets) != "" {
				t.Fatalf("sets left: %q", sets)
			}
		})
	}
}
