package felix

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/cmdrun/fakekernel"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// filterManager is a manager as the policy one will be: it writes a filter chain that uses a
// set, and the base jump to it.
type filterManager struct {
	w      Writers
	pools  []model.PoolUpdate
	member string
}

func (m *filterManager) OnUpdate(msg any) {
	if p, ok := msg.(model.PoolUpdate); ok {
		m.pools = append(m.pools, p)
	}
}

func (m *filterManager) CompleteDeferredWork(context.Context, bool) error {
	m.w.IPSets.SetMembers("tabby-pi-x", "hash:ip", ipfamily.IPv4, []string{m.member})
	m.w.Filter[ipfamily.IPv4].UpdateChain("tabby-FORWARD", []string{"-m set --match-set tabby-pi-x src -j ACCEPT"})
	m.w.Filter[ipfamily.IPv4].SetBaseJumps("FORWARD", []string{"-j tabby-FORWARD"})
	return nil
}

// An added manager's state is written in the same pass as NAT's, sets before the rules that
// use them; a change of one member is one ipset restore and nothing else.
func TestAddedManagerSharesTheWriters(t *testing.T) {
	kern := fakekernel.New()
	f, _, _ := fullSyncedFelixOn(t, kern, nil, 1)
	m := &filterManager{w: f.Writers(), member: "10.244.1.1"}
	f.AddManager(m)
	f.send(pool("other", "10.245.0.0/16", v1.IPIPModeNever, false))
	f.QueueResync()
	f.mustApply(t)
	if len(m.pools) != 1 || m.pools[0].Pool.Name != "other" {
		t.Fatalf("manager got %v, want the pool message", m.pools)
	}
	chains := kern.Chains("iptables-nft", "filter")
	if !slices.Equal(chains["FORWARD"], []string{"-j tabby-FORWARD"}) || len(chains["tabby-FORWARD"]) != 1 {
		t.Fatalf("filter table %v", chains)
	}
	kern.ResetCalls()
	m.member = "10.244.1.2"
	f.send(workload("calibbbbbbbbbbb", "10.244.1.10")) // any event runs a pass
	f.mustApply(t)
	c := kern.Calls()
	if len(c) != 1 || c[0].Name != "ipset" || c[0].Stdin != "create tabby-tmp hash:ip family inet maxelem 1048576\nadd tabby-tmp 10.244.1.2\nswap tabby-tmp tabby-pi-x\ndestroy tabby-tmp\n" {
		t.Fatalf("one member changed ran %v", c)
	}
}

// A resync reads each family's tables with one iptables-save, not one per table.
func TestResyncReadsOnceAFamily(t *testing.T) {
	kern := fakekernel.New()
	f, _, _ := fullSyncedFelixOn(t, kern, nil, 1)
	kern.ResetCalls()
	f.QueueResync()
	f.mustApply(t)
	saves := map[string]int{}
	for _, c := range kern.Calls() {
		if strings.HasSuffix(c.Name, "-save") {
			saves[c.Name]++
			if slices.Contains(c.Args, "-t") {
				t.Errorf("%v: a save of one table", c)
			}
		}
	}
	if saves["iptables-nft-save"] != 1 || saves["ip6tables-nft-save"] != 1 {
		t.Fatalf("saves in a resync: %v, want one per family", saves)
	}
}
