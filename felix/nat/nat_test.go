package nat

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/felix/ipsets"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

type writers struct {
	sets   *ipsets.IPSets
	tables map[ipfamily.Family]*iptables.Table
}

func newWriters(t *testing.T, r cmdrun.Runner, b iptables.Backend) *writers {
	t.Helper()
	s, err := ipsets.New(ipsets.Options{Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	w := &writers{sets: s, tables: map[ipfamily.Family]*iptables.Table{}}
	for _, fam := range ipfamily.All {
		tb, err := iptables.New(iptables.Options{Family: fam, Table: Table, Backend: b, Runner: r})
		if err != nil {
			t.Fatal(err)
		}
		w.tables[fam] = tb
	}
	return w
}

// apply runs one felix pass: the manager, then the writers in the kernel's order.
func (w *writers) apply(t *testing.T, m *Manager, resync bool) {
	t.Helper()
	ctx := context.Background()
	if err := m.CompleteDeferredWork(ctx, resync); err != nil {
		t.Fatal(err)
	}
	if err := w.sets.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	for _, fam := range ipfamily.All {
		if err := w.tables[fam].Apply(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.sets.ApplyDeletions(ctx); err != nil {
		t.Fatal(err)
	}
}

func pool(name, cidr string, natOutgoing bool) model.PoolUpdate {
	return model.PoolUpdate{Pool: model.Pool{Name: name, CIDR: netip.MustParsePrefix(cidr), IPIPMode: "Never", NATOutgoing: natOutgoing}}
}

func send(m *Manager, msgs ...any) {
	for _, msg := range msgs {
		m.OnUpdate(msg)
	}
}

// A pool's removal takes it out of the sets; the last natOutgoing pool's takes the rules away.
func TestManagerPoolRemoved(t *testing.T) {
	k := fakekernel.New()
	w := newWriters(t, k, iptables.BackendNFT)
	m := New(w.tables, w.sets, Options{})
	send(m, pool("a", "10.244.0.0/16", true), pool("b", "10.245.0.0/16", false))
	w.apply(t, m, false)
	send(m, model.PoolRemove{Name: "b"}, model.PoolRemove{Name: "unknown"})
	w.apply(t, m, false)
	if got := k.Sets()["tabby-all-ipam-pools"].Members; !slices.Equal(got, []string{"10.244.0.0/16"}) {
		t.Fatalf("all pools after a removal: %v", got)
	}
	send(m, model.PoolRemove{Name: "a"})
	w.apply(t, m, false)
	if len(k.Sets()) != 0 || len(k.Chains("iptables-nft", "nat")[NATOutgoing]) != 0 {
		t.Fatalf("NAT left without pools: sets %v, chains %v", k.Sets(), k.Chains("iptables-nft", "nat"))
	}
}

func callNames(k *fakekernel.Kernel) []string {
	var out []string
	for _, c := range k.Calls() {
		n := c.Name
		if c.Name == "ipset" {
			n += " " + c.Args[0]
		}
		out = append(out, n)
	}
	return out
}

func TestManagerBothFamilies(t *testing.T) {
	k := fakekernel.New()
	w := newWriters(t, k, iptables.BackendNFT)
	m := New(w.tables, w.sets, Options{RandomFully: true})
	send(m, pool("a", "10.244.0.0/16", true), pool("b", "fd00:10:244::/48", true), pool("c", "10.245.0.0/16", false))
	w.apply(t, m, false)

	masq := "-m set --match-set tabby-masq-ipam-pools src -m set ! --match-set tabby-all-ipam-pools dst -j MASQUERADE --random-fully"
	v4 := k.Chains("iptables-nft", "nat")
	if !slices.Equal(v4["POSTROUTING"], []string{"-j tabby-POSTROUTING"}) || !slices.Equal(v4[PostRouting], []string{"-j tabby-nat-outgoing"}) || !slices.Equal(v4[NATOutgoing], []string{masq}) {
		t.Fatalf("IPv4 nat table %v", v4)
	}
	v6 := k.Chains("ip6tables-nft", "nat")
	masq6 := strings.ReplaceAll(strings.ReplaceAll(masq, "pools src", "pools-v6 src"), "pools dst", "pools-v6 dst")
	if !slices.Equal(v6[NATOutgoing], []string{masq6}) || !slices.Equal(v6["POSTROUTING"], []string{"-j tabby-POSTROUTING"}) {
		t.Fatalf("IPv6 nat table %v", v6)
	}
	sets := k.Sets()
	for name, want := range map[string]fakekernel.Set{
		"tabby-masq-ipam-pools":    {Type: "hash:net", Family: "inet", Members: []string{"10.244.0.0/16"}},
		"tabby-all-ipam-pools":     {Type: "hash:net", Family: "inet", Members: []string{"10.244.0.0/16", "10.245.0.0/16"}},
		"tabby-masq-ipam-pools-v6": {Type: "hash:net", Family: "inet6", Members: []string{"fd00:10:244::/48"}},
		"tabby-all-ipam-pools-v6":  {Type: "hash:net", Family: "inet6", Members: []string{"fd00:10:244::/48"}},
	} {
		got := sets[name]
		if got.Type != want.Type || got.Family != want.Family || !slices.Equal(got.Members, want.Members) {
			t.Errorf("set %s = %+v, want %+v", name, got, want)
		}
	}

	// The same pools again, in another order, with what NAT does not read changed: nothing runs.
	k.ResetCalls()
	c := pool("c", "10.245.0.0/16", false)
	c.Pool.IPIPMode = "Always"
	send(m, pool("b", "fd00:10:244::/48", true), c, pool("a", "10.244.0.0/16", true))
	w.apply(t, m, false)
	if c := k.Calls(); len(c) != 0 {
		t.Fatalf("unchanged pools ran %v", c)
	}

	// A new non-NAT pool: one ipset restore adding it, no iptables-restore.
	send(m, pool("d", "10.246.0.0/16", false))
	w.apply(t, m, false)
	if c := k.Calls(); len(c) != 1 || c[0].Stdin != "add tabby-all-ipam-pools 10.246.0.0/16\n" {
		t.Fatalf("one more pool ran %v", c)
	}

	// No natOutgoing in IPv6 any more: its rules and sets go, IPv4's stay untouched.
	k.ResetCalls()
	send(m, pool("b", "fd00:10:244::/48", false))
	w.apply(t, m, false)
	if got, want := callNames(k), []string{"ip6tables-nft-restore", "ipset restore"}; !slices.Equal(got, want) {
		t.Fatalf("IPv6 NAT off ran %v, want %v", got, want)
	}
	for n := range k.Chains("ip6tables-nft", "nat") {
		if strings.HasPrefix(n, "tabby-") {
			t.Errorf("IPv6 chain %s left", n)
		}
	}
	if len(k.Chains("ip6tables-nft", "nat")["POSTROUTING"]) != 0 {
		t.Error("IPv6 POSTROUTING jump left")
	}
	if _, ok := k.Sets()["tabby-masq-ipam-pools-v6"]; ok {
		t.Error("IPv6 set left")
	}
	if len(k.Sets()) != 2 {
		t.Errorf("sets %v, want the two IPv4 ones", k.Sets())
	}
}

func TestManagerWithoutRandomFullyAndWithoutATable(t *testing.T) {
	k := fakekernel.New()
	w := newWriters(t, k, iptables.BackendLegacy)
	delete(w.tables, ipfamily.IPv6)
	m := New(w.tables, w.sets, Options{})
	send(m, pool("a", "10.244.0.0/16", true), pool("b", "fd00::/48", true))
	ctx := context.Background()
	if err := m.CompleteDeferredWork(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := w.sets.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.tables[ipfamily.IPv4].Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if got := k.Chains("iptables-legacy", "nat")[NATOutgoing]; len(got) != 1 || strings.Contains(got[0], "random-fully") {
		t.Fatalf("rule %q", got)
	}
	if _, ok := k.Sets()["tabby-masq-ipam-pools-v6"]; ok {
		t.Fatal("IPv6 set made without an IPv6 table")
	}
}
