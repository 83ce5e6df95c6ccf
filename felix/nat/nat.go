// Package nat masquerades traffic leaving the pod network, as Calico's natOutgoing does: one
// MASQUERADE rule in tabby's own chain matching two ipsets, so the rule count stays constant
// however many pools there are. It is a felix Manager: it decides, the shared iptables and ipset
// writers apply. Each family gets the same rule in its own table (iptables, ip6tables) over its
// own sets; only tabby's chains, jump and sets are ever changed.
package nat

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/ipsets"
	"github.com/tabbynet/tabby/felix/iptables"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

const (
	Table        = "nat"
	ParentChain  = "POSTROUTING"
	PostRouting  = "tabby-POSTROUTING"
	NATOutgoing  = "tabby-nat-outgoing"
	MasqPoolsSet = "tabby-masq-ipam-pools"
	AllPoolsSet  = "tabby-all-ipam-pools"
	setType      = "hash:net"
)

// SetName is the name of one family's copy of a pool set: IPv4 keeps the names tabby always
// used, so an upgraded felix adopts its sets instead of replacing them.
func SetName(base string, fam ipfamily.Family) string { return base + fam.NameSuffix() }

// Options configure the manager.
type Options struct {
	// RandomFully adds --random-fully to the MASQUERADE rule (see iptables.Features).
	RandomFully bool
	Log         *slog.Logger
}

type natPool struct {
	cidr netip.Prefix
	masq bool
}

// Manager decides tabby's NAT chains and sets from the pools (PoolUpdate, PoolRemove): traffic
// from a natOutgoing pool to anywhere outside all pools is masqueraded.
type Manager struct {
	tables map[ipfamily.Family]*iptables.Table
	sets   *ipsets.IPSets
	opts   Options

	// byName holds each pool's CIDR and natOutgoing; masq and all are the two sets' members
	// they make, sorted.
	byName    map[string]natPool
	masq, all []netip.Prefix
	dirty     bool
	warned    map[ipfamily.Family]bool
}

// New returns a manager writing into tables (the nat table of each family felix programs; a
// family without one is not programmed) and sets. Its first CompleteDeferredWork states the
// NAT state even before any pool arrived: none, so a stale one is removed.
func New(tables map[ipfamily.Family]*iptables.Table, sets *ipsets.IPSets, o Options) *Manager {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Manager{tables: tables, sets: sets, opts: o, byName: map[string]natPool{}, dirty: true, warned: map[ipfamily.Family]bool{}}
}

// OnUpdate takes PoolUpdate and PoolRemove; other messages are ignored.
func (m *Manager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case model.PoolUpdate:
		p := natPool{cidr: u.Pool.CIDR.Masked(), masq: u.Pool.NATOutgoing}
		if old, ok := m.byName[u.Pool.Name]; ok && old == p {
			return
		}
		m.byName[u.Pool.Name] = p
	case model.PoolRemove:
		if _, ok := m.byName[u.Name]; !ok {
			return
		}
		delete(m.byName, u.Name)
	default:
		return
	}
	var masq, all []netip.Prefix
	for _, p := range m.byName {
		all = append(all, p.cidr)
		if p.masq {
			masq = append(masq, p.cidr)
		}
	}
	masq, all = sorted(masq), sorted(all)
	if slices.Equal(masq, m.masq) && slices.Equal(all, m.all) {
		return
	}
	m.masq, m.all, m.dirty = masq, all, true
}

func sorted(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, netip.Prefix.Compare)
	return slices.Compact(ps)
}

// CompleteDeferredWork hands the writers the NAT state of each family.
func (m *Manager) CompleteDeferredWork(_ context.Context, resync bool) error {
	if !m.dirty && !resync {
		return nil
	}
	for _, fam := range ipfamily.All {
		masq, all := ipfamily.Split(m.masq, fam), ipfamily.Split(m.all, fam)
		t := m.tables[fam]
		if t == nil {
			if len(masq) > 0 && !m.warned[fam] {
				m.opts.Log.Warn("natOutgoing pools of a family felix does not program: not masqueraded", "family", fam.String(), "pools", masq)
				m.warned[fam] = true
			}
			continue
		}
		masqSet, allSet := SetName(MasqPoolsSet, fam), SetName(AllPoolsSet, fam)
		if len(masq) == 0 {
			t.SetBaseJumps(ParentChain, nil)
			t.RemoveChain(PostRouting)
			t.RemoveChain(NATOutgoing)
			m.sets.RemoveSet(masqSet)
			m.sets.RemoveSet(allSet)
			continue
		}
		m.sets.SetMembers(masqSet, setType, fam, prefixStrings(masq))
		m.sets.SetMembers(allSet, setType, fam, prefixStrings(all))
		rule := "-m set --match-set " + masqSet + " src -m set ! --match-set " + allSet + " dst -j MASQUERADE"
		if m.opts.RandomFully {
			rule += " --random-fully"
		}
		t.UpdateChain(NATOutgoing, []string{rule})
		t.UpdateChain(PostRouting, []string{"-j " + NATOutgoing})
		t.SetBaseJumps(ParentChain, []string{"-j " + PostRouting})
	}
	m.dirty = false
	return nil
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
