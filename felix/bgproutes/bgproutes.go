// Package bgproutes is felix's manager of the routes learned from BGP: another node's block (or
// an address borrowed out of a block) via the next hop the speaker learned, or a multipath route
// over the next hops of the paths that tie with the best (ECMP), directly on the uplink in this
// node's subnet, through tunl0 where the pool's ipipMode asks for it, and otherwise resolved
// through the host's own routes like BIRD's "gateway recursive". A prefix outside every pool
// (an external router's, such as a ToR's default route) is routed the same way unless the host
// has its own route to it (calc.ExternalRoute). A prefix of a VXLAN pool is felix/vxlan's to
// route, from the datastore: here it gets at most a native route to a next hop in this node's
// subnet, which the route table uses only while felix/vxlan has none (calc.LearnedRoute), and
// is never reported unresolved. A learned or withdrawn route costs its own prefix; what every
// route depends on (the pools, this node's addresses, the host's routes) decides them all
// again.
package bgproutes

import (
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/internal/dirtyset"
	"github.com/tabbynet/tabby/felix/routetable"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Options configure the manager.
type Options struct {
	// NodeName is this node: its NodeUpdate gives the BGP addresses whose subnets are reached
	// directly.
	NodeName string
	// Uplink holds the node's BGP address of each family.
	Uplink ipfamily.Pair[string]
	// Unresolved, when set, is kept at the number of learned routes whose next hop is unusable.
	Unresolved prometheus.Gauge
	Log        *slog.Logger
}

// poolRouting is what of a pool decides a learned route.
type poolRouting struct {
	cidr  netip.Prefix
	mode  v1.IPIPMode
	vxlan v1.VXLANMode
}

// Manager takes RouteUpdate/RouteRemove (the speaker's best paths), PoolUpdate/PoolRemove, this
// node's NodeUpdate/NodeRemove and routetable.HostRoutesUpdate, and states the learned routes in
// the route table as ClassLearned.
type Manager struct {
	rt   routetable.Writer
	opts Options

	underlay calc.Underlay
	pools    map[string]model.Pool
	routing  map[string]poolRouting
	sorted   calc.Pools
	resolver *calc.Resolver

	// learned are the next hops of each prefix's equal-cost paths, the best path's first.
	learned    map[netip.Prefix][]netip.Addr
	external   map[netip.Prefix]bool
	unresolved map[netip.Prefix]calc.Unresolved
	dirty      dirtyset.Set[netip.Prefix]
	// all: something every route depends on changed.
	all bool
}

// New returns a manager writing into rt.
func New(rt routetable.Writer, o Options) *Manager {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Manager{
		rt: rt, opts: o, underlay: calc.Underlay{Uplink: o.Uplink},
		pools: map[string]model.Pool{}, routing: map[string]poolRouting{}, resolver: calc.NewResolver(nil),
		learned: map[netip.Prefix][]netip.Addr{}, external: map[netip.Prefix]bool{}, unresolved: map[netip.Prefix]calc.Unresolved{},
	}
}

// OnUpdate records what learned routes depend on; other messages are ignored.
func (m *Manager) OnUpdate(msg any) {
	switch u := msg.(type) {
	case model.RouteUpdate:
		p := u.Prefix.Masked()
		hops := u.BestFirst()
		if old, ok := m.learned[p]; ok && slices.Equal(old, hops) && m.external[p] == u.External {
			return
		}
		m.learned[p] = hops
		if u.External {
			m.external[p] = true
		} else {
			delete(m.external, p)
		}
		m.dirty.Add(p)
	case model.RouteRemove:
		p := u.Prefix.Masked()
		if _, ok := m.learned[p]; !ok {
			return
		}
		delete(m.learned, p)
		delete(m.external, p)
		m.dirty.Add(p)
	case model.PoolUpdate:
		m.setPool(u.Pool.Name, &u.Pool)
	case model.PoolRemove:
		m.setPool(u.Name, nil)
	case model.NodeUpdate:
		if u.Node.Name == m.opts.NodeName && u.Node.BGPAddress != m.underlay.Addr {
			m.underlay.Addr, m.all = u.Node.BGPAddress, true
		}
	case model.NodeRemove:
		if u.Name == m.opts.NodeName && m.underlay.Addr != (ipfamily.Pair[netip.Prefix]{}) {
			m.underlay.Addr, m.all = ipfamily.Pair[netip.Prefix]{}, true
		}
	case routetable.HostRoutesUpdate:
		m.resolver, m.all = calc.NewResolver(u.Routes), true
	}
}

func (m *Manager) setPool(name string, p *model.Pool) {
	old, had := m.routing[name]
	if p == nil {
		if !had {
			return
		}
		delete(m.pools, name)
		delete(m.routing, name)
	} else {
		r := poolRouting{cidr: p.CIDR, mode: p.IPIPMode, vxlan: p.VXLANMode}
		if had && old == r {
			return
		}
		m.pools[name], m.routing[name] = *p, r
	}
	sorted, bad := calc.NewPools(slices.Collect(maps.Values(m.pools)))
	for _, b := range bad {
		m.opts.Log.Warn("pool skipped: its cidr is not an IPv4 or IPv6 prefix", "pool", b.Name, "cidr", b.CIDR)
	}
	m.sorted, m.all = sorted, true
}

// CompleteDeferredWork decides the routes of the prefixes that changed, or of every learned
// prefix when the pools, this node's addresses or the host's routes did.
func (m *Manager) CompleteDeferredWork(context.Context, bool) error {
	if m.all {
		for p := range m.learned {
			m.decide(p)
		}
		// Withdrawn since the last pass: not learned any more, still to be removed.
		for _, p := range m.dirty.Keys() {
			if _, ok := m.learned[p]; !ok {
				m.decide(p)
			}
		}
		m.all = false
	} else {
		for _, p := range m.dirty.Keys() {
			m.decide(p)
		}
	}
	m.dirty.Clear()
	if m.opts.Unresolved != nil {
		m.opts.Unresolved.Set(float64(len(m.unresolved)))
	}
	return nil
}

func (m *Manager) decide(p netip.Prefix) {
	hops, ok := m.learned[p]
	if !ok {
		m.rt.RemoveRoute(routetable.ClassLearned, p)
		m.report(p, nil)
		return
	}
	l := calc.LearnedPaths(m.underlay, m.sorted, m.resolver, p, hops, m.external[p])
	if l.OK {
		m.rt.SetRoute(routetable.ClassLearned, l.Route)
	} else {
		m.rt.RemoveRoute(routetable.ClassLearned, p)
	}
	m.report(p, l.Unresolved)
}

// report records whether p is unresolved now (u nil: it is not), and logs a change.
func (m *Manager) report(p netip.Prefix, u *calc.Unresolved) {
	was, had := m.unresolved[p]
	if u == nil {
		if had {
			delete(m.unresolved, p)
			m.opts.Log.Info("BGP route next hop resolved or withdrawn", "prefix", p)
		}
		return
	}
	switch {
	case had && was == *u:
	case u.Partial:
		m.opts.Log.Warn("BGP multipath route programmed without a next hop: unresolved", "prefix", p, "nextHop", u.NextHop, "reason", u.Reason)
	default:
		m.opts.Log.Warn("BGP route not programmed: next hop unresolved", "prefix", p, "nextHop", u.NextHop, "reason", u.Reason)
	}
	m.unresolved[p] = *u
}

// Unresolved returns the learned routes whose next hop is unusable now, with the reasons (a
// multipath route's too, programmed over the other next hops).
func (m *Manager) Unresolved() map[netip.Prefix]string {
	out := make(map[netip.Prefix]string, len(m.unresolved))
	for p, u := range m.unresolved {
		out[p] = u.String()
	}
	return out
}
